"""Commands on folders as a whole: SELECT/EXAMINE, LIST/LSUB, STATUS, CREATE, DELETE, RENAME,
SUBSCRIBE/UNSUBSCRIBE and APPEND."""

from __future__ import annotations

from pizzamail.errors import ImapError
from pizzamail.imap import wire
from pizzamail.imap.listparse import ListArgs, pattern_matches
from pizzamail.imap.parser import Append, Command, MailboxName, Qresync, Rename, Select, Status
from pizzamail.imap.session import Handler, Session, State
from pizzamail.imap.view import View, uid_set
from pizzamail.mailbox import Folder

DELIMITER = "/"
_PERMANENT = b"(\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)"


async def existing(s: Session, name: str) -> Folder:
    folder = await s.mailbox.folder(name)
    if folder is None:
        raise ImapError(f"no folder named {name}", code="NONEXISTENT")
    return folder


def wire_name(name: str) -> bytes:
    return wire.astring(wire.encode_mailbox(name))


# -- SELECT / EXAMINE ---------------------------------------------------------------------------


async def select(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Select)
    if args.qresync is not None and not s.enabled.qresync:
        raise ImapError("ENABLE QRESYNC before using it in SELECT", bad=True)
    # A failed SELECT leaves no folder selected (RFC 3501 §6.3.1), so deselect first.
    if s.view is not None and s.enabled.qresync:
        await s.conn.send(b"* OK [CLOSED] Previous mailbox closed\r\n")
    s.view, s.state = None, State.AUTHENTICATED
    folder = await existing(s, args.name)
    if args.condstore:
        await s.use_condstore()
    readonly = cmd.name == "EXAMINE"
    view = await View.open(s.mailbox, folder, readonly, s.enabled)
    lines = _select_lines(view, folder)
    if args.qresync is not None and args.qresync.uidvalidity == folder.uidvalidity:
        lines += await _resync_lines(s, view, args.qresync)
    for line in lines:
        await s.conn.send(line)
    s.view, s.state = view, State.SELECTED
    return b"[READ-ONLY] EXAMINE completed" if readonly else b"[READ-WRITE] SELECT completed"


async def _resync_lines(s: Session, view: View, known: Qresync) -> list[bytes]:
    """RFC 7162 §3.2.5: what changed since the client's modseq (flags of changed messages, then
    the UIDs that vanished), so a reconnecting client needs no further round trip."""
    changed = await s.mailbox.changed_since(view.folder, known.modseq)
    lines = [view.fetch_flags(row, with_uid=True) for row in changed if view.live(row.uid)]
    vanished = await s.mailbox.expunged_since(view.folder, known.modseq)
    if known.known is not None:
        vanished = [u for u in vanished if known.known.contains(u, vanished[-1] if vanished else 0)]
    if vanished:
        lines.append(b"* VANISHED (EARLIER) " + uid_set(vanished) + b"\r\n")
    return lines


def _select_lines(view: View, folder: Folder) -> list[bytes]:
    permanent = b"()" if view.readonly else _PERMANENT
    lines = [
        view.flag_line(),
        b"* OK [PERMANENTFLAGS " + permanent + b"] Flags permitted.\r\n",
        b"* %d EXISTS\r\n" % view.exists,
        b"* %d RECENT\r\n" % len(view.recent),
    ]
    if view.first_unseen is not None and view.live(view.first_unseen):
        lines.append(b"* OK [UNSEEN %d] First unseen.\r\n" % view.seq(view.first_unseen))
    uidnext = max(folder.uidnext, view.uids[-1] + 1 if view.uids else 1)
    lines.append(b"* OK [UIDVALIDITY %d] UIDs valid\r\n" % folder.uidvalidity)
    lines.append(b"* OK [UIDNEXT %d] Predicted next UID\r\n" % uidnext)
    lines.append(b"* OK [HIGHESTMODSEQ %d] Highest\r\n" % view.modseq)
    return lines


# -- LIST / LSUB ----------------------------------------------------------------------------------


async def list_folders(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(ListArgs)
    if args.patterns == ("",) and not args.selection:  # LIST "" "": the delimiter and root
        await s.conn.send(b'* %s (\\Noselect) "/" ""\r\n' % cmd.name.encode())
        return cmd.name.encode() + b" completed"
    folders = await s.mailbox.folders()
    patterns = [args.reference + p for p in args.patterns if p]
    for name, attrs, folder in _list_entries(cmd.name, folders, args):
        if not any(pattern_matches(p, name) for p in patterns):
            continue
        line = b'* %s (%s) "/" %s' % (cmd.name.encode(), " ".join(attrs).encode(), wire_name(name))
        if "RECURSIVEMATCH" in args.selection and folder is not None and not folder.subscribed:
            line += b' ("CHILDINFO" ("SUBSCRIBED"))'
        await s.conn.send(line + b"\r\n")
        if args.status and folder is not None:  # RFC 5819: STATUS right after its LIST line
            await s.conn.send(await _status_line(s, folder, args.status))
    return cmd.name.encode() + b" completed"


Entry = tuple[str, list[str], Folder | None]


def _list_entries(command: str, folders: list[Folder], args: ListArgs) -> list[Entry]:
    """(name, attributes, folder) of every folder the selection options let through, and of the
    parents that exist only as a path (``a`` for ``a/b``)."""
    names = {f.name for f in folders}
    parents = {n.rsplit("/", depth)[0] for n in names for depth in range(1, n.count("/") + 1)} - names
    subscribed_only = command == "LSUB" or "SUBSCRIBED" in args.selection
    recursive = "RECURSIVEMATCH" in args.selection
    entries: list[Entry] = []
    for f in folders:
        if ("SPECIAL-USE" in args.selection and not f.special_use) or (
                subscribed_only and not f.subscribed and not (recursive and _subscribed_below(f, folders))):
            continue
        attrs = [_children_attr(f.name, names)] + ([f.special_use] if f.special_use else [])
        if args.subscribed and f.subscribed:
            attrs.append("\\Subscribed")
        entries.append((f.name, attrs, f))
    if not args.selection and command == "LIST":
        entries += [(p, ["\\Noselect", "\\HasChildren"], None) for p in sorted(parents)]
    return entries


def _subscribed_below(folder: Folder, folders: list[Folder]) -> bool:
    prefix = folder.name + "/"
    return any(f.subscribed and f.name.startswith(prefix) for f in folders)


def _children_attr(name: str, names: set[str]) -> str:
    prefix = name + "/"
    return "\\HasChildren" if any(n.startswith(prefix) for n in names) else "\\HasNoChildren"


# -- STATUS ----------------------------------------------------------------------------------------


async def status(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Status)
    folder = await existing(s, args.mailbox)
    await s.conn.send(await _status_line(s, folder, args.items))
    return b"STATUS completed"


async def _status_line(s: Session, folder: Folder, wanted: tuple[str, ...]) -> bytes:
    if "HIGHESTMODSEQ" in wanted:
        await s.use_condstore()
    values = await _status_values(s, folder)
    items = b" ".join(b"%s %d" % (item.encode(), values[item]) for item in wanted)
    return b"* STATUS " + wire_name(folder.name) + b" (" + items + b")\r\n"


async def _status_values(s: Session, folder: Folder) -> dict[str, int]:
    counts = await s.mailbox.counts(folder)
    return {
        "MESSAGES": counts.messages, "UNSEEN": counts.unseen,
        "RECENT": counts.recent, "UIDNEXT": folder.uidnext,
        "UIDVALIDITY": folder.uidvalidity, "HIGHESTMODSEQ": folder.modseq,
    }


# -- CREATE / DELETE / RENAME / SUBSCRIBE ------------------------------------------------------


async def create(s: Session, cmd: Command) -> bytes:
    name = cmd.arg(MailboxName).name.rstrip(DELIMITER)
    _check_name(name)
    if await s.mailbox.folder(name) is not None:
        raise ImapError(f"{name} already exists", code="ALREADYEXISTS")
    # Not subscribed: a client that wants the folder listed subscribes it (as with Dovecot).
    await s.mailbox.create_folder(name, subscribed=False)
    return b"CREATE completed"


def _check_name(name: str) -> None:
    parts = name.split(DELIMITER)
    if not name or any(p in ("", ".", "..") for p in parts) or any(ord(c) < 0x20 for c in name):
        raise ImapError("that is not a usable folder name", code="CANNOT")


async def delete(s: Session, cmd: Command) -> bytes:
    folder = await existing(s, cmd.arg(MailboxName).name)
    if folder.name == "INBOX":
        raise ImapError("INBOX cannot be deleted", code="CANNOT")
    if s.view is not None and s.view.folder.id == folder.id:
        s.view, s.state = None, State.AUTHENTICATED
    await s.mailbox.delete_folder(folder)
    return b"DELETE completed"


async def rename(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Rename)
    folder = await existing(s, args.old)
    new = args.new.rstrip(DELIMITER)
    _check_name(new)
    if folder.name == "INBOX":
        raise ImapError("renaming INBOX is not supported", code="CANNOT")
    if await s.mailbox.folder(new) is not None:
        raise ImapError(f"{new} already exists", code="ALREADYEXISTS")
    await s.mailbox.rename_folder(folder, new)
    return b"RENAME completed"


async def subscribe(s: Session, cmd: Command) -> bytes:
    folder = await existing(s, cmd.arg(MailboxName).name)
    await s.mailbox.set_subscribed(folder, cmd.name == "SUBSCRIBE")
    return cmd.name.encode() + b" completed"


# -- APPEND ------------------------------------------------------------------------------------------


async def append(s: Session, cmd: Command) -> bytes:
    args = cmd.arg(Append)
    folder = await s.mailbox.folder(args.mailbox)
    if folder is None:
        raise ImapError(f"no folder named {args.mailbox}", code="TRYCREATE")
    flags = [f for f in args.flags if f != "\\Recent"]
    uid = await s.mailbox.deliver(folder, args.message, flags=flags, internaldate=args.date)
    return b"[APPENDUID %d %d] APPEND completed" % (folder.uidvalidity, uid)


HANDLERS: dict[str, Handler] = {
    "SELECT": select, "EXAMINE": select,
    "LIST": list_folders, "LSUB": list_folders,
    "STATUS": status,
    "CREATE": create, "DELETE": delete, "RENAME": rename,
    "SUBSCRIBE": subscribe, "UNSUBSCRIBE": subscribe,
    "APPEND": append,
}
