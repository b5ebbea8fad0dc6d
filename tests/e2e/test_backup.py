"""``pizzamail backup`` of a serving home, restored into a new home and served: an IMAP client sees
the same folders, UIDVALIDITY, UIDs, flags and mails, and ``threads`` the same threads."""

from __future__ import annotations

import asyncio
import email
import imaplib
import json
import re
import smtplib
import subprocess
import sys
import threading
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import aioimaplib

from tests.e2e.harness import BOT, Served, serve_env, task_mail
from tests.e2e.test_durability import bytes_of_every_message
from tests.e2e.test_roundtrip import connect, idle_until_exists
from tests.fakes.openai_server import FakeOpenAI, text


@dataclass(frozen=True)
class Folder:
    uidvalidity: int
    uidnext: int
    mails: dict[int, tuple[str, frozenset[str]]]
    """UID -> (Message-ID, flags without \\Recent)"""


def mailbox_view(served: Served) -> dict[str, Folder]:
    """Every folder as a read-only IMAP client sees it."""
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        _, listed = imap.list()
        names = [line.decode().rsplit(" ", 1)[1].strip('"') for line in listed if isinstance(line, bytes)]
        return {name: _folder(imap, name) for name in names}


def _folder(imap: imaplib.IMAP4, name: str) -> Folder:
    imap.select(f'"{name}"', readonly=True)
    [validity] = imap.response("UIDVALIDITY")[1]
    [uidnext] = imap.response("UIDNEXT")[1]
    _, data = imap.uid("FETCH", "1:*", "(UID FLAGS BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
    mails = {}
    for item in data:
        if isinstance(item, tuple):
            uid = int(re.search(rb"UID (\d+)", item[0]).group(1))  # type: ignore[union-attr]
            flags = re.search(rb"FLAGS \(([^)]*)\)", item[0]).group(1).decode().split()  # type: ignore[union-attr]
            message_id = str(email.message_from_bytes(item[1])["Message-ID"]).strip()
            mails[uid] = (message_id, frozenset(flags) - {"\\Recent"})
    return Folder(uidvalidity=int(validity or 0), uidnext=int(uidnext or 0), mails=mails)


def restored(served: Served, archive: Path, home: Path) -> Served:
    env = serve_env(home)
    done = subprocess.run([sys.executable, "-m", "pizzamail", "restore", str(archive)], env=env,
                          text=True, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "restored" in done.stdout
    return Served(home=home, env=env)


def copied_in(served: Served, n: int) -> EmailMessage:
    """A mail with the agent only in Cc, sent by SMTP: filed in its thread, and no run starts
    (so what the restored home holds changes no more once it serves)."""
    mail = task_mail(f"For the record {n}", subject=f"Record {n}")
    del mail["To"]
    mail["To"], mail["Cc"] = "friend@example.com", BOT
    with smtplib.SMTP("127.0.0.1", served.smtp, timeout=10) as smtp:
        smtp.login("me", served.password)
        smtp.send_message(mail, to_addrs=[BOT])
    return mail


async def wait_for_inbox(client: aioimaplib.IMAP4, count: int) -> None:
    selected = await client.select("INBOX")
    lines = map(bytes.decode, selected.lines[:-1])
    # the last EXISTS is SELECT's own (earlier ones are updates the session had not been told yet)
    exists = [int(line.split()[0]) for line in lines if line.endswith("EXISTS")][-1]
    if exists < count:
        await idle_until_exists(client, count)


def threads(served: Served) -> list[dict[str, object]]:
    return [{k: t[k] for k in ("id", "subject", "status", "messages")}
            for t in json.loads(served.cli("threads", "--json"))]


def shape_the_mailbox(served: Served) -> None:
    """What a user does besides receiving: flags, a keyword, a folder, a move, a deletion."""
    with imaplib.IMAP4("127.0.0.1", served.imap) as imap:
        imap.login("me", served.password)
        imap.create("Kept")
        imap.select("INBOX")
        imap.uid("STORE", "1", "+FLAGS", r"(\Flagged $Important)")
        imap.uid("STORE", "2", "-FLAGS", r"(\Seen)")
        imap.uid("STORE", "3", "+FLAGS", r"(\Answered)")
        imap.uid("MOVE", "4", "Kept")
        imap.uid("STORE", "5", "+FLAGS", r"(\Deleted)")
        imap.expunge()


async def test_a_backup_under_load_restores_to_the_mailbox_an_imap_client_saw(
    served: Served, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script([text(f"Answer {n}") for n in range(40)])
    served.start()
    client = await connect(served)
    for n in range(3):
        await asyncio.to_thread(served.send, task_mail(f"Task {n}", subject=f"Task {n}"))
    await idle_until_exists(client, 6)
    await asyncio.to_thread(shape_the_mailbox, served)

    # mail keeps coming in over SMTP while the backup is taken
    backing_up, sent = threading.Event(), []

    def send_meanwhile() -> None:
        while backing_up.is_set() or not sent:
            sent.append(copied_in(served, len(sent)))

    backing_up.set()
    sender = threading.Thread(target=send_meanwhile)
    sender.start()
    busy, quiet = tmp_path / "busy.tar.gz", tmp_path / "quiet.tar.gz"
    await asyncio.to_thread(served.cli, "backup", str(busy))
    backing_up.clear()
    sender.join(timeout=60)
    await wait_for_inbox(client, 4 + len(sent))  # 6, less one moved and one expunged
    await client.logout()

    await asyncio.to_thread(served.cli, "backup", str(quiet))
    live, live_threads = mailbox_view(served), threads(served)
    served.stop()

    same = restored(served, quiet, tmp_path / "quiet-home").start()
    try:
        assert mailbox_view(same) == live
        assert threads(same) == live_threads
        assert live["INBOX"].mails[1][1] == {"\\Seen", "\\Flagged", "$Important"}
        assert [m for m, _ in live["Kept"].mails.values()] != []
    finally:
        same.stop()
    assert len(await bytes_of_every_message(same.home)) >= 6  # every mail's bytes came along

    earlier = restored(served, busy, tmp_path / "busy-home").start()
    try:
        view, earlier_threads = mailbox_view(earlier), threads(earlier)
    finally:
        earlier.stop()
    await bytes_of_every_message(earlier.home)
    # the live home as it was at one moment: each folder's mails up to a UID, nothing else
    assert view.keys() == live.keys()
    for name, folder in view.items():
        assert folder.uidvalidity == live[name].uidvalidity
        assert folder.mails == {uid: m for uid, m in live[name].mails.items() if uid < folder.uidnext}
    assert len(view["INBOX"].mails) < len(live["INBOX"].mails)  # mail came in after the copy
    by_id = {t["id"]: t for t in live_threads}
    assert all(t == by_id[t["id"]] for t in earlier_threads)  # each thread the copy holds, as it was
    assert len(earlier_threads) < len(live_threads)
