"""Several clients flag and expunge in one folder while the agent delivers into it; afterwards the
index matches the files, UIDs are unique and increasing, and every session sees the folder as it is."""

from __future__ import annotations

import asyncio
import random
import re

from imaptools import Client, connect

from pizzamail.imap import ImapServer
from pizzamail.mailbox import Folder, Mailbox, maildir

_FETCH = re.compile(rb"\* (\d+) FETCH \(UID (\d+) FLAGS \(([^)]*)\)\)\r\n")
_FLAGS = ("\\Seen", "\\Flagged", "\\Answered", "$Todo", "$Label1")


async def ok(c: Client, command: bytes) -> list[bytes]:
    lines = await c.command(command)
    tag = command.split(b" ", 1)[0]
    assert lines[-1].startswith(tag + b" OK "), (command, lines[-1])
    return lines


def searched(lines: list[bytes]) -> list[int]:
    found = next(line for line in lines if line.startswith(b"* SEARCH"))
    return [int(n) for n in found.split()[2:]]


async def busy_client(c: Client, rng: random.Random, rounds: int) -> None:
    await ok(c, b"s SELECT INBOX")
    for n in range(rounds):
        uids = searched(await ok(c, b"u UID SEARCH ALL"))
        if not uids:
            continue
        picked = b",".join(b"%d" % u for u in rng.sample(uids, min(3, len(uids))))
        flag = rng.choice(_FLAGS).encode()
        action = rng.random()
        if action < 0.4:
            await ok(c, b"a UID STORE " + picked + b" +FLAGS (" + flag + b")")
        elif action < 0.7:
            await ok(c, b"r UID STORE " + picked + b" -FLAGS.SILENT (" + flag + b")")
        elif action < 0.85:
            await ok(c, b"d UID STORE " + picked + b" +FLAGS.SILENT (\\Deleted)")
            await ok(c, b"x UID EXPUNGE " + picked if n % 2 else b"x EXPUNGE")
        else:
            await ok(c, b"f FETCH 1:* (UID FLAGS)")
        await ok(c, b"n NOOP")


async def agent(mailbox: Mailbox, folder: Folder, count: int) -> list[int]:
    uids = []
    for i in range(count):
        data = b"From: bot@pizzamail.localhost\r\nSubject: progress %d\r\n\r\nstep %d\r\n" % (i, i)
        uids.append(await mailbox.deliver(folder, data, flags={"\\Seen"} if i % 3 == 0 else ()))
        await asyncio.sleep(0)  # let the sessions interleave with the deliveries
    return uids


async def session_view(c: Client) -> dict[int, frozenset[str]]:
    """What a session sees after NOOP: its numbering must be 1..n in UID order."""
    await ok(c, b"n NOOP")
    lines = await ok(c, b"f FETCH 1:* (UID FLAGS)")
    seen: dict[int, frozenset[str]] = {}
    for number, line in enumerate(lines[:-1], 1):
        m = _FETCH.fullmatch(line)
        assert m is not None, line
        assert int(m.group(1)) == number
        flags = frozenset(m.group(3).decode().split()) - {"\\Recent"}
        seen[int(m.group(2))] = flags
    assert list(seen) == sorted(seen)
    return seen


async def test_clients_and_agent_on_one_folder(
    server: ImapServer, mailbox: Mailbox, sample: list[bytes]
) -> None:
    folder = await mailbox.folder("INBOX")
    assert folder is not None
    clients = [await connect(server) for _ in range(4)]
    try:
        work = [busy_client(c, random.Random(i), 25) for i, c in enumerate(clients)]
        results = await asyncio.gather(agent(mailbox, folder, 40), *work)
        delivered = results[0]
        assert delivered == sorted(delivered) and len(set(delivered)) == 40
        assert delivered[0] > len(sample)

        rows = await mailbox.messages(folder)
        truth = {r.uid: r.flags for r in rows}
        assert [r.uid for r in rows] == sorted(truth)
        for c in clients:
            assert await session_view(c) == truth

        files = maildir.scan(mailbox.path(folder))
        assert set(files) == {r.name for r in rows}
        for row in rows:
            subdir, name = files[row.name]
            assert subdir == row.subdir
            system = {f for f in row.flags if f in maildir.FLAG_LETTERS}
            assert maildir.split_name(name)[1] == system
        assert await mailbox.reconcile(folder) == (0, 0)  # nothing for a rescan to repair
    finally:
        for c in clients:
            await c.close()
