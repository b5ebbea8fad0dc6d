"""``serve --demo-data``: a two-minute tour in real threads, written through the store's one mail writer.

Two threads: "What can you do?", answered (the tour's guide), and "Packing list for the offsite",
whose run asked to save a file and waits for the user's approval. That run is stored as a run is
checkpointed: the model's answer with the ``write_file`` call, the held step and its held action,
and the run queued. The runner then takes it up as it takes up a run after a crash there: it finds
the action held, writes the request mail and waits. Approving it (a reply, or ``pizzamail
approve``) writes the file and lets the configured model finish the run with its reply. Nothing
of the demo is special once written.

A demo mail's Message-ID is fixed, so a second ``--demo-data`` start adds nothing.
"""

from __future__ import annotations

from pizzamail.config import Config
from pizzamail.mail.build import build_mail
from pizzamail.providers.types import Response, ToolCall
from pizzamail.store import Store
from pizzamail.store.actions import NewHeldAction, hold_action
from pizzamail.store.blobs import BlobStore
from pizzamail.store.mailwriter import add_mail, add_received, add_task, message_row
from pizzamail.store.runs import add_step
from pizzamail.store.threads import message_exists, set_thread_status
from pizzamail.transcript import HeldStep, ModelStep

CALL_ID = "demo-packing-list"
PACKING_LIST = """# Packing list: team offsite by the lake

- Rain jacket and warm layers (evenings are cold)
- Walking shoes for the hike on day 1
- Laptop and charger for the workshop on day 2
- Swimwear and a towel
- Refillable water bottle
"""
REASON = "I'd like to save the packing list as packing-list.md, so it comes attached to my reply."


async def add_demo_data(store: Store, blobs: BlobStore, config: Config) -> int:
    """The tour's threads that are not there yet; returns how many were added."""
    return int(await _welcome(store, blobs, config)) + int(await _packing_list(store, blobs, config))


async def _welcome(store: Store, blobs: BlobStore, config: Config) -> bool:
    owner, agent = config.account.address, config.agent.address
    task = build_mail(sender=owner, to=agent, subject="What can you do?",
                      message_id=_demo_id("welcome", config), text="Hi! What can you do for me?")
    reply = build_mail(sender=agent, to=owner, subject="Re: What can you do?", text=_tour(config),
                       message_id=_demo_id("welcome-reply", config), in_reply_to=task.message_id,
                       references=[task.message_id])
    task_blob, reply_blob = await blobs.save(task.as_bytes()), await blobs.save(reply.as_bytes())
    async with store.write() as db:
        if await message_exists(db, task.message_id):
            return False
        row = message_row(task, task_blob, kind="task", sender=owner, direction="in", flags="\\Seen")
        thread = await add_received(db, row, thread_id=None, agent=agent, event="demo.added")
        await add_mail(db, thread, message_row(reply, reply_blob, kind="reply", sender=agent))
        await set_thread_status(db, thread, "done")
    return True


def _tour(config: Config) -> str:
    return f"""Hello! I am an agent you write to by mail. Send a task to {config.agent.address};
I work on it in the background and answer in the same thread.

A short tour:

- Reply to this mail to continue the thread: I see everything said in it.
- "Packing list for the offsite" waits for you: I asked before saving a file. Reply
  "approve" to that request (or run `pizzamail approvals`, then `pizzamail approve ID`).
  I save the file once, then answer there with it attached.
- The Activity folder shows what each run is doing; reply "stop" to a thread to stop it.
- `pizzamail threads` lists the threads; `pizzamail backup FILE` keeps a copy of it all.
"""


async def _packing_list(store: Store, blobs: BlobStore, config: Config) -> bool:
    owner, agent = config.account.address, config.agent.address
    task = build_mail(sender=owner, to=agent, subject="Packing list for the offsite",
                      message_id=_demo_id("packing-list", config),
                      text="Could you write a packing list for our two days by the lake, and save it"
                           " as a file?")
    blob = await blobs.save(task.as_bytes())
    async with store.write() as db:
        if await message_exists(db, task.message_id):
            return False
        row = message_row(task, blob, kind="task", sender=owner, direction="in", flags="\\Seen")
        queued = await add_task(db, row, thread_id=None, agent=agent, event="demo.added")
        call = ToolCall(id=CALL_ID, name="write_file",
                        arguments={"name": "packing-list.md", "content": PACKING_LIST})
        asked = ModelStep(response=Response(text=REASON, tool_calls=[call], model="demo",
                                            finish_reason="tool_calls"))
        held = HeldStep(call_id=CALL_ID, name=call.name, source="builtin", tool=call.name,
                        arguments=call.arguments, reason=REASON)
        await add_step(db, queued.run_id, 0, asked.kind, asked.to_data())
        await add_step(db, queued.run_id, 1, held.kind, held.to_data())
        await hold_action(db, NewHeldAction(run_id=queued.run_id, thread_id=queued.thread_id,
                                            call_id=CALL_ID, tool=call.name, server="builtin",
                                            original=call.name, arguments=call.arguments, reason=REASON))
    return True


def _demo_id(name: str, config: Config) -> str:
    return f"demo.{name}@{config.domain}"

