"""What the store's SQL means on both engines, where SQLite and PostgreSQL differ (found in review)."""

from __future__ import annotations

from pizzamail.store import Store
from pizzamail.store.threads import NewMessage, add_message, create_thread, get_message


async def test_a_nul_in_a_mails_text_is_stored_on_both_engines(store: Store) -> None:
    """A decoded header or body may hold NUL (``=00``): PostgreSQL's text cannot, so there it is
    U+FFFD (the mail's bytes stay whole in its blob); SQLite keeps it."""
    async with store.write() as db:
        thread = await create_thread(db, subject="s\x00", agent="bot@pizzamail.localhost")
        row = await add_message(db, thread, NewMessage(
            message_id="nul@test", in_reply_to=None, refs=[], direction="in", kind="task",
            sender="me@pizzamail.localhost", subject="a\x00b", body="c\x00d", blob="0" * 64, size=0))
    message = await get_message(store, row)
    kept = "\x00" if store.dialect == "sqlite" else "\ufffd"
    assert (message.subject, message.body) == (f"a{kept}b", f"c{kept}d")


async def test_a_percent_sign_is_one_with_or_without_parameters(store: Store) -> None:
    assert [tuple(r) for r in await store.fetchall("SELECT '5%' AS x")] == [("5%",)]
    assert [tuple(r) for r in await store.fetchall("SELECT '5%' AS x, ? AS y", (1,))] == [("5%", 1)]
    async with store.write() as db, db.execute("SELECT '5%' AS x") as cursor:
        assert [tuple(r) for r in await cursor.fetchall()] == [("5%",)]
