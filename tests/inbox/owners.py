"""The owner's account on Dovecot, as the tests of the own-mailbox mode use it: its mail program
(an APPEND into Sent after sending) and delivery (a file renamed into the Maildir's ``new/``)."""

from __future__ import annotations

import imaplib
import time
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import make_msgid

from tests.dovecot import PASSWORD, Dovecot

OWNER, BOT = "me@example.com", "me+bot@example.com"


def owner_mail(body: str, *, to: str = BOT, sender: str = OWNER, reply_to: EmailMessage | None = None
               ) -> EmailMessage:
    msg = EmailMessage(policy=SMTP_POLICY)
    msg["From"], msg["To"] = sender, to
    msg["Subject"] = "Re: " + str(reply_to["Subject"]) if reply_to is not None else body
    msg["Message-ID"] = make_msgid(domain="client.example")
    if reply_to is not None:
        msg["In-Reply-To"] = str(reply_to["Message-ID"])
    msg.set_content(body)
    return msg


def deliver(dovecot: Dovecot, msg: EmailMessage) -> None:
    dovecot.deliver(msg.as_bytes(), f"{time.time_ns()}.delivered")


def file_in_sent(dovecot: Dovecot, msg: EmailMessage) -> None:
    """What the owner's mail program does after sending."""
    with imaplib.IMAP4("127.0.0.1", dovecot.port, timeout=10) as imap:
        imap.login(OWNER, PASSWORD)
        imap.append("Sent", "(\\Seen)", None, msg.as_bytes())
