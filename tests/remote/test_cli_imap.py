"""What ``pizzamail init`` (and ``serve``) tell a user whose mailbox is their own IMAP account."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pizzamail.cli import cli


def test_init_in_imap_mode_names_the_account_and_the_plus_address(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text('[mailbox]\nmode = "imap"\n[mailbox.imap]\nhost = "imap.fastmail.com"\n'
                                      'user = "me@example.com"\n')
    result = CliRunner().invoke(cli, ["--home", str(home), "init"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "account      me@example.com at imap.fastmail.com port 993 (ssl)" in result.output
    assert "write to     me+bot@example.com" in result.output
    assert "pizzamail keys set mailbox" in result.output
    assert "SMTP server" not in result.output and "IMAP server" not in result.output
