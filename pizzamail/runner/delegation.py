"""Delegation: a ``delegate`` call becomes a child run of a specialist, in a thread of its own.

The call writes a real mail from the delegating agent to the specialist, in a new thread filed in
``Activity``, with a queued run of the specialist, and the step naming that child: all in one
transaction, so a crash repeats no delegation and loses none. The parent then waits (``delegating``,
no worker held) and goes back to the queue in the transaction that ends its last child
(:func:`~pizzamail.store.runs.finish_run`); resumed, it finds each child's end and records it as
that call's result: the child's final answer and the files it wrote (copied into the parent's
workspace, so they go out with its reply), or an error result for a child that failed or was
stopped.

A child inherits its parent's trust: the rules and the outsider flag of every run up the chain apply
to it, so delegation is no way around a trigger's policy.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import formataddr
from pathlib import Path
from typing import Any

from pizzamail.activity.board import ACTIVITY_FOLDER
from pizzamail.config import Agent, Config
from pizzamail.mail.build import build_mail
from pizzamail.mail.ids import new_message_id
from pizzamail.providers.types import ToolCall, ToolSpec
from pizzamail.runner.workspace import attachments
from pizzamail.store import Store
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailwriter import add_task, message_row
from pizzamail.store.runfiles import Workspaces
from pizzamail.store.runs import (
    ENDED,
    Run,
    add_step,
    await_children,
    count_children,
    get_run,
    steps_of,
    stop_asked,
    thread_sources,
)
from pizzamail.store.threads import get_message, log_event
from pizzamail.tools import Offer, Offered, ToolResult
from pizzamail.transcript import DelegateStep, ModelStep, ToolStep, Transcript, step_from_row
from pizzamail.triggers.policy import on_outside_content, run_rules

log = logging.getLogger("pizzamail.runner")

DELEGATE = "delegate"
_SUBJECT_MAX = 120


@dataclass(frozen=True, kw_only=True)
class Trust:
    """What a run may do by itself, from its own thread and from every run that delegated to it."""

    rules: tuple[dict[str, str], ...]
    outside: bool


@dataclass(frozen=True, kw_only=True)
class DelegateTool:
    """The ``delegate`` tool of one run: its schema lists the specialists it may delegate to."""

    targets: dict[str, Agent]
    """by name (``[agents.NAME]``)"""
    run_id: int
    store: Store
    limit: int
    """child runs this run may start (``max_delegates``)"""
    section: str
    """where the limit is set, for the message"""

    @property
    def spec(self) -> ToolSpec:
        who = "; ".join(f"{name}: {agent.description or agent.name}" for name, agent in self.targets.items())
        return ToolSpec(name=DELEGATE, description=(
            "Give a self-contained task to a specialist agent. It works in a thread of its own, with"
            " its own tools, and sees only the task you write here, not this conversation. Its final"
            " answer (and the files it wrote, which also go out with your reply) come back as this"
            " call's result. Several delegate calls in one answer run in parallel."),
            parameters={"type": "object", "properties": {
                "agent": {"type": "string", "enum": list(self.targets), "description": f"who: {who}"},
                "task": {"type": "string", "description": "the whole task: what to do, what you know"
                         " that it needs, and what to answer with"},
                "subject": {"type": "string", "description": "a short subject line for its thread"},
            }, "required": ["agent", "task"]})

    async def check(self, arguments: dict[str, Any]) -> ToolResult | None:
        name = str(arguments.get("agent") or "")
        if name not in self.targets:
            return ToolResult(is_error=True, text=f"there is no specialist named {name!r}; you may"
                              f" delegate to: {', '.join(self.targets)}")
        if not str(arguments.get("task") or "").strip():
            return ToolResult(is_error=True, text="the task is empty: write what the specialist should do")
        started = await count_children(self.store, self.run_id)
        if started >= self.limit:
            return ToolResult(is_error=True, text=(
                f"not run: this run has started {started} delegations, its limit (`{self.section}"
                " max_delegates` in config.toml). Finish the task with what you have."))
        return None

    def describe(self, arguments: dict[str, Any]) -> str | None:
        return None

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        # the runner starts a child for each call (Offered.spawns); nothing calls the tool itself
        return ToolResult(text="delegate calls are started by the runner", is_error=True)


@dataclass(kw_only=True)
class Delegation:
    """Starts child runs, and turns their ends into their parent's tool results."""

    store: Store
    blobs: BlobStore
    config: Config
    workspaces: Workspaces
    clock: Callable[[], datetime]
    max_result_chars: int = 20000

    def offer(self, run: Run, agent: Agent) -> Offer:
        """``delegate`` for a run whose agent may delegate, not too deep, with someone to ask."""
        targets = {a.key: a for a in self.config.all_agents()[1:] if a.address != agent.address}
        if not agent.delegate or run.depth >= self.config.runner.delegation_depth or not targets:
            return Offer()
        tool = DelegateTool(targets=targets, run_id=run.id, store=self.store, limit=agent.max_delegates,
                            section=agent.section)
        return Offer(tools=[Offered(tool=tool, policy="auto", spawns=True)])

    async def start(self, run: Run, agent: Agent, seq: int, call: ToolCall) -> DelegateStep | ToolStep:
        """The child run of ``call`` and the step that names it, in one transaction; once the run
        was asked to stop, no child but a "not run" result."""
        target = next(a for a in self.config.all_agents() if a.key == call.arguments["agent"])
        task = str(call.arguments["task"]).strip()
        subject = " ".join(str(call.arguments.get("subject") or "").split()) or task.splitlines()[0]
        mail = build_mail(sender=formataddr((agent.name, agent.address)),
                          to=formataddr((target.name, target.address)), subject=subject[:_SUBJECT_MAX],
                          text=task, message_id=new_message_id(self.config.domain), date=self.clock(),
                          headers=[("X-Pizzamail-Delegated-By", f"run {run.id}")])
        blob = await self.blobs.save(mail.as_bytes())
        async with self.store.write() as db:
            if await stop_asked(db, run.id):
                refused = ToolStep(call_id=call.id, name=call.name, result=ToolResult(
                    is_error=True, text="not run: this run was asked to stop"))
                await add_step(db, run.id, seq, refused.kind, refused.to_data())
                return refused
            row = message_row(mail, blob, kind="task", sender=agent.address, direction="in")
            child = await add_task(db, row, thread_id=None, agent=target.address, event="delegation.started",
                                   parent=run, folder=ACTIVITY_FOLDER)
            step = DelegateStep(call_id=call.id, name=call.name, agent=target.address, child=child.run_id)
            await add_step(db, run.id, seq, step.kind, step.to_data())
            await log_event(db, "run.delegated", thread_id=run.thread_id, run_id=run.id,
                            child=child.run_id, agent=target.address)
        log.info("run %d delegated to %s: run %d", run.id, target.key, child.run_id)
        return step

    async def settle(self, run: Run, transcript: Transcript) -> None:
        """Record the result of each delegation whose child has ended."""
        for step in transcript.delegated():
            child = await get_run(self.store, step.child)
            if child.status not in ENDED:
                continue
            result = ToolStep(call_id=step.call_id, name=step.name, result=await self._result(run, child))
            async with self.store.write() as db:
                await add_step(db, run.id, transcript.next_seq, result.kind, result.to_data())
            transcript.steps.append(result)
            transcript.next_seq += 1

    async def wait(self, run: Run) -> str:
        """``waiting`` for its children, ``ready`` to go on (they have all ended) or ``stopping``
        (:func:`~pizzamail.store.runs.await_children`)."""
        async with self.store.write() as db:
            return await await_children(db, run)

    async def _result(self, run: Run, child: Run) -> ToolResult:
        who = self._name(child)
        if child.status == "stopped":
            by = child.stop_requested or "someone"
            return ToolResult(is_error=True, text=f"{who} was stopped (asked by {by}) before it finished;"
                              " it gave no answer")
        if child.status == "failed":
            return ToolResult(is_error=True, text=f"{who} failed: {child.error or 'no reason given'}")
        answer = await _final_text(self.store, child.id)
        # off the event loop: up to 20 files of up to 10 MB each are compared and copied
        written = await self.workspaces.fetch(child.id)  # the child may have run on another machine
        files = await asyncio.to_thread(self._take_files, written, self.workspaces.folder(run.id))
        await self.workspaces.keep(run.id)  # before the step that names them is checkpointed
        text = f"{who} answered:\n\n{answer}"
        if files:
            text += "\n\nFiles it wrote (they go out with your reply): " + ", ".join(files)
        if len(text) > self.max_result_chars:
            text = f"{text[: self.max_result_chars]}\n[… cut: the answer had {len(text)} characters]"
        return ToolResult(text=text)

    def _name(self, child: Run) -> str:
        agent = self.config.agent_at(child.agent)
        return f"{agent.name} ({agent.key})" if agent else str(child.agent)

    def _take_files(self, written: Path, workspace: Path) -> list[str]:
        """The files of the child's workspace, copied into the parent's under names not taken there."""
        names = []
        for path in attachments(written):
            workspace.mkdir(parents=True, exist_ok=True)
            target, n = workspace / path.name, 1
            while target.exists() and target.read_bytes() != path.read_bytes():
                n += 1
                target = workspace / f"{path.stem}-{n}{path.suffix}"
            shutil.copyfile(path, target)
            names.append(target.name)
        return names

    async def trust(self, run: Run) -> Trust:
        """The rules and the outsider flag of ``run``, and of each run up its delegation chain."""
        sender = (await get_message(self.store, run.message_id)).sender if run.message_id else ""
        sources = await thread_sources(self.store, run.thread_id)
        trust = Trust(rules=run_rules(self.config, sender=sender, sources=sources),
                      outside=on_outside_content(sources))
        if run.parent_run is None:
            return trust
        parent = await self.trust(await get_run(self.store, run.parent_run))
        return Trust(rules=(*trust.rules, *parent.rules), outside=trust.outside or parent.outside)


async def _final_text(store: Store, run_id: int) -> str:
    steps = [step_from_row(row) for row in await steps_of(store, run_id)]
    final = next((s for s in reversed(steps) if isinstance(s, ModelStep)), None)
    text = final.response.text.strip() if final else ""
    return text or "(it finished without an answer)"
