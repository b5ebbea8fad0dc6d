"""Client setup against a running ``serve``: Thunderbird's autoconfig over real HTTP, and neomutt
configured with nothing but the snippet ``pizzamail onboard`` prints (TLS checked against our
certificate, the password from ``pizzamail account password``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import BOT, REPO, Served
from tests.e2e.test_roundtrip import connect, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, text
from tests.imap.test_program_neomutt import drive
from tests.programs import find, missing, needs
from tests.test_onboard import imap_smtp, servers

AUTOCONFIG = ("/.well-known/autoconfig/mail/config-v1.1.xml", "/mail/config-v1.1.xml",
              "/autoconfig/v1.1/pizzamail.localhost")


async def test_thunderbird_reads_the_servers_as_they_run_over_http(served: Served) -> None:
    served.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served.http}", timeout=10) as client:
        for path in AUTOCONFIG:
            answer = await client.get(path, params={"emailaddress": "me@pizzamail.localhost"})
            assert answer.status_code == 200, path
            # Thunderbird parses only a text/xml or application/xml answer
            assert answer.headers["content-type"].startswith("application/xml")
            root = ET.fromstring(answer.content)
            assert [d.text for d in root.iter("domain")] == ["pizzamail.localhost"]
            assert servers(answer.content) == imap_smtp(host="127.0.0.1", imaps=served.imaps,
                                                        imap=served.imap, smtp=served.smtp)
        assert (await client.get("/autoconfig/v1.1/elsewhere.example")).status_code == 404


def snippet(printed: str) -> str:
    """The neomutt lines of ``onboard``'s output: from its heading to the blank line."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("neomutt or mutt")) + 1
    end = lines.index("", start)
    return "\n".join(lines[start:end]) + "\n"


def pizzamail_on_path(served: Served, bin_dir: Path) -> str:
    """A ``pizzamail`` command for this home, as the snippet's password command expects; a PATH."""
    bin_dir.mkdir()
    command = bin_dir / "pizzamail"
    env = " ".join(f"{key}={served.env[key]}" for key in ("PIZZAMAIL_HOME", "PYTHON_KEYRING_BACKEND"))
    command.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} {env} exec {sys.executable} -m pizzamail "$@"\n')
    command.chmod(0o755)
    return f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"


@needs(missing("neomutt", install="apt-get install neomutt"))
async def test_neomutt_with_the_printed_snippet_sends_a_task_and_reads_the_reply(
    served: Served, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    neomutt = find("neomutt")
    assert neomutt is not None
    fake_openai.script([text("Pizza at noon, on the terrace.")])
    served.start()
    rc = tmp_path / "neomuttrc"
    rc.write_text(snippet(served.cli("onboard", "--out", str(tmp_path / "p.mobileconfig")))
                  + 'set header_cache = ""\nset message_cachedir = ""\nset wait_key = no\nset quit = yes\n')
    monkeypatch.setenv("PATH", pizzamail_on_path(served, tmp_path / "bin"))  # drive() passes PATH on
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"}

    imap = await connect(served)
    sent = await asyncio.to_thread(
        subprocess.run, [neomutt, "-n", "-F", str(rc), "-s", "Lunch plan", BOT],
        input="Where do we eat on Friday?\n", text=True, capture_output=True, env=env, timeout=120)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    await idle_until_exists(imap, 1)

    piped = tmp_path / "piped.eml"
    keys = f"<limit>~b terrace<enter><pipe-message>cat > {piped}<enter><quit>"
    code, screen = await asyncio.to_thread(
        drive, [neomutt, "-n", "-F", str(rc), "-e", f"push '{keys}'"], tmp_path)
    assert code == 0, screen[-2000:].decode(errors="replace")
    assert "Pizza at noon, on the terrace." in piped.read_text()
    assert "Subject: Re: Lunch plan" in piped.read_text()
