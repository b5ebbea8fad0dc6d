"""``serve --demo-data``: real threads, and a real pending approval that a reply or the CLI releases."""

from __future__ import annotations

import json
import sqlite3
from email.message import EmailMessage

from tests.e2e.harness import OWNER, Served, task_mail
from tests.e2e.test_roundtrip import fetch_all
from tests.fakes.openai_server import FakeOpenAI, text


def _threads(served: Served) -> list[tuple[str, str]]:
    return sorted((t["subject"], t["status"]) for t in json.loads(served.cli("threads", "--json")))


def _pending(served: Served) -> list[dict[str, object]]:
    return list(json.loads(served.cli("approvals", "--json")))


def _the_reply(served: Served) -> EmailMessage:
    [reply] = [m for _, m in fetch_all(served)
               if m["Subject"] == "Re: Packing list for the offsite" and not m["X-Pizzamail-Approval"]]
    return reply


def _writes(served: Served) -> int:
    with sqlite3.connect(served.home / "state.db") as db:
        return int(db.execute("SELECT count(*) FROM held_actions WHERE status = 'done'").fetchone()[0])


def test_demo_data_is_two_threads_and_a_request_the_cli_approves_once(
    served: Served, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script([text("Here is the packing list, attached.")])
    served.start("--demo-data")
    served.wait_for("run 1 waiting")

    assert _threads(served) == [("Packing list for the offsite", "waiting"), ("What can you do?", "done")]
    [action] = _pending(served)
    assert action["tool"] == "write_file" and "packing-list.md" in json.dumps(action)
    subjects = [m["Subject"] for _, m in fetch_all(served)]
    assert subjects.count("Re: What can you do?") == 1
    served.cli("approve", str(action["id"]))
    served.wait_for("run 1 done")

    reply = _the_reply(served)
    [attached] = [p for p in reply.iter_attachments() if p.get_filename() == "packing-list.md"]
    assert "Rain jacket" in attached.get_content()
    [request] = fake_openai.requests  # the model answers once the approved call has run
    assert "wrote packing-list.md" in json.dumps(request.messages)
    assert _pending(served) == [] and _writes(served) == 1

    served.stop()
    served.start("--demo-data")  # a second demo start adds nothing
    assert _threads(served) == [("Packing list for the offsite", "done"), ("What can you do?", "done")]
    assert len(fetch_all(served)) == len(subjects) + 1  # the tour, the request and the reply
    assert _writes(served) == 1


def test_replying_approve_to_the_demo_request_releases_it(served: Served, fake_openai: FakeOpenAI) -> None:
    fake_openai.script([text("Saved it; the list is attached.")])
    served.start("--demo-data")
    served.wait_for("run 1 waiting")
    [request] = [m for _, m in fetch_all(served) if m["X-Pizzamail-Approval"]]
    assert request["To"] == OWNER or OWNER in str(request["To"])

    served.send(task_mail("approve", subject="Re: " + str(request["Subject"]), reply_to=request))
    served.wait_for("run 1 done")

    assert "packing-list.md" in [p.get_filename() for p in _the_reply(served).iter_attachments()]
    assert _pending(served) == [] and _writes(served) == 1
    assert len(_threads(served)) == 2  # the decision went to the waiting run, not a new task
