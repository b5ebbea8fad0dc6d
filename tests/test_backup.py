"""``backup``, ``restore`` and ``export`` from the command line (a serving home: tests/e2e/test_backup.py)."""

from __future__ import annotations

import io
import json
import mailbox
import sqlite3
import tarfile
from pathlib import Path

import pytest

from pizzamail.errors import BackupError
from pizzamail.home import Home
from pizzamail.secrets import secret_store
from pizzamail.store import backup as archive
from tests.test_cli import run


def test_backup_names_the_secrets_and_holds_none_of_them(tmp_path: Path) -> None:
    home = tmp_path / "h"
    run(home, "init")
    (home / "config.toml").write_text((home / "config.toml").read_text()
                                      + '\n[hooks.deploys]\nprompt = "Deployed"\n')
    run(home, "keys", "set", "hook:deploys", input="hook-secret-value\n")
    run(home, "task", "Water the plants")
    password = secret_store(Home(root=home)).account_password()

    result = run(home, "backup", str(tmp_path / "b.tar.gz"))

    assert result.exit_code == 0
    assert "hook:deploys" in result.output and "`pizzamail keys set hook:deploys`" in result.output
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        assert tar.getnames()[0] == "manifest.json"
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        contents = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())  # type: ignore[union-attr]
        assert "secrets.json" not in tar.getnames() and "state.db" in tar.getnames()
    stored = {s["name"] for s in manifest["secrets"] if s["stored"]}
    assert {"account-password", "hook:deploys"} <= stored
    assert password.encode() not in contents and b"hook-secret-value" not in contents


def test_restore_fills_an_empty_home_and_refuses_one_in_use(tmp_path: Path) -> None:
    home, copy = tmp_path / "h", tmp_path / "copy"
    run(home, "task", "Water the plants")
    run(home, "backup", str(tmp_path / "b.tar.gz"))

    with pytest.raises(BackupError) as refused:
        run(home, "restore", str(tmp_path / "b.tar.gz"))
    assert f"{home} is not empty" in refused.value.cli_message()
    assert "--home NEW_FOLDER restore" in refused.value.cli_message()

    copy.mkdir()  # an empty folder is as good as none
    restored = run(copy, "restore", str(tmp_path / "b.tar.gz"))
    assert restored.exit_code == 0, restored.output
    assert f"--home {copy} serve" in restored.output
    assert "`pizzamail account password` shows it" in restored.output
    rows = json.loads(run(copy, "threads", "--json").output)
    assert [(r["id"], r["subject"]) for r in rows] == [(1, "Water the plants")]
    assert (copy / "config.toml").read_text() == (home / "config.toml").read_text()


def test_restore_refuses_a_file_that_is_not_a_backup(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(BackupError, match=r"cannot read .*notes.txt as a pizzamail backup"):
        run(tmp_path / "new", "restore", str(tmp_path / "notes.txt"))
    assert not (tmp_path / "new").exists()


def test_export_writes_the_thread_as_an_mbox_that_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    home = tmp_path / "h"
    run(home, "task", "Water the plants\non the balcony")
    run(home, "task", "Another thread")
    monkeypatch.chdir(tmp_path)

    result = run(home, "export", "1")

    assert result.exit_code == 0, result.output
    box = mailbox.mbox(tmp_path / "thread-1.mbox")
    try:
        [mail] = list(box)
    finally:
        box.close()
    assert mail["Subject"] == "Water the plants"
    assert "on the balcony" in mail.get_payload(decode=True).decode()
    assert mail.get_from().startswith("me@")
    with pytest.raises(BackupError, match="exists already"):
        run(home, "export", "1")  # never over an earlier export
    with pytest.raises(BackupError, match="no thread 9"):
        run(home, "export", "9", str(tmp_path / "x.mbox"))
    assert not (tmp_path / "x.mbox").exists()


def test_a_home_whose_config_does_not_load_is_still_backed_up(tmp_path: Path) -> None:
    home = tmp_path / "h"
    run(home, "task", "Water the plants")
    (home / "config.toml").write_text("[agent\nmodel = ")  # the backup is what saves the user here

    result = run(home, "backup", str(tmp_path / "b.tar.gz"))

    assert result.exit_code == 0 and "account-password" in result.output
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        assert tar.extractfile("config.toml").read() == b"[agent\nmodel = "  # type: ignore[union-attr]


def test_restore_refuses_a_backup_in_a_later_format(tmp_path: Path) -> None:
    manifest = json.dumps({"version": "9.0", "home": "/x", "created": "2030-01-01T00:00:00Z", "format": 99,
                           "secrets": [], "something_new": True}).encode()
    with tarfile.open(tmp_path / "later.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    with pytest.raises(BackupError, match="newer format") as refused:
        run(tmp_path / "new", "restore", str(tmp_path / "later.tar.gz"))
    assert "update pizzamail" in refused.value.cli_message()
    assert not (tmp_path / "new").exists()


def test_a_backup_into_a_missing_folder_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "h"
    run(home, "task", "Water the plants")
    with pytest.raises(BackupError) as failed:
        run(home, "backup", str(tmp_path / "no-such-folder" / "b.tar.gz"))
    assert "could not write the backup:" in failed.value.cli_message()
    assert "no-such-folder" in failed.value.cli_message()
    assert "name a FILE in a folder you can write to" in failed.value.cli_message()


def test_a_config_linked_from_elsewhere_is_backed_up_as_its_content_and_restores(tmp_path: Path) -> None:
    home, copy, dotfiles = tmp_path / "h", tmp_path / "copy", tmp_path / "dotfiles"
    run(home, "init")
    dotfiles.mkdir()
    (dotfiles / "pizzamail.toml").write_text((home / "config.toml").read_text() + "\n# mine\n")
    (home / "config.toml").unlink()
    (home / "config.toml").symlink_to(dotfiles / "pizzamail.toml")
    run(home, "task", "Water the plants")
    run(home, "backup", str(tmp_path / "b.tar.gz"))
    restored = run(copy, "restore", str(tmp_path / "b.tar.gz"))
    assert restored.exit_code == 0, restored.output
    assert not (copy / "config.toml").is_symlink()
    assert (copy / "config.toml").read_text().endswith("# mine\n")


def test_an_mcp_login_is_named_with_the_command_that_logs_in_again(tmp_path: Path) -> None:
    home = tmp_path / "h"
    run(home, "init")
    with (home / "config.toml").open("a") as config:
        config.write('\n[mcp.servers.linear]\nurl = "https://mcp.example.com/mcp"\nauth = "oauth"\n')
    run(home, "task", "Water the plants")
    result = run(home, "backup", str(tmp_path / "b.tar.gz"))
    assert "mcp-oauth:linear" in result.output and "`pizzamail mcp login linear`" in result.output


def test_the_database_is_copied_as_of_the_moment_the_write_lock_fixed_not_later(tmp_path: Path) -> None:
    """The write lock is let go before the copy: what serve commits after it must not be in it (its
    mail files were not linked), so the copy reads through the snapshot taken under the lock."""
    live = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    live.execute("PRAGMA journal_mode=WAL")
    live.execute("CREATE TABLE messages(id INTEGER PRIMARY KEY)")
    live.execute("INSERT INTO messages VALUES (1)")
    snapshot = archive._snapshot(tmp_path / "state.db")
    live.execute("INSERT INTO messages VALUES (2)")  # serve writes on once the lock is let go
    archive._copy_database(snapshot, tmp_path / "copy.db")
    snapshot.close()
    assert sqlite3.connect(tmp_path / "copy.db").execute("SELECT id FROM messages").fetchall() == [(1,)]
