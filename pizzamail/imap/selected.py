"""Commands on the selected folder: FETCH, STORE, SEARCH, COPY/MOVE, EXPUNGE, CLOSE, UNSELECT
and IDLE (which also works with no folder selected: it then only waits for DONE)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from pizzamail.errors import ImapError, PizzamailError
from pizzamail.imap.fetch import Ends, Fetcher
from pizzamail.imap.fetchparse import FetchAtt
from pizzamail.imap.parser import Command, Copy, Fetch, Messages, Search, Store, parse_command
from pizzamail.imap.search import Searcher
from pizzamail.imap.searchkeys import uses_modseq
from pizzamail.imap.session import ANSWERED, Handler, Session, SessionEnd, State, ok, refusal
from pizzamail.imap.view import View, uid_set
from pizzamail.mailbox import Folder, MailRow

#: index entries read at a time when a command looks at every message (EXPUNGE, CLOSE)
_BATCH = 2000
#: pipelined FETCHes of one message each answered together at most (see _pipelined)
_PIPELINED = 64


def _writable(s: Session) -> View:
    view = s.selected()
    if view.readonly:
        raise ImapError("the folder is open read-only (EXAMINE)", code="READ-ONLY")
    return view


async def fetch(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Fetch)
    view = s.selected()
    if args.vanished and not (cmd.uid and s.enabled.qresync):
        raise ImapError("VANISHED needs UID FETCH and ENABLE QRESYNC", bad=True)
    atts = args.atts
    if args.changedsince is not None or any(a.name == "MODSEQ" for a in atts):
        await s.use_condstore()
    uids = view.resolve(args.messages, uid=cmd.uid)
    if args.changedsince is not None:
        since = args.changedsince
        uids = [u for u, row in (await view.rows(uids)).items() if row.modseq > since]
        if not any(a.name == "MODSEQ" for a in atts):
            atts = (*atts, FetchAtt("MODSEQ"))
        if args.vanished:
            await _send_vanished_earlier(s, view, args, since)
    fetcher = Fetcher.of(view, atts, uid_command=cmd.uid)
    if len(uids) == 1 and args.changedsince is None and (run := await _pipelined(s, view, cmd, uids[0])):
        return await _answer_together(s, fetcher, [(cmd, uids[0]), *run])
    await fetcher.run(uids, send=s.conn.send, flush=s.conn.flush)
    return cmd.name.encode() + b" completed"


async def _pipelined(s: Session, view: View, first: Command, uid: int) -> list[tuple[Command, int]]:
    """The FETCHes of one message each that the client sent right after ``first`` (one message
    too) and that are here already: the same command of the same items, each message later in the
    folder than the one before, as mbsync pulls a folder. Read now, to be answered with ``first``."""
    atts = first.arg(Fetch).atts
    run: list[tuple[Command, int]] = []
    while len(run) < _PIPELINED and (line := s.conn.waiting_line()) is not None:
        try:
            cmd = parse_command(line)
            args = cmd.args
            if (cmd.name != first.name or not isinstance(args, Fetch) or args.atts != atts
                    or args.changedsince is not None):
                break
            uids = view.resolve(args.messages, uid=cmd.uid)
        except PizzamailError:  # answered in its turn, as any other command
            break
        if len(uids) != 1 or uids[0] <= (run[-1][1] if run else uid):
            break
        await s.conn.read_line()  # this very line, which is ours now
        run.append((cmd, uids[0]))
    return run


async def _answer_together(s: Session, fetcher: Fetcher, run: list[tuple[Command, int]]) -> bytes:
    """One fetch of every message of ``run``, each command's tagged answer right after its own
    response: one read of the index and one of the files for all of them, instead of one each
    with a view's catch-up before and after (the untagged news waits for the last command)."""
    ends = Ends([(uid, ok(cmd, cmd.name.encode() + b" completed")) for cmd, uid in run])
    try:
        await fetcher.run([uid for _, uid in run], send=s.conn.send, flush=s.conn.flush, ends=ends)
    except Exception as exc:  # every command not answered yet has failed
        for n, (cmd, _) in enumerate(run[ends.sent:]):
            await s.conn.send(refusal(cmd, exc, logged=n > 0))
    return ANSWERED


async def _send_vanished_earlier(s: Session, view: View, args: Fetch, since: int) -> None:
    """RFC 7162 §3.2.6: the requested UIDs expunged since ``since``."""
    gone = await s.mailbox.expunged_since(view.folder, since)
    largest = max(gone[-1] if gone else 0, view.uids[-1] if view.uids else 0)
    gone = [u for u in gone if args.messages.contains(u, largest)]
    if gone:
        await s.conn.send(b"* VANISHED (EARLIER) " + uid_set(gone) + b"\r\n")


async def store(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Store)
    view = _writable(s)
    if args.unchangedsince is not None:
        await s.use_condstore()
    rows = await view.rows(view.resolve(args.messages, uid=cmd.uid))
    changes = _new_flags(rows, args)
    modseq, modified = await _write_flags(s, view, rows, changes, args.unchangedsince)
    changes = {u: f for u, f in changes.items() if u not in modified}
    for uid, flags in changes.items():
        for line in view.note_flags(uid, frozenset(flags), modseq):
            await s.conn.send(line)
        rows[uid] = rows[uid]._replace(flags=frozenset(flags), modseq=modseq)
    for uid, row in rows.items():
        if uid in modified:
            continue
        if not args.silent:
            await s.conn.send(view.fetch_flags(row, with_uid=cmd.uid))
        elif s.enabled.condstore and uid in changes:  # §3.1.3: the new MODSEQ even when silent
            await s.conn.send(view.fetch_flags(row, with_uid=cmd.uid, with_flags=False))
    code = b""
    if modified:
        numbers = sorted(modified) if cmd.uid else [view.seq(u) for u in sorted(modified)]
        code = b"[MODIFIED " + uid_set(numbers) + b"] "
    return code + cmd.name.encode() + b" completed"


def _new_flags(rows: dict[int, MailRow], args: Store) -> dict[int, set[str]]:
    """uid -> its flags after the STORE, for the messages whose flags it changes."""
    given = set(args.flags) - {"\\Recent"}
    changes: dict[int, set[str]] = {}
    for uid, row in rows.items():
        current = set(row.flags)
        new = current | given if args.mode == "+" else current - given if args.mode == "-" else given
        if new != current:
            changes[uid] = new
    return changes


async def _write_flags(
    s: Session, view: View, rows: dict[int, MailRow], changes: dict[int, set[str]], unchangedsince: int | None
) -> tuple[int, set[int]]:
    """Store the new flags; returns their modseq and the UIDs a conditional STORE left alone."""
    if unchangedsince is None:
        return (await s.mailbox.set_flags(view.folder, changes) if changes else 0), set()
    modseq, modified = 0, set[int]()
    if changes:
        modseq, modified = await s.mailbox.set_flags_unless_changed(view.folder, changes, unchangedsince)
    # A message the STORE would not change still fails the test when it changed after the client's look.
    modified |= {u for u, row in rows.items() if u not in changes and row.modseq > unchangedsince}
    return modseq, modified


async def search(s: Session, cmd: Command) -> bytes:
    view = s.selected()
    key = cmd.arg(Search).key
    with_modseq = uses_modseq(key)
    if with_modseq:
        await s.use_condstore()
    uids = await Searcher(view).run(key)
    numbers = uids if cmd.uid else [view.seq(u) for u in uids]
    tail = b""
    if with_modseq and uids:  # RFC 7162 §3.1.5: the highest modseq of what was found
        tail = b" (MODSEQ %d)" % max((r.modseq for r in (await view.rows(uids)).values()), default=0)
    await s.conn.send(b"* SEARCH" + b"".join(b" %d" % n for n in numbers) + tail + b"\r\n")
    return cmd.name.encode() + b" completed"


async def _target(s: Session, cmd: Command) -> tuple[list[int], Folder]:
    """The UIDs a COPY or MOVE names, and its destination."""
    args = cmd.arg(Copy)
    uids = s.selected().resolve(args.messages, uid=cmd.uid)
    target = await s.mailbox.folder(args.mailbox)
    if target is None:
        raise ImapError(f"no folder named {args.mailbox}", code="TRYCREATE")
    return uids, target


def _copyuid(target: Folder, pairs: list[tuple[int, int]]) -> bytes:
    return b"[COPYUID %d %s %s] " % (target.uidvalidity, uid_set([old for old, _ in pairs]),
                                     uid_set([new for _, new in pairs]))


async def copy(s: Session, cmd: Command) -> bytes:
    view = s.selected()
    uids, target = await _target(s, cmd)
    pairs: list[tuple[int, int]] = []
    for uid, row in (await view.rows(uids)).items():
        data = await s.mailbox.read(view.folder, row)
        if data is None:
            continue  # expunged by another session meanwhile
        new = await s.mailbox.deliver(target, data, flags=row.flags, internaldate=row.internaldate)
        pairs.append((uid, new))
    code = _copyuid(target, pairs) if pairs else b""
    return code + cmd.name.encode() + b" completed"


async def move(s: Session, cmd: Command) -> bytes:
    view = _writable(s)
    uids, target = await _target(s, cmd)
    pairs = await s.mailbox.move(view.folder, uids, target)
    if pairs:
        await s.conn.send(b"* OK " + _copyuid(target, pairs) + b"Moved\r\n")
        view.note_gone([old for old, _ in pairs])
    await _refreshed(s, view, in_passing=True)
    return cmd.name.encode() + b" completed"


async def _expunge(s: Session, view: View, uids: list[int]) -> None:
    """Remove messages and announce it."""
    if uids:
        view.note_gone(await s.mailbox.expunge(view.folder, uids))
    await _refreshed(s, view)


async def _refreshed(s: Session, view: View, *, in_passing: bool = False) -> None:
    """Announce what changed, expunges included (RFC 6851 lets MOVE announce even by number)."""
    for line in await view.refresh(expunge_ok=True, in_passing=in_passing):
        await s.conn.send(line)


async def _deleted(view: View, uids: Sequence[int]) -> list[int]:
    """Of ``uids``, those flagged \\Deleted, read a batch at a time."""
    found: list[int] = []
    for start in range(0, len(uids), _BATCH):
        rows = await view.rows([u for u in uids[start:start + _BATCH] if view.live(u)])
        found += [u for u, row in rows.items() if "\\Deleted" in row.flags]
    return found


async def expunge(s: Session, cmd: Command) -> bytes:
    view = _writable(s)
    uids: Sequence[int] = view.resolve(cmd.arg(Messages).messages, uid=True) if cmd.uid else view.uids
    await _expunge(s, view, await _deleted(view, uids))
    # Expunging raises the folder's modseq without any message carrying it: tell the client.
    code = b"[HIGHESTMODSEQ %d] " % view.modseq if s.enabled.condstore else b""
    return code + cmd.name.encode() + b" completed"


async def close(s: Session, cmd: Command) -> bytes:
    view = s.selected()
    if not view.readonly:
        # CLOSE expunges silently (RFC 3501 §6.4.2): no EXPUNGE responses.
        await s.mailbox.expunge(view.folder, await _deleted(view, view.uids))
    s.view, s.state = None, State.AUTHENTICATED
    return b"CLOSE completed"


async def unselect(s: Session, cmd: Command) -> bytes:
    s.view, s.state = None, State.AUTHENTICATED
    return b"UNSELECT completed"


# -- IDLE ---------------------------------------------------------------------------------------


async def idle(s: Session, cmd: Command) -> bytes:
    """Push changes as they happen (RFC 2177) until the client sends DONE.

    No polling: the session sleeps on the folder's change event and on the client's next line.
    """
    await s.conn.send(b"+ idling\r\n")
    done = asyncio.ensure_future(s.conn.read_line())
    try:
        line = await _idle_until_done(s, done)
    finally:
        done.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await done
    if line is None:
        raise SessionEnd(b"")
    if line.strip().upper() != b"DONE":
        raise ImapError("expected DONE", bad=True)
    return b"IDLE terminated"


async def _idle_until_done(s: Session, done: asyncio.Future[bytes | None]) -> bytes | None:
    timeout = s.shared.limits.idle_timeout
    while True:
        waiters: set[asyncio.Future[Any]] = {done}
        changed = None
        if s.view is not None:
            # Take the event before looking, so a change right after the refresh still wakes us.
            changed = asyncio.ensure_future(s.mailbox.change_event(s.view.folder).wait())
            waiters.add(changed)
            for out in await s.view.refresh(expunge_ok=True) + s.view.unheeded_exists():
                await s.conn.send(out)
        await s.conn.flush()  # the client reads nothing of ours otherwise until it sends DONE
        try:
            finished, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if changed is not None:
                changed.cancel()
                await asyncio.gather(changed, return_exceptions=True)
        if not finished:
            raise SessionEnd(b"* BYE Autologout; idle for too long\r\n")
        if done in finished:
            return done.result()


HANDLERS: dict[str, Handler] = {
    "FETCH": fetch, "UID FETCH": fetch,
    "STORE": store, "UID STORE": store,
    "SEARCH": search, "UID SEARCH": search,
    "COPY": copy, "UID COPY": copy,
    "MOVE": move, "UID MOVE": move,
    "EXPUNGE": expunge, "UID EXPUNGE": expunge,
    "CLOSE": close, "UNSELECT": unselect,
}
