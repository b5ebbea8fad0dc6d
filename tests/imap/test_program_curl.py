"""curl against our server: LIST, EXAMINE, STATUS, UID SEARCH, and fetching messages and sections
by UID (curl's IMAP URLs, RFC 5092), compared with the stored bytes."""

from __future__ import annotations

import asyncio
import re

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Mailbox
from tests.programs import missing, needs

pytestmark = needs(missing("curl", install="apt-get install curl"))


async def run(*argv: str) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def curl(url: str, *args: str, user: str = "me:pw") -> bytes:
    code, out, err = await run("curl", "-sS", "--user", user, url, *args)
    assert code == 0, err.decode(errors="replace")
    return out


def mime_part(message: bytes, boundary: bytes, n: int) -> tuple[bytes, bytes]:
    """Part ``n`` (from 1) of a multipart message: its MIME header (with the blank line) and body."""
    part = message.split(b"\r\n--" + boundary)[n]
    part = part.split(b"\r\n", 1)[1]  # the rest of the boundary line
    head, _, body = part.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", body


async def test_curl_lists_folders(server: ImapServer, sample: list[bytes]) -> None:
    out = await curl(f"imap://127.0.0.1:{server.port}/")
    listed = {}
    for line in out.splitlines():
        m = re.fullmatch(rb'\* LIST \(([^)]*)\) "/" (\S+)', line)
        assert m, line
        listed[m.group(2)] = set(m.group(1).split())
    assert list(listed) == [b"INBOX", b"Action", b"Activity", b"Sent", b"Drafts", b"Archive", b"Trash"]
    assert {name for name, attrs in listed.items() if attrs & {b"\\Sent", b"\\Trash"}} == {b"Sent", b"Trash"}


async def test_curl_examine_status_and_search(server: ImapServer, sample: list[bytes]) -> None:
    base = f"imap://127.0.0.1:{server.port}"
    out = await curl(base + "/", "-X", "EXAMINE INBOX")
    assert b"* 9 EXISTS\r\n" in out
    assert b"* OK [UIDNEXT 10]" in out
    assert b"* OK [UNSEEN 5]" in out
    out = await curl(base + "/", "-X", "STATUS INBOX (MESSAGES UNSEEN UIDNEXT)")
    assert out == b"* STATUS INBOX (MESSAGES 9 UNSEEN 4 UIDNEXT 10)\r\n"
    url = base + "/INBOX"
    assert await curl(url, "-X", "UID SEARCH ALL") == b"* SEARCH 1 2 3 4 5 6 7 8 9\r\n"
    assert await curl(url + "?UNSEEN") == b"* SEARCH 5 6 7 8\r\n"
    assert await curl(url, "-X", 'UID SEARCH SUBJECT "Approval" UNSEEN') == b"* SEARCH 8\r\n"
    assert await curl(url, "-X", "UID SEARCH CHARSET UTF-8 SUBJECT \"Größentabelle\"") == b"* SEARCH 6\r\n"
    assert await curl(
        url, "-X", 'UID SEARCH HEADER Message-ID "<fwd-7@pizzamail.localhost>"'
    ) == b"* SEARCH 4\r\n"


async def test_curl_fetches_messages_and_sections_unchanged(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    url = f"imap://127.0.0.1:{server.port}/INBOX"
    for uid in (1, 3, 4, 6):
        assert await curl(f"{url};UID={uid}") == sample[uid - 1]
    mixed = sample[2]  # UID 3: multipart/mixed with a text part and attachments
    header = mixed.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"
    assert await curl(f"{url};UID=3;SECTION=HEADER") == header
    part_head, part_body = mime_part(mixed, b"=_mixed_2", 1)
    assert await curl(f"{url};UID=3;SECTION=1") == part_body
    assert await curl(f"{url};UID=3;SECTION=1.MIME") == part_head
    part_head, part_body = mime_part(mixed, b"=_mixed_2", 2)
    assert await curl(f"{url};UID=3;SECTION=2") == part_body
    text = mixed.partition(b"\r\n\r\n")[2]
    assert await curl(f"{url};UID=3;SECTION=TEXT;PARTIAL=0.20") == text[:20]
    # curl fetches BODY[] (not PEEK) in a selected folder: the unseen message is now seen.
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None
    assert await curl(f"{url};UID=5") == sample[4]
    flags = {row.uid: row.flags for row in await mailbox.messages(inbox)}
    assert flags[5] == {"\\Seen"}


async def test_curl_refusals(server: ImapServer, sample: list[bytes]) -> None:
    url = f"imap://127.0.0.1:{server.port}/INBOX"
    code, _, _ = await run("curl", "-sS", "--user", "me:wrong", url + ";UID=4")
    assert code != 0
    # A UIDVALIDITY in the URL that is not the folder's: curl refuses to fetch (error 78).
    code, out, _ = await run("curl", "-sS", "--user", "me:pw", url + ";UIDVALIDITY=1;UID=4")
    assert code == 78 and out == b""
    code, out, _ = await run("curl", "-sS", "--user", "me:pw", url + ";UID=99")
    assert code != 0 and out == b""
