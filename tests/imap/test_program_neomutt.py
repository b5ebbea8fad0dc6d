"""neomutt against our server, driven headless: it reads, flags, pipes and deletes, then syncs.

neomutt is a curses program and wants a terminal, so it runs on a pseudo-terminal whose output
is drained (and thrown away) until it exits; the keys it presses come from ``push`` in ``-e``.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox
from tests.programs import find, missing, needs

NEOMUTT = find("neomutt", "mutt")
pytestmark = needs(missing("neomutt", "mutt", install="apt-get install neomutt"))


def muttrc(tmp: Path, port: int) -> Path:
    rc = tmp / "muttrc"
    rc.write_text(f"""\
set imap_user = "me"
set imap_pass = "pw"
set folder = "imap://127.0.0.1:{port}/"
set spoolfile = "+INBOX"
set ssl_starttls = no
set ssl_force_tls = no
set imap_check_subscribed = no
set header_cache = ""
set message_cachedir = ""
set sort = mailbox-order
set quit = yes
set delete = yes
set wait_key = no
set pipe_decode = no
set mark_old = no
""")
    return rc


def drive(argv: list[str], home: Path, timeout: float = 120) -> tuple[int, bytes]:
    """Run a curses program on a pseudo-terminal until it exits; its exit code and screen bytes."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "vt100",
           "LANG": "C.UTF-8"}
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    screen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the program closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        else:
            proc.kill()
        return proc.wait(timeout=30), bytes(screen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


async def test_neomutt_reads_flags_pipes_and_deletes(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes], tmp_path: Path
) -> None:
    assert NEOMUTT is not None
    rc = muttrc(tmp_path, server.port)
    piped = tmp_path / "piped.eml"
    # Read the 8-bit message in the pager, flag the approval request and pipe it out, delete the
    # progress note, then write the changes back (sync) and quit.
    keys = (
        "<limit>~i 8bit-header-1<enter><display-message><exit>"
        "<limit>~i approval-42<enter><flag-message>"
        f"<pipe-message>cat > {piped}<enter>"
        "<limit>~i run-4.progress-1<enter><delete-message>"
        "<sync-mailbox><quit>"
    )
    argv = [NEOMUTT, "-n", "-F", str(rc), "-e", f"push '{keys}'"]
    code, screen = await asyncio.to_thread(drive, argv, tmp_path)
    assert code == 0, screen[-2000:].decode(errors="replace")

    # neomutt pipes the message as it fetched it, with local (LF) line ends.
    assert piped.read_bytes() == sample[7].replace(b"\r\n", b"\n")
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    flags = {row.uid: row.flags for row in await mailbox.messages(inbox)}
    assert 7 not in flags, "the deleted message is expunged by the sync"
    assert "\\Flagged" in flags[8]
    assert "\\Seen" in flags[6], "reading a message in the pager marks it seen"
    untouched = {1: {"\\Seen"}, 2: {"\\Seen"}, 3: {"\\Answered", "\\Seen"},
                 4: {"\\Flagged", "\\Seen"}, 5: set(), 9: {"\\Seen"}}
    assert {uid: flags[uid] for uid in untouched} == untouched
