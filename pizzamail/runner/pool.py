"""The runner: a pool of asyncio workers that take queued runs and drive them to one mail each.

One :class:`~pizzamail.runner.dispatch.Dispatcher` claims queued runs and starts a task per run, up to
``[runner] concurrency`` at once; it looks on ``wake()`` (every :class:`RunQueued` the store
publishes) with a slow poll as fallback, so runs queued by another process (``pizzamail task``) are
found too. Every run
ends with exactly one mail in its thread: the reply, an error report, or a notice that no model is
configured. A run interrupted by ``stop()`` goes back to the queue and resumes from its checkpoints;
a run asked to stop (:meth:`Runner.halt`) ends ``stopped`` with a mail that says so.

Without a mailbox (``pizzamail worker``) the runner only writes mail rows: a run counts finished
once its mail is committed, and the front (``serve``) files it, following the commit events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pizzamail.approvals.service import DRAFTS_FOLDER, Approvals, Waiting, draft_message
from pizzamail.composer import Composed, Composer, MailContext
from pizzamail.config import Agent, Config
from pizzamail.errors import LeaseLost, PizzamailError, ProviderNotConfigured, RunError
from pizzamail.logs import in_run
from pizzamail.mailbox.filing import Filer
from pizzamail.mailbox.writing import MailFolders
from pizzamail.providers.types import Message, Provider, Response, ToolCall
from pizzamail.runner.delegation import Delegation
from pizzamail.runner.dispatch import Dispatcher, runs_at_once
from pizzamail.runner.history import RunContext, history, load_context
from pizzamail.runner.limits import Limits, run_notes, unavailable_notes, usage_of
from pizzamail.runner.loop import Delegating, drive
from pizzamail.runner.models import Models
from pizzamail.runner.outcome import Answer, conclude
from pizzamail.runner.stops import Heartbeat, StopWatch
from pizzamail.runner.workspace import attachments
from pizzamail.secrets import SecretStore
from pizzamail.store import Store
from pizzamail.store.actions import HeldAction
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import Resync, RunQueued, StopRequested
from pizzamail.store.leases import claim_runs, new_worker_id, reclaim_expired
from pizzamail.store.mailwriter import message_row
from pizzamail.store.memory import relevant_notes
from pizzamail.store.runfiles import Workspaces
from pizzamail.store.runs import (
    Run,
    add_step,
    any_queued,
    fenced,
    get_run,
    release_runs,
    requeue_interrupted,
    steps_of,
    stop_descendants,
    stopped_by,
    working_as,
)
from pizzamail.store.sql import SQLITE
from pizzamail.store.threads import NewMessage
from pizzamail.tools import RunScope, Toolbox, ToolRegistry
from pizzamail.tools.outputs import load_steps
from pizzamail.transcript import AgentStep, DelegateStep, HeldStep, ModelStep, ToolStep, Transcript

log = logging.getLogger("pizzamail.runner")

#: how many finished runs ``wait_for`` remembers
_KEEP_OUTCOMES = 1000


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(kw_only=True)
class Runner:
    store: Store
    blobs: BlobStore
    mailbox: MailFolders | None = None
    """where this runner files its runs' mail; None in a worker, whose mail the front files"""
    config: Config
    provider_factory: Callable[[], Provider] | None = None
    """called once per run (so a key stored while serving is used by the next run); raises
    ProviderNotConfigured when no model is set up. Default: :func:`select_provider` with ``secrets``
    for the run's model (its agent's, or its trigger's)"""
    secrets: SecretStore | None = None
    """where API keys are looked up; needed only without a ``provider_factory``"""
    composer: Composer | None = None
    """renders the mails; default: ``Composer(config=config)`` with the bundled templates"""
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    workspaces: Workspaces
    """where each run gets its folder for files it writes (``workspaces/`` in the home folder:
    :func:`~pizzamail.store.location.workspaces_for`)"""
    filer: Filer | None = None
    """files a run's mail into the Maildir before the run counts as finished (so the log line and
    ``wait_for`` come after it). Pass the service's one :class:`Filer`, which also follows every
    other writer's mail, so all filing is serialised. Default: a Filer of the runner's own over
    ``mailbox``; without a mailbox, none (a run counts finished when its mail is committed)"""
    poll_interval: float = 2.0
    """seconds between looks at the queue when nobody calls ``wake()``"""
    on_filed: Callable[[], None] | None = None
    """called after a run's mail is filed into the Maildir (IMAP is already notified by then)"""
    clock: Callable[[], datetime] = _utcnow
    """now: the system prompt's date (and, for a default ``approvals``, expiry and reminders)"""
    approvals: Approvals | None = None
    """holds gated calls and releases decided ones; default: one over this runner's store, mailbox,
    composer and filer (the service passes the one its intake and sweep share)"""
    worker: str = field(default_factory=new_worker_id)
    """who holds this runner's runs (``host:pid:random``, see :mod:`pizzamail.store.leases`)"""
    _dispatcher: Dispatcher | None = field(default=None, init=False, repr=False)
    _filing: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)  # tasks' filing
    _stopping: bool = field(default=False, init=False)
    _cancellable: set[asyncio.Task[Any]] = field(default_factory=set, init=False)
    _interrupted: list[int] = field(default_factory=list, init=False)
    _busy: dict[int, int] = field(default_factory=dict, init=False)  # run id -> thread id
    _working: dict[int, asyncio.Task[Any]] = field(default_factory=dict, init=False)  # run id -> its worker
    _halting: set[int] = field(default_factory=set, init=False)  # runs asked to stop
    _lost: set[int] = field(default_factory=set, init=False)  # runs another worker took over
    _heartbeat: Heartbeat | None = field(default=None, init=False, repr=False)
    _watch: StopWatch | None = field(default=None, init=False, repr=False)
    _alone: int | None = field(default=None, init=False)  # a run a crash cut off: nothing runs beside it
    _outcomes: dict[int, str] = field(default_factory=dict, init=False)
    _finished: dict[int, asyncio.Event] = field(default_factory=dict, init=False)
    _models: Models = field(init=False, repr=False)
    _mails: Composer = field(init=False, repr=False)
    _filer: Filer | None = field(init=False, repr=False)
    _unsubscribe: list[Callable[[], None]] = field(default_factory=list, init=False, repr=False)
    _approvals: Approvals = field(init=False, repr=False)
    _notices: dict[int, str] = field(default_factory=dict, init=False)  # run id -> provider notice
    _answers: dict[int, Answer] = field(default_factory=dict, init=False)
    """run id -> the model's answer that ends the run, written with the run's end (:func:`conclude`)"""
    _delegation: Delegation = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._models = Models(config=self.config, factory=self.provider_factory, secrets=self.secrets)
        self._mails = self.composer or Composer(config=self.config)
        own = Filer(mailbox=self.mailbox, blobs=self.blobs) if self.mailbox is not None else None
        self._filer = self.filer or own
        self._approvals = self.approvals or Approvals(
            store=self.store, blobs=self.blobs, mailbox=self.mailbox, config=self.config,
            composer=self._mails, file_mail=self._filer.run if self._filer else None, secrets=self.secrets,
            clock=self.clock)
        self._delegation = Delegation(store=self.store, blobs=self.blobs, config=self.config,
                                      workspaces=self.workspaces, clock=self.clock,
                                      max_result_chars=self.tools.max_result_chars)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Requeue the runs a crash left ``running`` and start the workers. On SQLite (one runner per
        home) every such run was this home's runner's; on PostgreSQL only runs whose lease ran out
        are, the others are held by live workers elsewhere."""
        if self.store.dialect == SQLITE:
            requeued = await requeue_interrupted(self.store)
        else:
            requeued = await reclaim_expired(self.store)
        if requeued:
            log.info("resuming %d interrupted run(s): %s", len(requeued), requeued)
        self._stopping = False
        self._unsubscribe = [self.store.events.subscribe(RunQueued, lambda _: self.wake()),
                             self.store.events.subscribe(Resync, lambda _: self.wake()),
                             self.store.events.subscribe(StopRequested, lambda e: self.halt(e.run))]
        # SQLite: other processes' stops are found by looking; PostgreSQL brings them by NOTIFY, and
        # the look is only for one missed while the LISTEN connection was down
        self._watch = await StopWatch(store=self.store, working=lambda: list(self._working), halt=self.halt,
                                      interval=0.5 if self.store.dialect == SQLITE else 5.0).__aenter__()
        await self._models.prepare()
        capacity = runs_at_once(self.config, None if self.provider_factory else self.secrets)
        self._dispatcher = Dispatcher(claim=self._claim, work=self._take, capacity=capacity,
                                      poll_interval=self.poll_interval)
        self._dispatcher.start()
        self._heartbeat = await Heartbeat(store=self.store, worker=self.worker,
                                          lease_seconds=self.config.store.lease_seconds,
                                          working=lambda: list(self._working), drop=self._drop).__aenter__()
        log.info("runner started for %d run(s) at a time as %s", capacity, self.worker)

    async def stop(self) -> None:
        """Stop the workers and wait for them; runs in flight go back to the queue.

        A worker waiting on the model or a tool is cancelled; one writing to the store finishes
        that write first (a transaction cancelled halfway could leave the connection inside it)
        and stops at its next model or tool call.
        """
        self._stopping = True
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        for task in list(self._cancellable):
            task.cancel()
        if self._dispatcher is not None:
            await self._dispatcher.stop()
            self._dispatcher = None
        await asyncio.gather(*self._filing)
        await self._models.aclose()
        if self._heartbeat is not None:
            await self._heartbeat.__aexit__(None, None, None)
            self._heartbeat = None
        if self._watch is not None:
            await self._watch.__aexit__(None, None, None)
            self._watch = None
        interrupted, self._interrupted = self._interrupted, []
        await release_runs(self.store, interrupted, worker=self.worker)
        if interrupted:
            log.info("runner stopped; run(s) %s will resume at the next start", interrupted)

    async def __aenter__(self) -> Runner:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def wake(self) -> None:
        """New runs are queued: the dispatcher looks now instead of at the next poll."""
        if self._dispatcher is not None:
            self._dispatcher.wake()

    @property
    def running(self) -> bool:
        return self._dispatcher is not None and self._dispatcher.running

    def halt(self, run_id: int) -> None:
        """Stop a run this runner works on: at once when it waits on the model or a tool, else at
        its next model or tool call (a store write is never cut in half). It ends ``stopped``, with
        a mail that says so. One run at a time, so that a delegating run's stop can call it for each
        of its children."""
        task = self._working.get(run_id)
        if task is None or run_id in self._halting:
            return
        self._halting.add(run_id)
        log.info("run %d: stop asked", run_id)
        if task in self._cancellable:
            task.cancel()

    def _drop(self, run_id: int) -> None:
        """Another worker holds ``run_id`` now: stop working on it here without a step or a mail (at
        once when it waits on the model or a tool, else at its next call; its writes are refused
        meanwhile, see :func:`~pizzamail.store.runs.fence`)."""
        task = self._working.get(run_id)
        if task is None or run_id in self._lost:
            return
        self._lost.add(run_id)
        log.warning("run %d: this runner's lease on it ran out and another worker has it; dropped here",
                    run_id)
        if task in self._cancellable:
            task.cancel()

    def forget(self, run_id: int) -> None:
        """Forget a finished run's outcome: a waiting run resumed by a decision finishes again."""
        self._outcomes.pop(run_id, None)

    async def wait_for(self, run_id: int) -> str:
        """Wait until this runner finished ``run_id``; returns its status. Wrap in a timeout."""
        if run_id not in self._outcomes:
            await self._finished.setdefault(run_id, asyncio.Event()).wait()
        return self._outcomes[run_id]

    # -- dispatching ---------------------------------------------------------------------------

    async def _take(self, run: Run) -> None:
        """A claimed run, in a task of its own, to its end (``stop()`` may cancel it)."""
        try:
            status = await in_run(run.id, run.thread_id, self._run(run))
        except LeaseLost:
            log.warning("run %d: this runner's lease on it ran out (it went back to the queue for"
                        " another worker); dropped here, its last step or mail not written", run.id)
            status = "lost"
        except Exception:  # e.g. the database failed while recording the end: keep the runner
            log.exception("run %d could not be finished; it resumes later (at the next start, or"
                          " once its lease runs out)", run.id)
            status = "interrupted"
        finally:
            self._busy.pop(run.id, None)
            self._answers.pop(run.id, None)
            self._working.pop(run.id, None)
            self._halting.discard(run.id)
            self._lost.discard(run.id)
            self._not_alone(run.id)
        self._record_outcome(run.id, status)

    async def _run(self, run: Run) -> str:
        """``work`` on ``run``, or end it ``stopped`` when that was asked (before it started, too:
        a run a crash cut off may come back with a stop already asked)."""
        task = asyncio.current_task()
        assert task is not None
        self._working[run.id] = task
        if self._watch is not None:
            self._watch.run_started()
        try:
            with working_as(self.worker):
                return await self._work(run)
        except asyncio.CancelledError:
            if run.id in self._lost and not self._stopping:
                if task.cancelling():
                    task.uncancel()
                return "lost"
            if self._stopping or run.id not in self._halting:
                self._interrupted.append(run.id)
                raise
            if task.cancelling():
                task.uncancel()  # this cancel was the run's stop, not the worker's
        with working_as(self.worker):
            return await self._stopped(run, await stopped_by(self.store, run.id))

    async def _work(self, run: Run) -> str:
        # a stop asked since the claim, whose event came before the run was in ``_working``
        by = run.stop_requested or await stopped_by(self.store, run.id)
        if by:
            return await self._stopped(run, by)
        self._file_task()
        return await self.work(run)

    async def _stopped(self, run: Run, by: str) -> str:
        log.info("run %d: ending it, as %s asked", run.id, by)
        async with self.store.write() as db:
            await stop_descendants(db, run.id, by=by)
        await self._approvals.withdraw(run.id)
        ctx = await load_context(self.store, run, self.config.agent_at(run.agent) or self.config.main_agent)
        return await self._finish(run, self._mails.stopped(ctx.mail(run), by=by), status="stopped")

    def _record_outcome(self, run_id: int, status: str) -> None:
        self._outcomes[run_id] = status
        while len(self._outcomes) > _KEEP_OUTCOMES:  # a long-lived server must not grow forever
            self._outcomes.pop(next(iter(self._outcomes)))
        event = self._finished.pop(run_id, None)
        if event is not None:
            event.set()

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        """The only stretch in which ``stop()`` cancels a worker: a model or tool call."""
        task = asyncio.current_task()
        assert task is not None
        if self._stopping or any(self._working.get(r) is task for r in self._halting | self._lost):
            raise asyncio.CancelledError
        self._cancellable.add(task)
        try:
            yield
        finally:
            self._cancellable.discard(task)

    async def _claim(self, room: int) -> list[Run]:
        """Up to ``room`` runs to work on now. A run a crash cut off runs alone until it gets further,
        so a run that crashes the process every time takes only itself down, and only its own crashes
        count against it (:func:`claim_runs`): an idle runner claims one run first, and the rest of a
        burst once it knows that one may have company. Only the dispatcher claims: one claim at a
        time."""
        if self._alone is not None:
            return []
        try:
            # most looks find nothing (the poll, the look after each run): they need not write
            if not await any_queued(self.store):
                return []
            runs = await claim_runs(self.store, limit=room if self._busy else 1,
                                    exclude_threads=set(self._busy.values()), busy=bool(self._busy),
                                    worker=self.worker, lease_seconds=self.config.store.lease_seconds)
        except Exception:  # the database may be busy or broken: keep the runner, look again later
            log.exception("could not look for queued runs")
            return []
        for run in runs:
            self._busy[run.id] = run.thread_id
            if run.crashes:
                self._alone = run.id
        return runs

    def _not_alone(self, run_id: int) -> None:
        """``run_id`` got further than the last crash, or ended: other runs may start beside it."""
        if self._alone == run_id:
            self._alone = None
            self.wake()

    # -- one run -----------------------------------------------------------------------------

    async def work(self, run: Run) -> str:
        """Drive one claimed run to its mail; returns the run's final status."""
        log.info("run %d started (thread %d, attempt %d%s)", run.id, run.thread_id, run.attempts,
                 f", alone after {run.crashes} crash(es)" if run.crashes else "")
        agent = self.config.agent_at(run.agent)
        ctx = await load_context(self.store, run, agent or self.config.main_agent)
        trust = await self._delegation.trust(run)
        files = self.workspaces
        scope = RunScope(run_id=run.id, thread_id=run.thread_id, mail=ctx.mail(run),
                         workspace=await files.fetch(run.id), kept=lambda: files.keep(run.id),
                         rules=trust.rules, outside=trust.outside, agent=agent)
        try:
            if agent is None:
                raise RunError(f"this task was for {run.agent}, which is no longer an agent here",
                               hint="add its [agents.NAME] section back to config.toml, or write to"
                                    f" {self.config.agent.address}")
            if run.crashes > self.config.runner.max_attempts:
                raise RunError(
                    f"gave up: pizzamail crashed {run.crashes} times in a row while working on this task"
                    " alone, each time before it got any further",
                    hint="the task itself may cause the crash: see the server log; the limit is"
                         " `[runner] max_attempts` in config.toml",
                )
            toolbox = self.tools.bind(scope, extra=[self._delegation.offer(run, agent)])
            transcript = await self._transcript(run, ctx, toolbox, agent)
            outcome = await self._agent(run, transcript, toolbox, agent)
            while isinstance(outcome, Delegating):
                state = await self._delegation.wait(run)
                if state == "waiting":
                    log.info("run %d waits for its delegates (runs %s)", run.id,
                             [step.child for step in outcome.steps])
                    return "delegating"
                if state == "stopping":  # asked while it started them: no model call first
                    return await self._stopped(run, await stopped_by(self.store, run.id))
                outcome = await self._agent(run, transcript, toolbox, agent)
            notes = [*unavailable_notes(toolbox),
                     *run_notes(outcome, agent, self._notices.get(run.id))]
            mail_ctx = await self._mail_context(run, ctx, called=any(
                isinstance(step, ModelStep) and step.response.tool_calls for step in transcript.steps))
            if isinstance(outcome, HeldStep):
                outcome = await self._approvals.waiting_for(run.id, outcome)
            if isinstance(outcome, Waiting):
                mail = self._approvals.request(mail_ctx, outcome, toolbox, transcript)
                return await self._finish(run, mail, status="waiting", request_for=outcome.action.id,
                                          extra=(*await self._draft(outcome.action),
                                                 *await self._tell_parent(run, outcome.action)))
            if not outcome.text.strip():
                raise RunError(f"the model finished without an answer ({outcome.finish_reason})")
            reply = self._mails.reply(mail_ctx, outcome.text, notes=notes, files=attachments(scope.workspace),
                                      footer=usage_of(transcript.steps).footer())
        except LeaseLost:
            raise  # not this run's failure: another worker has it now
        except ProviderNotConfigured as exc:
            log.warning("run %d: no model configured: %s", run.id, exc.message)
            mail = self._mails.notice(ctx.mail(run), exc)
            return await self._finish(run, mail, status="failed", error=exc.message)
        except PizzamailError as exc:
            log.warning("run %d failed: %s", run.id, exc.message)
            # with the decisions: an approved call may have run before the failure
            return await self._finish(run, self._mails.error(await self._mail_context(run, ctx), exc),
                                      status="failed", error=exc.message)
        except Exception as exc:  # our bug: never silent, in the log and in the thread
            log.exception("run %d hit an internal error", run.id)
            error = RunError(f"pizzamail hit an internal error ({type(exc).__name__})",
                             hint="the details are in the server log; reply to this mail to try again")
            return await self._finish(run, self._mails.error(await self._mail_context(run, ctx), error),
                                      status="failed", error=error.message)
        return await self._finish(run, reply, status="done")

    async def _agent(self, run: Run, transcript: Transcript, toolbox: Toolbox, agent: Agent,
                     ) -> Response | HeldStep | Waiting | Delegating:
        waiting = await self._approvals.settle(run.id, transcript, toolbox, self._interruptible)
        if waiting is not None:
            return waiting
        await self._delegation.settle(run, transcript)
        provider = self._models.provider(run.model or agent.model)
        notice = getattr(provider, "notice", None)
        if notice:
            self._notices[run.id] = str(notice)
        try:
            return await drive(
                provider=provider, tools=toolbox, transcript=transcript,
                max_steps=agent.max_steps, limits=Limits.from_settings(agent),
                checkpoint=lambda seq, step: self._checkpoint(run, seq, step, toolbox),
                interruptible=self._interruptible,
                standing=lambda offered, call: self._approvals.standing(run.id, offered, call),
                spawn=lambda seq, call: self._spawn(run, agent, seq, call),
            )
        finally:
            await provider.aclose()

    async def _mail_context(self, run: Run, ctx: RunContext, *, called: bool = True) -> MailContext:
        """Threading, plus an ``X-Pizzamail-Decision`` header per decision this run acted on. A run
        whose model ``called`` no tool had no call to decide: its reply does not wait for the look."""
        decided = await self._approvals.decision_headers(run.id) if called else []
        return replace(ctx.mail(run), headers=tuple(("X-Pizzamail-Decision", d) for d in decided))

    async def _transcript(self, run: Run, ctx: RunContext, toolbox: Toolbox, agent: Agent) -> Transcript:
        task = f"{ctx.subject}\n{ctx.trigger.body if ctx.trigger else ''}"
        system = self._mails.system_prompt(subject=ctx.subject, now=self.clock(), agent=agent,
                                           skills=toolbox.skills, unavailable=toolbox.unavailable,
                                           memory=await relevant_notes(self.store, task))
        base = [Message(role="system", content=system),
                *await history(ctx, limit=agent.history_messages, blobs=self.blobs)]
        rows = await steps_of(self.store, run.id)
        if rows:
            log.info("run %d: replaying %d checkpointed step(s)", run.id, len(rows))
        next_seq = rows[-1].seq + 1 if rows else 0
        steps = await load_steps(rows, self.workspaces.folder(run.id))
        return Transcript(base=base, steps=steps, next_seq=next_seq)

    async def _checkpoint(self, run: Run, seq: int, step: AgentStep, toolbox: Toolbox) -> None:
        data = step.to_data()
        if isinstance(step, ModelStep) and not step.response.tool_calls:  # the run's last step
            self._answers[run.id] = (seq, step.kind, data)  # one commit with its end, not two
            return
        if isinstance(step, HeldStep):  # the step and its held action exist together or not at all
            async with self.store.write() as db:
                await add_step(db, run.id, seq, step.kind, data)
                await self._approvals.hold(db, run_id=run.id, thread_id=run.thread_id, step=step,
                                           idempotent=_idempotent(toolbox, step.name))
        else:  # statements only: on SQLite one step of the writer's thread, not a hop for each
            await self.store.write_at_once(fenced(lambda db: add_step(db, run.id, seq, step.kind, data)))
        self._not_alone(run.id)

    async def _spawn(self, run: Run, agent: Agent, seq: int, call: ToolCall) -> DelegateStep | ToolStep:
        step = await self._delegation.start(run, agent, seq, call)
        self._not_alone(run.id)
        return step

    async def _tell_parent(self, run: Run, action: HeldAction) -> tuple[tuple[int, NewMessage], ...]:
        """A delegate's held call gets a line in the delegating run's thread: the user is there."""
        if run.parent_run is None:
            return ()
        parent = await get_run(self.store, run.parent_run)
        boss = self.config.agent_at(parent.agent) or self.config.main_agent
        me = self.config.agent_at(run.agent) or self.config.main_agent
        ctx = await load_context(self.store, parent, boss)
        note = self._mails.progress(
            ctx.mail(parent), f"{me.name} ({me.key}), working on a task I gave it, waits for your approval"
            f" of `{action.label}`. The request is in your Action folder, and in its thread in Activity.",
            message_id=f"delegate-waits.{action.id}@{self.config.domain}")
        blob = await self.blobs.save(note.as_bytes())
        return ((parent.thread_id, message_row(note, blob, kind="progress", sender=boss.address,
                                               run_id=parent.id)),)

    async def _draft(self, action: HeldAction) -> tuple[tuple[int, NewMessage], ...]:
        """A held ``draft_email`` is also a real draft in ``Drafts`` (filed once per action)."""
        if not action.is_draft:
            return ()
        owner = self.config.account.address
        draft = draft_message(action, action.release_arguments, owner=owner, domain=self.config.domain,
                              date=self.clock(), routed=True)
        blob = await self.blobs.save(draft.as_bytes())
        return ((action.thread_id, message_row(draft, blob, kind="draft", sender=owner, folder=DRAFTS_FOLDER,
                                               flags="\\Draft", run_id=action.run_id)),)

    async def _finish(self, run: Run, mail: Composed, *, status: str, error: str | None = None,
                      request_for: int | None = None, extra: tuple[tuple[int, NewMessage], ...] = ()) -> str:
        self._notices.pop(run.id, None)
        agent = self.config.agent_at(run.agent) or self.config.main_agent
        done = await conclude(self.store, self.blobs, run, mail, sender=agent.address,
                              status=status, error=error, model=run.model or agent.model,
                              request_for=request_for, extra=extra, answer=self._answers.pop(run.id, None))
        if not done:
            log.warning("run %d was finished elsewhere; its %s mail is dropped", run.id, mail.kind)
            return "lost"
        await self._file(waiting=status == "waiting")
        # logged once the mail is in the Maildir (or, in a worker, committed for the front to file):
        # whoever reads the log may look for it there
        log.info("run %d %s (%s mail)", run.id, status, mail.kind)
        return status

    def _file_task(self) -> None:
        """A run's task is in INBOX while it works, whoever stored it: another process (``pizzamail
        task``, ``schedule run``) publishes no commit event here for the filing to follow. The run
        does not wait for it: filing is serialised, and a run that starts among many would wait
        for the filing of all their mail before its first model request."""
        if self._filer is not None:
            task = asyncio.create_task(self._file_quietly(self._filer))
            self._filing.add(task)
            task.add_done_callback(self._filing.discard)

    @staticmethod
    async def _file_quietly(filer: Filer) -> None:
        try:
            await filer.run()
        except Exception:  # filed at the next look
            log.exception("could not file new mail into the Maildir")

    async def _file(self, *, waiting: bool) -> None:
        if self._filer is None:  # a worker: the front files the mail and keeps Action
            return
        try:
            await self._filer.run()
            if waiting:  # its request, just filed, is in Action before the run counts as waiting
                await self._approvals.sync()
        except Exception:  # committed mail is filed at the next start; the run is done anyway
            log.exception("could not file new mail into the Maildir")
            return
        if self.on_filed is not None:
            self.on_filed()


def _idempotent(toolbox: Toolbox, name: str) -> bool:
    offered = toolbox.get(name)
    return bool(offered and offered.idempotent)
