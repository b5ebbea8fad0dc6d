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


async def listed(client: Client, pattern: bytes = b"*") -> list[bytes]:
    lines = await client.command(b'x LIST "" ' + pattern)
    assert lines[-1] == b"x OK LIST completed\r\n"
    return [line.split(b'"/" ', 1)[1].strip() for line in lines[:-1]]


async def test_names_the_file_system_cannot_hold_get_a_clear_no(client: Client, mailbox: Mailbox) -> None:
    before = sorted(p.name for p in mailbox.root.iterdir())
    # Maildir++ keeps a folder, however deep, in one directory named ".a.b.c", dots in a name
    # escaped as %2E: its length in bytes is what the file system (255 here) limits.
    too_long = [b"x" * 300, b"x" * 255, ("\u00e4" * 128).encode(), b"." * 86, b"a/" * 127 + b"a"]
    for name in too_long:
        reply = await client.command(b"c CREATE {%d+}\r\n" % len(name) + name)
        assert reply[-1].startswith(b"c NO [LIMIT] "), (name, reply)
        assert b"bytes" in reply[-1]
    assert sorted(p.name for p in mailbox.root.iterdir()) == before
    assert await client.command(b"d CREATE " + b"x" * 254) == [b"d OK CREATE completed\r\n"]
    assert await client.command(b"e CREATE " + b"a/" * 126 + b"a") == [b"e OK CREATE completed\r\n"]
    assert b"x" * 254 in await listed(client)
    assert await client.command(b"f CREATE {8+}\r\ntab\there") == [
        b"f NO [CANNOT] that is not a usable folder name\r\n"]
    assert await client.command(b"g CREATE {2+}\r\nx\x7f") == [b"g OK CREATE completed\r\n"]


async def test_rename_checks_every_name_it_would_make(client: Client, mailbox: Mailbox) -> None:
    for name in (b"p", b"p/" + b"c" * 200, b"a", b"a/x", b"b/x"):
        assert await client.command(b"c CREATE " + name) == [b"c OK CREATE completed\r\n"]
    # p itself fits, its child would not: nothing moves.
    reply = await client.command(b"r RENAME p " + b"q" * 60)
    assert reply[-1].startswith(b"r NO [LIMIT] ")
    # a/x would become b/x, which exists: nothing moves.
    assert await client.command(b"t RENAME a b") == [b"t NO [ALREADYEXISTS] b/x already exists\r\n"]
    assert {b"p", b"p/" + b"c" * 200, b"a", b"a/x", b"b/x"} <= set(await listed(client))
    assert (await client.command(b"u SELECT a/x"))[-1] == b"u OK [READ-WRITE] SELECT completed\r\n"
    assert await client.command(b"v RENAME a z") == [b"v OK RENAME completed\r\n"]
    assert {b"z", b"z/x"} <= set(await listed(client))
    assert (mailbox.root / ".z.x" / "cur").is_dir() and not (mailbox.root / ".a.x").exists()


async def test_a_name_that_is_another_folders_directory_is_taken(client: Client, mailbox: Mailbox) -> None:
    """On a case-insensitive file system (macOS) "Foo" and "foo" are one directory; here a symlink
    plays that part. Two folders must never share a directory."""
    assert await client.command(b"c CREATE Foo") == [b"c OK CREATE completed\r\n"]
    (mailbox.root / ".foo").symlink_to(mailbox.root / ".Foo")
    assert await client.command(b"d CREATE foo") == [
        b"d NO [ALREADYEXISTS] foo would share its directory with the folder Foo\r\n"]
    assert await client.command(b"e CREATE Bar") == [b"e OK CREATE completed\r\n"]
    assert await client.command(b"f RENAME Bar foo") == [
        b"f NO [ALREADYEXISTS] foo would share its directory with the folder Foo\r\n"]


async def test_every_level_of_a_deep_name_is_listed(client: Client) -> None:
    assert await client.command(b"c CREATE one/two/three/four") == [b"c OK CREATE completed\r\n"]
    assert await client.command(b'l LIST "" one%') == [
        b'* LIST (\\Noselect \\HasChildren) "/" one\r\n', b"l OK LIST completed\r\n"]
    assert await client.command(b'm LIST "" one/two/%') == [
        b'* LIST (\\Noselect \\HasChildren) "/" one/two/three\r\n', b"m OK LIST completed\r\n"]
    assert await client.command(b'n LIST "" one/two/three/%') == [
        b'* LIST (\\HasNoChildren) "/" one/two/three/four\r\n', b"n OK LIST completed\r\n"]


async def test_a_rename_the_file_system_refuses_changes_nothing(client: Client, mailbox: Mailbox) -> None:
    for name in (b"a", b"a/x"):
        await client.command(b"c CREATE " + name)
    await client.command(b"p APPEND a/x {%d+}\r\n" % len(b"x\r\n\r\nx\r\n") + b"x\r\n\r\nx\r\n")
    stray = mailbox.root / ".b.x" / "cur"  # another program's directory, in the way of a/x -> b/x
    stray.mkdir(parents=True)
    (stray / "mail").write_bytes(b"not ours")
    reply = await client.command(b"r RENAME a b")
    assert reply[-1].startswith(b"r NO [CANNOT] the file system refused the rename: ")
    assert {b"a", b"a/x"} <= set(await listed(client)) and b"b" not in await listed(client)
    assert (mailbox.root / ".a" / "cur").is_dir() and not (mailbox.root / ".b").exists()
    assert await client.command(b"s STATUS a/x (MESSAGES)") == [
        b"* STATUS a/x (MESSAGES 1)\r\n", b"s OK STATUS completed\r\n"]


async def test_list_patterns_of_many_wildcards_answer_at_once(client: Client) -> None:
    """``*a*a*a…Z`` once became a regular expression that backtracked exponentially: ten wildcards
    held the whole process (every IMAP client, SMTP and webhooks too) for a minute or more, and the
    client's 5-second wait here ran out."""
    name = b"a" * 40
    assert await client.command(b"c CREATE " + name) == [b"c OK CREATE completed\r\n"]
    assert await listed(client, b'"' + b"*a" * 10 + b'Z"') == []
    assert await listed(client, b'"' + b"%a" * 10 + b'"') == [name]
    assert await listed(client, b'"' + b"*" * 5000 + b'a"') == [name]
    assert await listed(client, b"inbox") == [b"INBOX"]
    assert await listed(client, b"%/%") == []
