"""Mail programs against our server: mbsync pulls the sample INBOX, curl searches and fetches."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from pizzamail.imap import ImapServer

MBSYNC = shutil.which("mbsync")
CURL = shutil.which("curl")


async def run(*argv: str) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def mbsync_tls_keyword() -> str:
    """isync 1.5 renamed SSLType to TLSType."""
    _, out, err = await run("mbsync", "--version")
    m = re.search(rb"(\d+)\.(\d+)", out + err)
    version = (int(m.group(1)), int(m.group(2))) if m else (1, 4)
    return "TLSType" if version >= (1, 5) else "SSLType"


def mbsyncrc(tmp: Path, port: int, tls_keyword: str) -> Path:
    local = tmp / "mail"
    local.mkdir()
    rc = tmp / "mbsyncrc"
    rc.write_text(f"""\
IMAPAccount pizzamail
Host 127.0.0.1
Port {port}
User me
Pass pw
{tls_keyword} None
AuthMechs LOGIN

IMAPStore far
Account pizzamail

MaildirStore near
Path {local}/
Inbox {local}/INBOX
SubFolders Verbatim

Channel pizzamail
Far :far:
Near :near:
Patterns INBOX
Create Near
Sync Pull
SyncState *
""")
    return rc


@pytest.mark.skipif(MBSYNC is None, reason="mbsync not installed (apt-get install isync)")
async def test_mbsync_pulls_every_message_unchanged(
    server: ImapServer, sample: list[bytes], tmp_path: Path
) -> None:
    rc = mbsyncrc(tmp_path, server.port, await mbsync_tls_keyword())
    code, _out, err = await run("mbsync", "-a", "-c", str(rc))
    assert code == 0, err.decode(errors="replace")
    inbox = tmp_path / "mail" / "INBOX"
    files = sorted(p for sub in ("cur", "new") for p in (inbox / sub).iterdir())
    # mbsync stores Maildir files with local (LF) line ends and tags each new message with its
    # own X-TUID header; apart from that, nothing may differ.
    pulled = sorted(re.sub(rb"(?m)^X-TUID: \S+\n", b"", p.read_bytes()) for p in files)
    assert pulled == sorted(m.replace(b"\r\n", b"\n") for m in sample)
    seen = sum(1 for p in files if "S" in p.name.rpartition(",")[2])
    assert seen == 5
    # A second run finds nothing new and changes nothing.
    code, _, err = await run("mbsync", "-a", "-c", str(rc))
    assert code == 0, err.decode(errors="replace")
    assert len([p for sub in ("cur", "new") for p in (inbox / sub).iterdir()]) == len(sample)


@pytest.mark.skipif(CURL is None, reason="curl not installed")
async def test_curl_search_and_fetch(server: ImapServer, sample: list[bytes]) -> None:
    url = f"imap://127.0.0.1:{server.port}/INBOX"
    code, out, err = await run("curl", "-sS", "--user", "me:pw", url, "-X", "UID SEARCH ALL")
    assert code == 0, err
    assert out == b"* SEARCH 1 2 3 4 5 6 7 8 9\r\n"
    code, out, err = await run("curl", "-sS", "--user", "me:pw", url + ";UID=4")
    assert code == 0, err
    assert out == sample[3]
    code, out, err = await run("curl", "-sS", "--user", "me:wrong", url + ";UID=4")
    assert code != 0
