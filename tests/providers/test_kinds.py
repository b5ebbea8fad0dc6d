"""Provider kinds: config takes any kind string; the provider registry decides, so a kind added with
``register_kind`` is configurable end to end and an unknown one is refused naming the known ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pizzamail.cli import cli
from pizzamail.config import load_config, parse_config
from pizzamail.errors import ConfigError
from pizzamail.providers import KINDS, ProviderArgs, check_kinds, provider_for, register_kind
from pizzamail.providers.local import LocalProvider
from pizzamail.providers.types import Provider
from pizzamail.secrets import SecretStore

MINE = """
[agent]
model = "mine:tiny-1"

[providers.mine]
kind = "echo"
key_required = false
"""


@pytest.fixture
def echo_kind() -> Iterator[list[ProviderArgs]]:
    built: list[ProviderArgs] = []

    def factory(args: ProviderArgs) -> Provider:
        built.append(args)
        return LocalProvider(name=args.name, model=args.model)

    register_kind("echo", factory)
    yield built
    del KINDS["echo"]


def test_an_unknown_kind_is_refused_naming_the_known_ones() -> None:
    config = parse_config({"providers": {"x": {"kind": "soap"}}})  # config sits below providers
    with pytest.raises(ConfigError) as info:
        check_kinds(config)
    assert info.value.key == "providers.x.kind" and info.value.value == "soap"
    assert "anthropic, bedrock, local, openai" in info.value.message
    assert "config.toml" in info.value.cli_message()


def test_a_registered_kind_is_configurable_end_to_end(tmp_path: Path, echo_kind: list[ProviderArgs]) -> None:
    (tmp_path / "config.toml").write_text(MINE)
    config = load_config(tmp_path / "config.toml")
    check_kinds(config)
    provider = provider_for(config, SecretStore(fallback=tmp_path / "secrets", scope=str(tmp_path)))
    assert isinstance(provider, LocalProvider)
    assert [(a.name, a.model, a.settings.kind) for a in echo_kind] == [("mine", "tiny-1", "echo")]


def test_doctor_and_models_check_the_kinds(tmp_path: Path, echo_kind: list[ProviderArgs]) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["--home", str(tmp_path), "init"]).exit_code == 0
    (tmp_path / "config.toml").write_text(MINE.replace('"echo"', '"soap"'))
    refused = runner.invoke(cli, ["--home", str(tmp_path), "models"])  # main() prints what it raises
    assert isinstance(refused.exception, ConfigError) and refused.exception.key == "providers.mine.kind"
    assert "echo" in refused.exception.allowed
    doctor = runner.invoke(cli, ["--home", str(tmp_path), "doctor", "--json"])
    assert "'providers.mine.kind' has value 'soap'" in doctor.output
    (tmp_path / "config.toml").write_text(MINE)
    assert runner.invoke(cli, ["--home", str(tmp_path), "models", "--json"]).exit_code == 0
