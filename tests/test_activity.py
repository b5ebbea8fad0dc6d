"""The Activity board: one status mail per run, replaced as the run moves, held back while a run
races through steps, removed after ``keep_finished``, and put right at start after a crash."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default

import pytest

from pizzamail.activity import live
from pizzamail.activity.board import ACTIVITY_FOLDER, RENDERED_AT_ONCE, Board, Pass
from pizzamail.activity.live import LONGEST_REST, PER_MAIL, LiveBoard
from pizzamail.activity.status import status_mail, status_name, status_subject
from pizzamail.composer import Composer
from pizzamail.config import ActivitySettings, Config
from pizzamail.mailbox import Mailbox, maildir
from pizzamail.mailbox.filing import Filer
from pizzamail.store import Store
from pizzamail.store.activity import BoardRun, board_runs
from pizzamail.store.blobs import BlobStore
from pizzamail.store.events import RunChanged
from pizzamail.store.leases import claim_next
from pizzamail.store.mailwriter import add_mail, add_task
from pizzamail.store.runs import Run, add_step, finish_run, get_run
from pizzamail.store.threads import NewMessage

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def board(store: Store, mailbox: Mailbox, blobs: BlobStore, clock: Clock, *, interval: float = 1.0,
          config: Config | None = None) -> Board:
    config = config or Config()
    return Board(store=store, mailbox=mailbox, blobs=blobs, composer=Composer(config=config),
                 config=config, file_mail=Filer(mailbox=mailbox, blobs=blobs).run, interval=interval,
                 clock=clock)


async def new_task(store: Store, blobs: BlobStore, subject: str = "Find flights") -> int:
    message_id = f"{subject.replace(' ', '.')}@client.example"
    blob = await blobs.save(f"Message-ID: <{message_id}>\r\nSubject: {subject}\r\n\r\nfind them\r\n".encode())
    row = NewMessage(message_id=message_id, in_reply_to=None, refs=[], direction="in", kind="task",
                     sender="me@pizzamail.localhost", subject=subject, body="find them", blob=blob.digest,
                     size=blob.size)
    async with store.write() as db:
        task = await add_task(db, row, thread_id=None, agent="bot@pizzamail.localhost", event="task")
    return task.run_id


async def claim(store: Store) -> Run:
    run = await claim_next(store, exclude_threads=set())
    assert run is not None
    return run


async def step(store: Store, run: Run, seq: int, tool: str) -> None:
    async with store.write() as db:
        await add_step(db, run.id, 2 * seq, "model", {"text": ""})
        await add_step(db, run.id, 2 * seq + 1, "tool", {"call_id": f"c{seq}", "name": tool, "text": "ok",
                                                         "is_error": False})


async def finish(store: Store, run: Run, status: str = "done") -> None:
    async with store.write() as db:
        await finish_run(db, await get_run(store, run.id), status=status)


async def activity(mailbox: Mailbox) -> list[tuple[int, EmailMessage]]:
    """(uid, message) of each mail in Activity."""
    folder = await mailbox.folder(ACTIVITY_FOLDER)
    assert folder is not None
    found = []
    for row in await mailbox.messages(folder):
        msg = message_from_bytes(await mailbox.read(folder, row) or b"", policy=default)
        assert isinstance(msg, EmailMessage)
        found.append((row.uid, msg))
    return found


async def subjects(mailbox: Mailbox) -> list[str]:
    return [str(msg["Subject"]) for _, msg in await activity(mailbox)]


async def test_one_status_mail_per_run_replaced_when_the_run_moves(
        store: Store, mailbox: Mailbox, blobs: BlobStore) -> None:
    clock = Clock()
    shown = board(store, mailbox, blobs, clock)
    run_id = await new_task(store, blobs)
    await new_task(store, blobs, "Plan the offsite")
    await shown.sync()
    assert await subjects(mailbox) == ["[queued] Find flights", "[queued] Plan the offsite"]
    inbox = await mailbox.folder("INBOX")
    assert inbox is not None and len(await mailbox.messages(inbox)) == 2  # the tasks the mails answer

    run = await claim(store)
    await step(store, run, 1, "web__fetch")
    await shown.sync()
    assert sorted(await subjects(mailbox)) == ["[queued] Plan the offsite",
                                               "[working] Find flights — step 1, web__fetch"]
    [(_, mail)] = [(u, m) for u, m in await activity(mailbox) if m["X-Pizzamail-Run"] == str(run_id)]
    assert mail["From"].addresses[0].addr_spec == "bot@pizzamail.localhost"
    assert mail["In-Reply-To"] == "<Find.flights@client.example>"
    assert mail["X-Pizzamail-Thread"] == str(run.thread_id) and mail["X-Pizzamail-Kind"] == "status"
    body = mail.get_body(("plain",))
    assert body is not None and "last tool: web__fetch" in body.get_content()


async def test_a_run_racing_through_steps_is_shown_once_an_interval_and_always_ends_final(
        store: Store, mailbox: Mailbox, blobs: BlobStore) -> None:
    clock = Clock()
    shown = board(store, mailbox, blobs, clock, interval=1.0)
    await new_task(store, blobs)
    run = await claim(store)
    await shown.sync()
    [(first, _)] = await activity(mailbox)
    for seq in range(1, 21):  # twenty steps within the same second
        await step(store, run, seq, "web__fetch")
        assert (await shown.sync()).due == 1.0
    assert [uid for uid, _ in await activity(mailbox)] == [first]  # not replaced twenty times

    clock.now = START - timedelta(hours=1)  # a clock set back holds it back no longer than the interval
    assert (await shown.sync()).due == 1.0
    clock.now = START + timedelta(seconds=1)
    assert (await shown.sync()).due is None
    assert await subjects(mailbox) == ["[working] Find flights — step 20, web__fetch"]
    await step(store, run, 21, "read_attachment")
    await finish(store, run)
    assert (await shown.sync()).due is None  # a final state is shown at once, however soon
    assert await subjects(mailbox) == ["[done] Find flights — 21 steps"]


async def test_a_finished_run_leaves_after_keep_finished_with_its_progress_notes(
        store: Store, mailbox: Mailbox, blobs: BlobStore) -> None:
    clock = Clock()
    config = Config(activity=ActivitySettings(keep_finished="2h"))
    shown = board(store, mailbox, blobs, clock, config=config)
    await new_task(store, blobs)
    run = await claim(store)
    note = b"From: bot@pizzamail.localhost\r\nSubject: halfway\r\n\r\nHalfway there.\r\n"
    blob = await blobs.save(note)
    async with store.write() as db:
        await add_mail(db, run.thread_id, NewMessage(
            message_id="progress.1@pizzamail.localhost", in_reply_to=None, refs=[], direction="out",
            kind="progress", sender="bot@pizzamail.localhost", subject="halfway", body="Halfway there.",
            blob=blob.digest, size=blob.size, run_id=run.id))
    await shown.sync()
    assert sorted(await subjects(mailbox)) == ["[working] Find flights", "halfway"]

    await finish(store, run, "stopped")
    clock.now = datetime.now(UTC) + timedelta(hours=1)  # finished_at is the store's own clock
    await shown.sync()
    assert sorted(await subjects(mailbox)) == ["[stopped] Find flights", "halfway"]
    clock.now = datetime.now(UTC) + timedelta(hours=2, minutes=1)
    await shown.sync()
    assert await activity(mailbox) == []


async def test_after_a_crash_between_delivery_and_expunge_the_start_leaves_one_mail_per_run(
        store: Store, mailbox: Mailbox, blobs: BlobStore) -> None:
    clock = Clock()
    await new_task(store, blobs)
    await board(store, mailbox, blobs, clock).sync()
    run = await claim(store)
    await step(store, run, 1, "web__fetch")
    # the new mail's file written, then kill -9: neither indexed nor the old one expunged
    [current] = await board_runs(store, finished_since=START)
    mail = status_mail(current, text="working", agent="bot@pizzamail.localhost", agent_name="bot",
                       owner="me@pizzamail.localhost", domain="pizzamail.localhost", date=START)
    folder = await mailbox.folder(ACTIVITY_FOLDER)
    assert folder is not None
    maildir.write_all(mailbox.path(folder), [(status_name(current), mail, 0, set())])

    restarted = await Mailbox(root=mailbox.root, store=store).open()  # start-up reconciles the files
    assert len(await activity(restarted)) == 2
    await board(store, restarted, blobs, Clock()).sync()
    assert await subjects(restarted) == ["[working] Find flights — step 1, web__fetch"]


async def test_the_live_board_follows_commit_events(store: Store, mailbox: Mailbox, blobs: BlobStore) -> None:
    await new_task(store, blobs)
    live = LiveBoard(board=board(store, mailbox, blobs, Clock()), events=store.events)
    async with live:  # entering reconciles: the queued run is shown before anything else happens
        assert await subjects(mailbox) == ["[queued] Find flights"]
        folder = await mailbox.folder(ACTIVITY_FOLDER)
        assert folder is not None
        changed = mailbox.change_event(folder)
        await claim(store)
        await asyncio.wait_for(changed.wait(), 10)
        while await subjects(mailbox) != ["[working] Find flights"]:  # delivered; expunge follows
            changed = mailbox.change_event(folder)
            await asyncio.wait_for(changed.wait(), 10)


async def test_a_burst_of_changes_is_shown_in_one_pass_after_it_settled(
        store: Store, mailbox: Mailbox, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    shown = board(store, mailbox, blobs, Clock())
    passes, settled = [], asyncio.Event()
    real = shown.sync

    async def counted() -> Pass:
        passes.append(len(passes))
        return await real()

    monkeypatch.setattr(shown, "sync", counted)
    await new_task(store, blobs)
    async with LiveBoard(board=shown, events=store.events, settle=settled.wait):
        folder = await mailbox.folder(ACTIVITY_FOLDER)
        assert folder is not None and passes == [0]  # entering: the queued run
        run = await claim(store)  # a run answered at once: working, then done
        await finish(store, run)
        changed = mailbox.change_event(folder)
        settled.set()
        while not (await subjects(mailbox))[0].startswith("[done]"):
            await asyncio.wait_for(changed.wait(), 10)
            changed = mailbox.change_event(folder)
    assert len(passes) == 2  # no pass, and no mail, for its "working" moment


@pytest.mark.parametrize("per_mail", [PER_MAIL, LONGEST_REST])
async def test_after_a_pass_the_board_rests_for_each_mail_it_delivered_up_to_a_ceiling(
        store: Store, mailbox: Mailbox, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch,
        per_mail: float) -> None:
    monkeypatch.setattr(live, "PER_MAIL", per_mail)
    rests: list[float] = []
    rested, settled = asyncio.Event(), asyncio.Event()

    async def rest(seconds: float) -> None:
        rests.append(seconds)
        rested.set()

    for n in range(3):
        await new_task(store, blobs, f"Task {n}")
    async with LiveBoard(board=board(store, mailbox, blobs, Clock()), events=store.events,
                         settle=settled.wait, rest=rest):
        assert rests == []  # entering reconciles; nothing to rest from yet
        for _ in range(3):
            await claim(store)  # three runs start: the next pass shows each working
        settled.set()
        await asyncio.wait_for(rested.wait(), 10)
    assert rests == [pytest.approx(min(3 * per_mail, LONGEST_REST))]


async def test_a_pass_of_many_mails_lets_the_event_loop_turn_while_it_renders(
        store: Store, mailbox: Mailbox, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    shown = board(store, mailbox, blobs, Clock())
    for n in range(3 * RENDERED_AT_ONCE):
        await new_task(store, blobs, f"Task {n}")
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    seen: list[int] = []
    render = shown._text

    def text(run: BoardRun) -> str:
        seen.append(turns)
        return render(run)

    monkeypatch.setattr(shown, "_text", text)
    counting = asyncio.create_task(count_turns())
    await asyncio.sleep(0)
    try:
        await shown.sync()
    finally:
        counting.cancel()
    assert len(seen) == 3 * RENDERED_AT_ONCE
    # the loop turned between each run of RENDERED_AT_ONCE renderings, never inside one
    runs = [seen[i:i + RENDERED_AT_ONCE] for i in range(0, len(seen), RENDERED_AT_ONCE)]
    assert all(len(set(run)) == 1 for run in runs) and len({run[0] for run in runs}) == 3


async def test_a_change_still_settling_when_the_board_leaves_is_shown_before_it_leaves(
        store: Store, mailbox: Mailbox, blobs: BlobStore) -> None:
    await new_task(store, blobs)
    settling, settled = asyncio.Event(), asyncio.Event()

    async def settle() -> None:
        settling.set()
        await settled.wait()

    live = await LiveBoard(board=board(store, mailbox, blobs, Clock()), events=store.events,
                           settle=settle).__aenter__()
    await claim(store)
    await settling.wait()
    leaving = asyncio.create_task(live.__aexit__(None, None, None))
    await asyncio.sleep(0)  # it has begun to leave
    settled.set()
    await leaving
    assert await subjects(mailbox) == ["[working] Find flights"]  # not left for the next start


async def test_every_store_function_that_moves_a_run_records_it(store: Store, blobs: BlobStore) -> None:
    seen: list[tuple[int, str]] = []
    store.events.subscribe(RunChanged, lambda e: seen.append((e.run, e.status)))
    run_id = await new_task(store, blobs)
    run = await claim(store)
    await step(store, run, 1, "web__fetch")
    await finish(store, run, "waiting")
    assert seen == [(run_id, "queued"), (run_id, "running"), (run_id, "running"), (run_id, "running"),
                    (run_id, "waiting")]


def test_the_subject_says_the_state_the_step_and_the_last_tool() -> None:
    run = BoardRun(run=1, thread=1, status="waiting", subject="Send the invoice", task_id=None, task_refs=[],
                   steps=3, last_tool="draft_email", error=None, created_at="", started_at=None,
                   finished_at=None)
    assert status_subject(run) == "[waiting for approval] Send the invoice — step 3, draft_email"
    queued = replace(run, status="queued", steps=0, last_tool=None)
    assert status_subject(queued) == "[queued] Send the invoice"
    assert status_subject(replace(run, status="failed", steps=1)) == "[failed] Send the invoice — 1 step"
    delegating = replace(run, status="delegating", steps=2, last_tool="delegate")
    assert status_subject(delegating) == "[waiting for a delegate] Send the invoice — step 2, delegate"


async def test_a_status_mail_is_plain_7bit_text_that_reads_as_rendered(
        store: Store, mailbox: Mailbox, blobs: BlobStore) -> None:
    # lines of at most 78 characters: no quoted-printable, and the mail is written out directly
    await new_task(store, blobs)
    await board(store, mailbox, blobs, Clock()).sync()
    folder = await mailbox.folder(ACTIVITY_FOLDER)
    assert folder is not None
    [row] = await mailbox.messages(folder)
    data = await mailbox.read(folder, row)
    assert data is not None and b"Content-Transfer-Encoding: 7bit\r\n" in data
    [(_, mail)] = await activity(mailbox)
    assert "replaced as the run\r\nmoves on" in mail.get_content() and "Queued:" in mail.get_content()
