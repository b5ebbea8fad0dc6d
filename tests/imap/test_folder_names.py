"""Folder management at the edges: names the file system cannot hold, renames that would collide,
and subscriptions (CREATE does not subscribe; pizzamail's own folders are subscribed)."""

from __future__ import annotations

from imaptools import Client

from pizzamail.mailbox import Mailbox


async def lsub(client: Client) -> list[bytes]:
    lines = await client.command(b'l LSUB "" *')
    return [line.rsplit(b" ", 1)[1].strip() for line in lines[:-1]]


async def test_create_does_not_subscribe_but_own_folders_are(client: Client, mailbox: Mailbox) -> None:
    assert await lsub(client) == [b"INBOX", b"Action", b"Activity", b"Sent", b"Drafts", b"Archive", b"Trash"]
    assert await client.command(b"a CREATE Projects") == [b"a OK CREATE completed\r\n"]
    assert b"Projects" not in await lsub(client)
    assert await client.command(b"b SUBSCRIBE Projects") == [b"b OK SUBSCRIBE completed\r\n"]
    assert b"Projects" in await lsub(client)
    # A folder pizzamail files into on its own (a watch's target, say) is subscribed, so it shows.
    await mailbox.create_folder("Filed/Reports")
    assert b"Filed/Reports" in await lsub(client)
