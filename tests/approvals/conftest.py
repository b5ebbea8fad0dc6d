"""Approvals in process: the runner over a test store, our real SMTP intake on a free port
(reached with smtplib), and a held tool that counts its calls."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import make_msgid
from functools import partial
from typing import Any

import pytest

from pizzamail.approvals.service import Approvals as ApprovalService
from pizzamail.auth import Accounts, sender_logins
from pizzamail.composer import Composer
from pizzamail.intake.smtp import IntakeHandler, start_smtp_server
from pizzamail.mailbox.filing import Filer
from pizzamail.providers.types import ToolSpec
from pizzamail.runner import Runner
from pizzamail.store.events import ActionDecided, Follow, MessageAdded
from pizzamail.tools import ToolRegistry, ToolResult
from pizzamail.tools.builtins import DraftEmail
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.runner.conftest import TIMEOUT, Harness, config, harness, secrets  # noqa: F401

OWNER, BOT, PASSWORD = "me@pizzamail.localhost", "bot@pizzamail.localhost", "pw-123"
OTHER = "other@pizzamail.localhost"


@dataclass(kw_only=True)
class DeleteNote:
    """Not idempotent, always asks: the side effect the tests count. It describes its calls."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    spec = ToolSpec(name="delete_note", description="Delete a note.", parameters={
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
        "additionalProperties": False})

    async def check(self, arguments: dict[str, Any]) -> ToolResult | None:
        return None

    def describe(self, arguments: dict[str, Any]) -> str | None:
        return f"Delete the note {arguments.get('name')!r} for good."

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult(text=f"deleted {arguments['name']}")


@dataclass(kw_only=True)
class Approvals:
    harness: Harness
    runner: Runner
    tool: DeleteNote
    port: int
    filer: Filer
    service: ApprovalService

    async def swept(self) -> None:
        """One pass of the sweep: expiry, reminders, the Action folder."""
        await self.service.sweep()

    async def filed(self) -> None:
        """What intake stored is in the Maildir and the Action folder is up to date (as the filing
        and the sync that follow the store's events would soon make them)."""
        await self.filer.run()
        await self.service.sync()

    def send(self, msg: EmailMessage, *, login: bool = True) -> dict[str, Any]:
        with smtplib.SMTP("127.0.0.1", self.port, timeout=10) as client:
            if login:
                client.login("me", PASSWORD)
            return client.send_message(msg)  # type: ignore[return-value]

    async def submit(self, msg: EmailMessage, **options: Any) -> None:
        await asyncio.to_thread(self.send, msg, **options)

    async def finish(self, run_id: int) -> str:
        return await asyncio.wait_for(self.runner.wait_for(run_id), TIMEOUT)

    async def held(self, fake_openai: FakeOpenAI, *then: object) -> int:
        """A task whose model asks to delete note "a" (then answers ``then``), left waiting for the
        decision: its run."""
        fake_openai.script([tool_call("delete_note", {"name": "a"}), *then])  # type: ignore[list-item]
        run_id = await self.harness.task("Clean up my notes")
        self.runner.wake()
        assert await self.finish(run_id) == "waiting"
        self.runner.forget(run_id)
        return run_id


def reply(to: EmailMessage, body: str, *, address: str | None = None, sender: str = OWNER,
          in_reply_to: bool = True) -> EmailMessage:
    msg = EmailMessage(policy=SMTP_POLICY)
    msg["From"], msg["To"] = sender, address or BOT
    msg["Subject"] = "Re: " + str(to["Subject"])
    msg["Message-ID"] = make_msgid(domain="client.example")
    if in_reply_to:
        msg["In-Reply-To"] = str(to["Message-ID"])
        msg["References"] = f"{to.get('References', '')} {to['Message-ID']}".strip()
    msg.set_content(body)
    return msg


@pytest.fixture
async def approvals(harness: Harness) -> AsyncIterator[Approvals]:  # noqa: F811
    async with open_approvals(harness) as opened:
        yield opened


@asynccontextmanager
async def open_approvals(harness: Harness, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC),  # noqa: F811
                         ) -> AsyncIterator[Approvals]:
    """The runner and our SMTP intake over ``harness`` (its config decides relay, expiry …), both
    with one approvals service; ``clock`` is its now (expiry, reminders)."""
    tool, tools = DeleteNote(), ToolRegistry()
    tools.add(tool, policy="ask")
    tools.add(DraftEmail(), policy="ask")
    filer = Filer(mailbox=harness.mailbox, blobs=harness.blobs)
    composer = Composer(config=harness.config)
    service = ApprovalService(store=harness.store, blobs=harness.blobs, mailbox=harness.mailbox,
                              config=harness.config, composer=composer, file_mail=filer.run,
                              secrets=harness.secrets, clock=clock)
    runner = harness.runner(tools=tools, filer=filer, poll_interval=0.2, composer=composer,
                            approvals=service, clock=clock)

    # the owner's account may also send as a second address that is not on the approver list;
    # [senders.NAME] of the harness's config log in with their passwords in its secrets
    accounts = Accounts(user="me", password=PASSWORD, addresses=frozenset({OWNER, OTHER}),
                        senders=partial(sender_logins, harness.config, harness.secrets))
    handler = IntakeHandler(
        store=harness.store, blobs=harness.blobs, accounts=accounts,
        agents=frozenset({BOT}), domain="pizzamail.localhost", approvals=service,
    )
    server = await start_smtp_server(host="127.0.0.1", port=0, handler=handler, max_size=1 << 20)
    events = harness.store.events
    try:
        async with (Follow(events=events, kinds=(MessageAdded,), work=filer.run, name="filing"),
                    Follow(events=events, kinds=(ActionDecided,), work=service.sync, name="sync"),
                    runner):
            approvals = Approvals(harness=harness, runner=runner, tool=tool, filer=filer, service=service,
                                  port=int(server.sockets[0].getsockname()[1]))
            yield approvals
            await approvals.filed()
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> str:
    """This suite must hold on both engines."""
    return str(request.param)
