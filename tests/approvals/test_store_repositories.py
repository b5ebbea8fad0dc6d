"""The approvals' rows through their store repositories: each write that may come twice (a retry, a
crash and a resume) changes things once, in portable SQL (no ``INSERT OR IGNORE``)."""

from __future__ import annotations

import inspect

from pizzamail.store import Store, actions, approvals
from pizzamail.store.actions import HeldAction, NewHeldAction, action_for_call, hold_action, mark_reminded
from pizzamail.store.approvals import add_rule, matching_rule, record_release, rules, was_released
from pizzamail.store.runs import create_run, get_run, resume_waiting
from pizzamail.store.threads import create_thread, set_thread_status


async def _waiting_run(store: Store) -> tuple[int, int]:
    async with store.write() as db:
        thread_id = await create_thread(db, subject="notes", agent="bot@pizzamail.localhost")
        run_id = await create_run(db, thread_id, None)
        await db.execute("UPDATE runs SET status = 'waiting', attempts = 3 WHERE id = ?", (run_id,))
        await set_thread_status(db, thread_id, "waiting")
    return thread_id, run_id


async def _held(store: Store) -> HeldAction:
    thread_id, run_id = await _waiting_run(store)
    new = NewHeldAction(run_id=run_id, thread_id=thread_id, call_id="c1", tool="delete_note",
                        server="builtin", original="delete_note", arguments={"name": "a"}, reason="")
    async with store.write() as db:
        assert await hold_action(db, new)
        assert not await hold_action(db, new)  # the same call held again: nothing new
    action = await action_for_call(store, run_id, "c1")
    assert action is not None
    return action


async def test_a_rule_and_a_release_are_recorded_once(store: Store) -> None:
    action = await _held(store)
    async with store.write() as db:
        for _ in range(2):
            await add_rule(db, server="builtin", tool="delete_note", arguments='{"name":"a"}',
                           action_id=action.id)
    [rule] = await rules(store)
    assert await matching_rule(store, server="builtin", tool="delete_note", arguments='{"name":"a"}') == rule
    assert await matching_rule(store, server="builtin", tool="delete_note", arguments='{"name":"b"}') is None
    async with store.write() as db:
        assert await record_release(db, run_id=action.run_id, call_id="c2", rule=rule, arguments="{}")
        assert not await record_release(db, run_id=action.run_id, call_id="c2", rule=rule, arguments="{}")
        assert await was_released(db, action.run_id, "c2")


async def test_a_reminder_is_marked_once_and_only_while_held(store: Store) -> None:
    action = await _held(store)
    async with store.write() as db:
        assert await mark_reminded(db, action.id)
        assert not await mark_reminded(db, action.id)
    reminded = await action_for_call(store, action.run_id, "c1")
    assert reminded is not None and reminded.reminded_at is not None


async def test_resuming_queues_only_a_waiting_run_and_its_attempts_start_over(store: Store) -> None:
    action = await _held(store)
    async with store.write() as db:
        await resume_waiting(db, action.run_id, action.thread_id)
    run = await get_run(store, action.run_id)
    assert (run.status, run.attempts) == ("queued", 0)
    async with store.write() as db:
        await db.execute("UPDATE runs SET status = 'done' WHERE id = ?", (run.id,))
        await resume_waiting(db, run.id, action.thread_id)
    assert (await get_run(store, run.id)).status == "done"


def test_the_repositories_use_no_sqlite_only_insert() -> None:
    for module in (actions, approvals):
        assert "INSERT OR" not in inspect.getsource(module).upper()
