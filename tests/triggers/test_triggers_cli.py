"""`pizzamail triggers`: one list of every kind of trigger, with what each last did."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result

from pizzamail.cli import cli
from pizzamail.home import Home
from pizzamail.intake.tasks import submit_text
from pizzamail.store import Store
from pizzamail.store.blobs import FileBlobs

CONFIG = """
[hooks.github]
auth = "bearer"
[senders.cron]
address = "cron@localhost"
[senders.backup]
address = "backup@localhost"
[watches.work]
host = "imap.example.com"
user = "me@example.com"
"""


def run(home: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input)


def test_every_kind_is_listed_before_anything_ran(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(CONFIG)
    assert run(tmp_path, "account", "password", "--sender", "cron").exit_code == 0
    assert run(tmp_path, "schedule", "add", "news", "--when", "every weekday at 8", "--tz", "UTC",
               "--prompt", "Summarise").exit_code == 0

    rows = json.loads(run(tmp_path, "triggers", "--json").output)
    kinds = {(r["kind"], r["name"]) for r in rows}
    assert kinds == {("schedule", "news"), ("hook", "github"), ("sender", "cron"), ("sender", "backup"),
                     ("watch", "work")}
    by_name = {r["name"]: r for r in rows}
    assert by_name["cron"]["can_log_in"] is True and by_name["backup"]["can_log_in"] is False
    assert by_name["work"]["state"] == "not started"

    text = run(tmp_path, "triggers").output
    assert "schedule news  every weekday (Monday to Friday) at 08:00 (UTC)  next " in text
    assert by_name["news"]["cron"] == "0 8 * * 1-5"
    assert "hook     github  POST /hooks/github (bearer)  last -" in text
    assert "sender   backup  backup@localhost (login backup) [no password]  last -" in text
    assert "watch    work  me@example.com@imap.example.com:993/INBOX [not started]  last -" in text


async def test_a_senders_last_task_and_its_run_are_shown(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(CONFIG)
    home = Home(root=tmp_path)
    home.create_dirs()
    async with Store(path=home.database) as store:
        stored = await submit_text(store, FileBlobs(root=home.blobs), "nightly report",
                                   sender="cron@localhost", agent="bot@pizzamail.localhost",
                                   domain="pizzamail.localhost")
    shown = await asyncio.to_thread(run, tmp_path, "triggers", "--json")
    row = next(r for r in json.loads(shown.output) if r["name"] == "cron")
    assert row["last_outcome"] == f"run {stored.run_id}: queued"
    assert row["last_at"]


def test_doctor_names_the_command_for_each_missing_trigger_secret(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(CONFIG)
    line = next(x for x in run(tmp_path, "doctor").output.splitlines() if "triggers" in x)
    assert "hook github: run `pizzamail keys set hook:github`" in line
    assert "watch work: run `pizzamail keys set watch:work`" in line
    assert run(tmp_path, "keys", "set", "hook:github", input="s3cret-hook\n").exit_code == 0
    assert run(tmp_path, "keys", "set", "watch:work", input="imap-pw\n").exit_code == 0
    checks = {c["name"]: c for c in json.loads(run(tmp_path, "doctor", "--json").output)}
    assert checks["triggers"]["status"] == "ok"
    assert "0 schedule(s), 1 hook(s), 1 watch(es)" in checks["triggers"]["detail"]
