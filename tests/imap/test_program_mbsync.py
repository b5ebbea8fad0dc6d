"""mbsync (isync) against our server: a full pull, then incremental syncs with flags both ways."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Folder, Mailbox
from tests.programs import missing, needs

pytestmark = needs(missing("mbsync", install="apt-get install isync"))

NEW_MAIL = (
    b"From: Pizzamail Bot <bot@pizzamail.localhost>\r\nTo: me@pizzamail.localhost\r\n"
    b"Subject: Progress: weekday-issues run 5\r\nMessage-ID: <run-5.progress-1@pizzamail.localhost>\r\n"
    b"Date: Tue, 25 Nov 2025 09:00:00 +0000\r\n\r\nStep 1 of 3 done.\r\n"
)


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


def mbsyncrc(tmp: Path, port: int, tls_keyword: str, *, sync: str, expunge: str = "None") -> Path:
    local = tmp / "mail"
    local.mkdir(exist_ok=True)
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
Sync {sync}
Expunge {expunge}
SyncState *
""")
    return rc


async def mbsync(rc: Path) -> None:
    code, out, err = await run("mbsync", "-a", "-c", str(rc))
    assert code == 0, (out + err).decode(errors="replace")


def local_files(tmp: Path) -> list[Path]:
    inbox = tmp / "mail" / "INBOX"
    return sorted(p for sub in ("cur", "new") for p in (inbox / sub).iterdir())


def local_by_id(tmp: Path) -> dict[bytes, Path]:
    """Local files by Message-ID; fails on a duplicate."""
    found: dict[bytes, Path] = {}
    for path in local_files(tmp):
        m = re.search(rb"(?mi)^Message-ID: (\S+)", path.read_bytes())
        assert m, path
        assert m.group(1) not in found, f"duplicate {m.group(1)!r}"
        found[m.group(1)] = path
    return found


def letters(path: Path) -> str:
    """The Maildir flag letters of a local file ('' for a file in new/ without info)."""
    return path.name.rpartition(":2,")[2] if ":2," in path.name else ""


async def server_flags(mailbox: Mailbox, inbox: Folder) -> dict[bytes, frozenset[str]]:
    flags = {}
    for row in await mailbox.messages(inbox):
        m = re.search(rb"(?mi)^Message-ID: (\S+)", await mailbox.read(inbox, row) or b"")
        assert m
        flags[m.group(1)] = row.flags
    return flags


async def inbox_of(mailbox: Mailbox) -> Folder:
    folder = await mailbox.folder("INBOX")
    assert folder is not None
    return folder


async def test_mbsync_pulls_every_message_unchanged(
    server: ImapServer, sample: list[bytes], tmp_path: Path
) -> None:
    rc = mbsyncrc(tmp_path, server.port, await mbsync_tls_keyword(), sync="Pull")
    await mbsync(rc)
    files = local_files(tmp_path)
    # mbsync stores Maildir files with local (LF) line ends and tags each new message with its
    # own X-TUID header; apart from that, nothing may differ.
    pulled = sorted(re.sub(rb"(?m)^X-TUID: \S+\n", b"", p.read_bytes()) for p in files)
    assert pulled == sorted(m.replace(b"\r\n", b"\n") for m in sample)
    assert sum(1 for p in files if "S" in letters(p)) == 5
    # A second run finds nothing new and changes nothing.
    await mbsync(rc)
    assert len(local_files(tmp_path)) == len(sample)


async def test_mbsync_incremental_sync_carries_flags_both_ways(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes], tmp_path: Path
) -> None:
    rc = mbsyncrc(tmp_path, server.port, await mbsync_tls_keyword(), sync="All")
    await mbsync(rc)
    assert len(local_by_id(tmp_path)) == len(sample)
    inbox = await inbox_of(mailbox)

    # Server side: read and flag UID 6 (<8bit-header-1@example.org>), and a new message arrives.
    await mailbox.set_flags(inbox, {6: {"\\Seen", "\\Flagged"}})
    await mailbox.deliver(inbox, NEW_MAIL)
    # Near side: the user reads and flags <run-4.progress-1@...> (UID 7, unseen on the server)
    # and marks <task-1@...> (UID 1, seen) as answered.
    local = local_by_id(tmp_path)
    for mid, extra in ((b"<run-4.progress-1@pizzamail.localhost>", "FS"),
                       (b"<task-1@pizzamail.localhost>", "R")):
        path = local[mid]
        new = "".join(sorted(set(letters(path)) | set(extra)))
        path.rename(path.parent.parent / "cur" / (path.name.partition(":2,")[0] + ":2," + new))

    await mbsync(rc)

    local = local_by_id(tmp_path)
    assert len(local) == len(sample) + 1, "the new message arrives once, nothing is duplicated"
    assert letters(local[b"<run-5.progress-1@pizzamail.localhost>"]) == ""
    assert letters(local[b"<8bit-header-1@example.org>"]) == "FS"
    flags = await server_flags(mailbox, inbox)
    assert flags[b"<run-4.progress-1@pizzamail.localhost>"] == {"\\Flagged", "\\Seen"}
    assert flags[b"<task-1@pizzamail.localhost>"] == {"\\Answered", "\\Seen"}
    assert flags[b"<8bit-header-1@example.org>"] == {"\\Flagged", "\\Seen"}
    assert len(flags) == len(sample) + 1

    # A third run with nothing changed on either side changes nothing.
    before = sorted(p.name for p in local_files(tmp_path))
    await mbsync(rc)
    assert sorted(p.name for p in local_files(tmp_path)) == before
    assert await server_flags(mailbox, inbox) == flags


async def test_mbsync_expunge_both_propagates_deletions(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes], tmp_path: Path
) -> None:
    rc = mbsyncrc(tmp_path, server.port, await mbsync_tls_keyword(), sync="All", expunge="Both")
    await mbsync(rc)
    inbox = await inbox_of(mailbox)
    # The user deletes <task-1@...> locally (trashed flag, as mutt does it on a Maildir); the
    # server-side agent deletes <run-3.step-2@...> (UID 5) the IMAP way.
    path = local_by_id(tmp_path)[b"<task-1@pizzamail.localhost>"]
    path.rename(path.with_name(path.name + "T"))
    await mailbox.set_flags(inbox, {5: {"\\Deleted"}})

    await mbsync(rc)

    gone = {b"<task-1@pizzamail.localhost>", b"<run-3.step-2@pizzamail.localhost>"}
    local = local_by_id(tmp_path)
    flags = await server_flags(mailbox, inbox)
    assert set(local) == set(flags)
    assert len(flags) == len(sample) - 2
    assert not gone & set(flags)
