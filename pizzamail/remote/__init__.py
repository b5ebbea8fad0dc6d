"""The user's own mailbox at an IMAP provider (``[mailbox] mode = "imap"``), written to as a client.

- :mod:`~pizzamail.remote.account`: the ``[mailbox.imap]`` account and its password
- :mod:`~pizzamail.remote.box`: :class:`RemoteMailbox`, pizzamail's folders in that account, where
  filing, the Action folder and the Activity board write (every APPEND exactly once)
"""
