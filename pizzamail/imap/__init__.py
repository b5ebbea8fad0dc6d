"""Our IMAP4rev1 server over the mailbox, with IDLE push.

Layers, from the wire inwards: ``server`` (listener, framing, limits) -> ``parser`` (pure bytes ->
:class:`~pizzamail.imap.parser.Command`) -> ``session`` (state machine, command table in
``commands``) -> command modules (``login``, ``folders``, ``selected``) -> ``view`` (one
session's numbering of the selected folder) with ``fetch``, ``search``, ``mime`` and ``structure``
rendering messages from their stored bytes. Everything below the session talks to the mail index
interface, :class:`~pizzamail.mailbox.MailIndex`, never to the store: ``serve`` gives it the Maildir
mailbox, transcript tests an in-memory one.
"""

from __future__ import annotations

from pizzamail.imap.server import ImapServer, start_imap_server
from pizzamail.imap.session import Limits

__all__ = ["ImapServer", "Limits", "start_imap_server"]
