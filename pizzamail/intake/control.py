"""Control by reply: an approver's ``stop`` in a thread, recorded before intake answers 250.

The stop mail is kept in its thread (kind ``stop``, never a task, never shown to the model) with
the request in the same transaction; the runner working on the run cancels it and writes the
"Stopped" mail. With nothing running the answer is written here: nothing changed.
"""

from __future__ import annotations

from pizzamail.composer import Composer, MailContext
from pizzamail.intake.tasks import Stored
from pizzamail.mail.ids import new_message_id
from pizzamail.mail.parse import ParsedMail
from pizzamail.mail.reply import user_words
from pizzamail.store import Store, Tx
from pizzamail.store.blobs import BlobStore
from pizzamail.store.inbox import Claim
from pizzamail.store.mailwriter import add_mail, message_row, received_row
from pizzamail.store.runs import ask_stop, last_run
from pizzamail.store.threads import message_exists


async def record_stop(
    store: Store, blobs: BlobStore, composer: Composer, raw: bytes, parsed: ParsedMail, *,
    thread_id: int, bot: str, domain: str, claim: Claim | None = None,
) -> Stored:
    """Ask ``thread_id``'s working run to stop, as ``parsed.sender`` (an approver) wrote; ``claim``
    as for :func:`~pizzamail.intake.tasks.store_task`."""
    by = (parsed.sender or "").lower()
    message_id = parsed.message_id or new_message_id(domain)
    blob = await blobs.save(raw)
    async with store.write() as db:
        if (claim is not None and not await claim(db)) or await message_exists(db, message_id):
            # a client retrying, or a mail of the owner's mailbox taken before: asked once already
            return Stored(thread_id=thread_id, run_id=None, duplicate=True)
        await add_mail(db, thread_id, received_row(parsed, blob, message_id=message_id, kind="stop",
                                                   sender=by, body=user_words(parsed.body)))
        run_id = await ask_stop(db, thread_id, by=by)
        if run_id is None:
            await _not_running(db, blobs, composer, parsed, message_id, thread_id=thread_id, bot=bot)
    return Stored(thread_id=thread_id, run_id=None, stop=True)


async def _not_running(db: Tx, blobs: BlobStore, composer: Composer, parsed: ParsedMail,
                       message_id: str, *, thread_id: int, bot: str) -> None:
    run_id = await last_run(db, thread_id)
    ctx = MailContext(thread_id=thread_id, run_id=run_id or 0, subject=parsed.subject,
                      in_reply_to=message_id, references=parsed.references)
    mail = composer.not_running(ctx)
    blob = await blobs.save(mail.as_bytes())
    await add_mail(db, thread_id, message_row(mail, blob, kind=mail.kind, sender=bot, run_id=run_id))
