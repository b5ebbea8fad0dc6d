"""Mail first: filing waits while SMTP clients are in the middle of handing over mail."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import AsyncIterator

import pytest

from pizzamail.intake import pace
from pizzamail.intake.pace import Intake
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.mailbox import Mailbox
from pizzamail.mailbox.filing import Filer
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from tests.test_filing import commit_mail
from tests.test_intake import ACCOUNTS, BOT, OWNER, mail

TIMEOUT = 10.0


@pytest.fixture
def intake() -> Intake:
    return Intake()


@pytest.fixture
async def smtp_port(store: Store, blobs: BlobStore, intake: Intake) -> AsyncIterator[int]:
    handler = IntakeHandler(store=store, blobs=blobs, accounts=ACCOUNTS, agents=frozenset({BOT}),
                            domain="pizzamail.localhost", intake=intake)
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=100_000)
    yield int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()


async def client_in_mid_mail(port: int) -> smtplib.SMTP:
    """A client whose MAIL FROM and RCPT TO were answered, its DATA not yet sent."""
    def start() -> smtplib.SMTP:
        client = smtplib.SMTP("127.0.0.1", port, timeout=TIMEOUT)
        client.login("me", "secret-pw")
        assert client.mail(OWNER)[0] == 250 and client.rcpt(BOT)[0] == 250
        return client
    return await asyncio.to_thread(start)


async def test_filing_waits_while_a_mail_is_handed_over_and_goes_on_once_it_is_answered(
    smtp_port: int, intake: Intake
) -> None:
    client = await client_in_mid_mail(smtp_port)
    waiting = asyncio.create_task(intake.paused(at_most=60))
    done, _ = await asyncio.wait([waiting], timeout=0.2)  # several looks again: still handing over
    assert not done
    code, _ = await asyncio.to_thread(client.data, mail())
    assert code == 250
    await asyncio.wait_for(waiting, TIMEOUT)
    await asyncio.to_thread(client.quit)


async def test_a_refused_mail_and_a_vanished_client_hold_nothing_up(smtp_port: int, intake: Intake) -> None:
    refused = await client_in_mid_mail(smtp_port)
    code, _ = await asyncio.to_thread(refused.data, mail(From="someone@else.example"))
    assert code == 550
    await asyncio.wait_for(intake.paused(at_most=60), TIMEOUT)
    gone = await client_in_mid_mail(smtp_port)
    gone.close()  # no QUIT, no DATA: the server learns it only from the closed connection
    await asyncio.wait_for(intake.paused(at_most=60), TIMEOUT)
    await asyncio.to_thread(refused.quit)


async def test_a_mail_reset_ends_and_the_wait_for_one_never_ended_is_bounded(
    smtp_port: int, intake: Intake
) -> None:
    client = await client_in_mid_mail(smtp_port)
    await asyncio.wait_for(intake.paused(at_most=0.2), TIMEOUT)  # the client thinks it over
    assert (await asyncio.to_thread(client.rset))[0] == 250
    await asyncio.wait_for(intake.paused(at_most=60), TIMEOUT)
    await asyncio.to_thread(client.quit)


async def test_two_mails_at_once_hold_the_follow_up_past_their_answers(
    smtp_port: int, intake: Intake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pace, "CROWD", 3600.0)
    first = await client_in_mid_mail(smtp_port)
    assert intake.hold() == pace.HOLD_ONE  # one mail: runs wait a little at a time
    second = await client_in_mid_mail(smtp_port)
    for client in (first, second):
        assert (await asyncio.to_thread(client.data, mail()))[0] == 250
    assert intake.hold() == pace.HOLD_CROWD  # both answered: the burst still holds the runs
    waiting = asyncio.create_task(intake.paused(at_most=60))
    done, _ = await asyncio.wait([waiting], timeout=0.2)
    assert not done  # and filing
    waiting.cancel()
    for client in (first, second):
        await asyncio.to_thread(client.quit)


async def test_mails_one_after_another_are_no_burst_and_a_burst_ends(
    smtp_port: int, intake: Intake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pace, "CROWD", 3600.0)
    client = await client_in_mid_mail(smtp_port)
    assert (await asyncio.to_thread(client.data, mail()))[0] == 250
    assert await asyncio.to_thread(client.sendmail, OWNER, [BOT], mail()) == {}
    assert intake.hold() == 0.0 and not intake.crowded()
    await asyncio.wait_for(intake.paused(at_most=60), TIMEOUT)
    monkeypatch.setattr(pace, "CROWD", 0.1)
    other = await client_in_mid_mail(smtp_port)
    assert (await asyncio.to_thread(client.mail, OWNER))[0] == 250
    assert intake.crowded()
    for each in (client, other):
        await asyncio.to_thread(each.rset)
    await asyncio.wait_for(intake.paused(at_most=60), TIMEOUT)  # the burst's 0.1 s are over
    assert intake.hold() == 0.0
    for each in (client, other):
        await asyncio.to_thread(each.quit)


async def test_a_filing_pass_waits_for_its_pace_and_everyone_asking_meanwhile_shares_it(
    mailbox: Mailbox, blobs: BlobStore
) -> None:
    gate, paced = asyncio.Event(), []

    async def pace() -> None:
        paced.append(1)
        await gate.wait()

    filer = Filer(mailbox=mailbox, blobs=blobs, pace=pace)
    await commit_mail(mailbox, blobs, 0)
    first = asyncio.create_task(filer.run())
    await asyncio.sleep(0)
    await commit_mail(mailbox, blobs, 1)  # committed while the pass waits: it is filed by that pass
    later = asyncio.create_task(filer.run())
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None and await mailbox.messages(inbox) == []
    gate.set()
    assert await asyncio.gather(first, later) == [2, 2]
    assert paced == [1] and len(await mailbox.messages(inbox)) == 2
