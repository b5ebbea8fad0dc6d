"""A runner without a mailbox (``pizzamail worker``): its runs end once their mail is committed, and
the front's :func:`~pizzamail.service.mail_follows` file that mail and copy a request into ``Action``
as the commits are announced (on PostgreSQL, from another process by NOTIFY)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from pizzamail.approvals.service import Approvals
from pizzamail.composer import Composer
from pizzamail.mailbox import Mailbox
from pizzamail.mailbox.filing import Filer
from pizzamail.runner import Runner
from pizzamail.service import mail_follows
from pizzamail.store import Store
from pizzamail.store.location import workspaces_for
from pizzamail.store.mailindex import unfiled
from pizzamail.tools import ToolRegistry
from tests.approvals.conftest import DeleteNote
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.runner.conftest import TIMEOUT, Harness, bot_mails


def worker(harness: Harness, store: Store) -> Runner:
    """A runner as ``pizzamail worker`` makes it: no mailbox, no filer, an Approvals without either."""
    tools = ToolRegistry()
    tools.add(DeleteNote(), policy="ask")
    composer = Composer(config=harness.config)
    approvals = Approvals(store=store, blobs=harness.blobs, config=harness.config, composer=composer)
    return Runner(store=store, blobs=harness.blobs, config=harness.config, provider_factory=harness.provider,
                  tools=tools, composer=composer, approvals=approvals, poll_interval=0.2,
                  workspaces=workspaces_for(harness.home, store))


@asynccontextmanager
async def elsewhere(store: Store) -> AsyncIterator[Store]:
    """The store as another process sees it: PostgreSQL's twin (its events arrive by NOTIFY); with
    SQLite, whose events never leave the process, the same store."""
    if store.dialect == "sqlite":
        yield store
        return
    async with store.twin() as twin:
        yield twin


async def eventually(mailbox: Mailbox, name: str, count: int) -> None:
    """Until ``name`` holds ``count`` mails: the front files as it follows events, on its own time."""
    folder = await mailbox.folder(name) or await mailbox.create_folder(name)
    async with asyncio.timeout(TIMEOUT):
        while True:
            changed = mailbox.change_event(folder)  # taken before looking, as IDLE does
            if len(await mailbox.messages(folder)) >= count:
                return
            await changed.wait()


async def test_a_run_without_a_mailbox_is_finished_once_its_mail_is_committed(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Here is the summary.")])
    run_id = await harness.task("Summarise the issues")
    async with worker(harness, harness.store) as runner:
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "done"
    assert [row.folder for row in await unfiled(harness.store)] == ["INBOX", "INBOX"]  # task, reply
    assert await bot_mails(harness.mailbox) == []


async def test_the_front_files_a_workers_reply_and_puts_its_request_in_action(
    harness: Harness, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([tool_call("delete_note", {"name": "a"})])
    filer = Filer(mailbox=harness.mailbox, blobs=harness.blobs)
    front = Approvals(store=harness.store, blobs=harness.blobs, mailbox=harness.mailbox,
                      config=harness.config, composer=Composer(config=harness.config), file_mail=filer.run)
    async with AsyncExitStack() as stack:
        for follow in mail_follows(harness.store, filer, front).values():
            await stack.enter_async_context(follow())
        runner = await stack.enter_async_context(worker(harness, await stack.enter_async_context(
            elsewhere(harness.store))))
        run_id = await harness.task("Clean up my notes")
        assert await asyncio.wait_for(runner.wait_for(run_id), TIMEOUT) == "waiting"
        await eventually(harness.mailbox, "Action", 1)
        await eventually(harness.mailbox, "INBOX", 2)  # the task and the request
    [(_, request)] = await bot_mails(harness.mailbox)
    assert request["X-Pizzamail-Approval"]
