"""``pizzamail serve``'s first words: which model answers, and a misspelt provider that stops it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.harness import Served, serve_env, write_config


def test_the_banner_names_the_model_and_where_its_key_is(served: Served) -> None:
    served.start()
    text = "\n".join(served.output)
    assert "Model that answers your mail:\n  openai:fake-model, key: env $OPENAI_API_KEY\n" in text


def test_a_misspelt_provider_stops_serve_and_says_what_fixes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, base_url=None)
    config = home / "config.toml"
    config.write_text(config.read_text().replace('"openai:fake-model"', '"opneai:fake-model"'))
    proc = subprocess.run([sys.executable, "-m", "pizzamail", "serve"], env=serve_env(home),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "pizzamail is ready" not in proc.stdout
    assert proc.stderr.splitlines() == [
        "error: config key 'agent.model' has value 'opneai:fake-model'; allowed: a known provider before"
        " the colon (openai, anthropic, local, bedrock, ollama); did you mean openai:? or add a"
        " [providers.opneai] section",
        f"  fix: edit {config}",
    ]
