"""The mailbox: Maildir++ folders and the mail index IMAP serves from.

- :mod:`~pizzamail.mailbox.index`: :class:`MailIndex`, the interface the IMAP server talks to
- :mod:`~pizzamail.mailbox.writing`: :class:`MailFolders`, what filing, the Action folder and the
  Activity board need of a mailbox (also provided by :mod:`pizzamail.remote` in IMAP mode)
- :mod:`~pizzamail.mailbox.box`: :class:`Mailbox`, Maildir files indexed in the store (``serve``)
- :mod:`~pizzamail.mailbox.memory`: :class:`MemoryMailbox`, everything in dicts (transcript tests)
- :mod:`~pizzamail.mailbox.maildir`: the files themselves (:mod:`~pizzamail.mailbox.spares`: the
  files of expunged messages, written again by the next deliveries); :mod:`~pizzamail.mailbox.filing`:
  stored messages into their folders
"""

from __future__ import annotations

from pizzamail.mailbox.box import Mailbox
from pizzamail.mailbox.folders import STANDARD_FOLDERS
from pizzamail.mailbox.index import MailIndex
from pizzamail.mailbox.maildir import message_base
from pizzamail.mailbox.writing import MailFolders, PlacedMail
from pizzamail.store.mailindex import Counts, Folder, MailRow, Outline, Structures

__all__ = ["STANDARD_FOLDERS", "Counts", "Folder", "MailFolders", "MailIndex", "MailRow", "Mailbox",
           "Outline", "PlacedMail", "Structures", "message_base"]
