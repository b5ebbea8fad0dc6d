"""An IMAP client's APPEND, COPY and MOVE, crashed in the middle (:mod:`tests.e2e.crash`): after
the restart no mail is lost and none is in the destination twice, also when the client, which got
no answer, sends the command again."""

from __future__ import annotations

import imaplib

from tests.e2e.crash import CRASHED
from tests.e2e.harness import Served, task_mail
from tests.fakes.openai_server import FakeOpenAI, text


def _login(served: Served) -> imaplib.IMAP4:
    imap = imaplib.IMAP4("127.0.0.1", served.imap)
    imap.login("me", served.password)
    return imap


def _subjects(served: Served, folder: str) -> list[str]:
    with _login(served) as imap:
        imap.select(folder, readonly=True)
        _, data = imap.uid("FETCH", "1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
        return sorted(item[1].decode().strip() for item in data if isinstance(item, tuple))


def _two_mails(served: Served, fake_openai: FakeOpenAI) -> None:
    """INBOX holds a task and its reply (UIDs 1 and 2)."""
    fake_openai.script([text("Done.")])
    served.start()
    served.send(task_mail("Count the open issues.", subject="issues"))
    served.wait_for("run 1 done")
    served.stop()


def _dies(served: Served, *command: str, folder: str | None = "INBOX") -> None:
    """The command (an IMAP4 method and its arguments) is cut off by the crash: no answer comes."""
    imap = _login(served)
    if folder:
        imap.select(folder)
    try:
        getattr(imap, command[0])(*command[1:])
    except (imaplib.IMAP4.abort, OSError):
        pass
    else:
        raise AssertionError(f"{command} was answered; the server should have died")
    finally:
        imap.shutdown()
    assert served.stop(None) == CRASHED


def test_an_append_cut_off_by_a_crash_keeps_the_mail_once(served: Served, fake_openai: FakeOpenAI) -> None:
    served.start()
    served.stop()
    served.start(crash_after="pizzamail.mailbox.maildir:write_all")
    _dies(served, "append", "Archive", "", imaplib.Time2Internaldate(0),
          task_mail("Kept", subject="appended").as_bytes(), folder=None)
    served.start()
    assert _subjects(served, "Archive") == ["Subject: appended"]


def test_a_copy_cut_off_by_a_crash_and_sent_again_copies_nothing_twice(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    _two_mails(served, fake_openai)
    served.start(crash_after="pizzamail.mailbox:Mailbox.deliver")  # the first of two copies is in
    _dies(served, "uid", "COPY", "1:2", "Archive")
    served.start()
    assert _subjects(served, "Archive") == ["Subject: issues"]
    assert _subjects(served, "INBOX") == ["Subject: Re: issues", "Subject: issues"]


def test_a_move_cut_off_by_a_crash_and_sent_again_leaves_each_mail_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    _two_mails(served, fake_openai)
    served.start(crash_after="pizzamail.mailbox:Mailbox._rename_all")  # renamed, not yet committed
    _dies(served, "uid", "MOVE", "1:2", "Archive")
    served.start()
    with _login(served) as imap:  # the client sends again what got no answer
        imap.select("INBOX")
        imap.uid("MOVE", "1:2", "Archive")
    assert _subjects(served, "Archive") == ["Subject: Re: issues", "Subject: issues"]
    assert _subjects(served, "INBOX") == []
