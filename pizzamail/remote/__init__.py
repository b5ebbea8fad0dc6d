"""The user's own mailbox at an IMAP provider (``[mailbox] mode = "imap"``), written to as a client.

- :mod:`~pizzamail.remote.account`: the ``[mailbox.imap]`` account and its password
"""
