"""An IMAP account spoken to as a client: a watched mailbox, or the user's own mailbox in IMAP mode.

- :mod:`~pizzamail.account.session`: :class:`ImapSession` (one connection, its own worker thread,
  IDLE, keepalive) and :class:`Account` (where the server is, where its settings live)
- :mod:`~pizzamail.account.wire`: pure readers of the library's answers
- :mod:`~pizzamail.account.retry`: how long to wait before connecting again

A leaf: it knows IMAP, not pizzamail's config, store or folders.
"""
