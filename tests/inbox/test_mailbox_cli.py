"""``pizzamail mailbox test`` against Dovecot as the owner's account: what it shows before and after
the account has the mail it looks for, and the fix it names for each problem."""

from __future__ import annotations

from click.testing import CliRunner, Result

from pizzamail.cli import cli
from pizzamail.home import Home
from pizzamail.secrets import secret_store
from tests.dovecot import PASSWORD, Dovecot, unavailable
from tests.inbox.owners import BOT, OWNER, deliver, file_in_sent, owner_mail
from tests.programs import needs

pytestmark = needs(unavailable())


def mailbox_test(home: Home) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home.root), "mailbox", "test"])


def configured(home: Home, dovecot: Dovecot, *, authserv_id: str = "") -> None:
    home.config.write_text(f'[mailbox]\nmode = "imap"\n[mailbox.imap]\nhost = "127.0.0.1"\n'
                           f'port = {dovecot.port}\nsecurity = "none"\nuser = "{OWNER}"\n'
                           f'authserv_id = "{authserv_id}"\n')


def test_it_names_the_missing_password_and_a_refused_login(home: Home, dovecot: Dovecot) -> None:
    configured(home, dovecot)
    missing = mailbox_test(home)
    assert "pizzamail keys set mailbox" in getattr(missing.exception, "hint", "")
    secret_store(home).set("mailbox", "wrong")
    refused = mailbox_test(home)
    assert "refused the login of 'me@example.com'" in str(refused.exception)
    assert "pizzamail keys set mailbox" in getattr(refused.exception, "hint", "")


def test_it_shows_what_works_and_what_it_cannot_show_yet(home: Home, dovecot: Dovecot) -> None:
    configured(home, dovecot)
    secret_store(home).set("mailbox", PASSWORD)
    fresh = mailbox_test(home)
    assert fresh.exit_code == 0, fresh.output
    assert f"ok  logged in to 127.0.0.1:{dovecot.port} as {OWNER}" in fresh.output
    assert "ok  Drafts (Drafts)" in fresh.output
    assert "?   Sent (Sent) has no mail" in fresh.output
    assert f"?   {BOT}: no mail to a plus-address of {OWNER} in INBOX yet" in fresh.output
    assert f"fix: send a mail to {BOT} from your mail program" in fresh.output

    task = owner_mail("hello")
    task["Authentication-Results"] = "mx.example.com; dmarc=pass header.from=example.com"
    file_in_sent(dovecot, task)
    deliver(dovecot, task)
    ready = mailbox_test(home)
    assert ready.exit_code == 0, ready.output
    assert "ok  Sent (Sent): mail is found by its Message-ID" in ready.output
    assert f"ok  {BOT}: mail to plus-addresses of {OWNER} arrives in INBOX" in ready.output
    assert "Authentication-Results come from: mx.example.com" in ready.output

    configured(home, dovecot, authserv_id="mx.other.example")
    wrong = mailbox_test(home)
    assert wrong.exit_code == 1
    assert "FIX no recent INBOX mail carries Authentication-Results of mx.other.example" in wrong.output


def test_local_mode_says_how_to_switch(home: Home) -> None:
    result = mailbox_test(home)
    assert result.exit_code == 1
    assert 'set mode = "imap"' in result.output
