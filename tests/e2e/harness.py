"""``pizzamail serve`` as a real subprocess in a temp home, on free ports, with a fake model."""

from __future__ import annotations

import email.policy
import email.utils
import os
import queue
import re
import signal
import smtplib
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path

from pizzamail.home import Home
from pizzamail.secrets import secret_store

REPO = Path(__file__).resolve().parents[2]
OWNER, BOT = "me@pizzamail.localhost", "bot@pizzamail.localhost"
#: the secrets of the hooks the ``served_hook`` fixture configures
SECRET = "hook-secret-for-e2e"
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks spec's example secret


def write_config(home: Path, *, base_url: str | None) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    provider = f'\n[providers.openai]\nbase_url = "{base_url}"\nmax_retries = 0\n' if base_url else ""
    (home / "config.toml").write_text(
        "[server]\nsmtp_port = 0\nimap_port = 0\nimaps_port = 0\nhttp_port = 0\n"
        "[agent]\nmodel = \"openai:fake-model\"\n" + provider
    )


@dataclass(kw_only=True)
class Served:
    home: Path
    env: dict[str, str]
    proc: subprocess.Popen[str] | None = None
    smtp: int = 0
    imap: int = 0
    imaps: int = 0
    http: int = 0
    output: list[str] = field(default_factory=list)
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def start(self, *args: str, timeout: float = 120, crash_after: str | None = None) -> Served:
        """Run ``pizzamail serve ARGS`` until it is ready. With ``crash_after`` (``MODULE:FUNCTION``)
        the process dies the first time that function returns (see :mod:`tests.e2e.crash`).
        ``timeout``: for each line it prints. Starting is CPU-bound (imports, TLS, the store): a few
        seconds alone, over 30 on a 2-core machine at load 16; a crashed start ends the wait at once."""
        self.output, self._lines = [], queue.Queue()
        command = ["-m", "tests.e2e.crash", crash_after] if crash_after else ["-m", "pizzamail"]
        self.proc = subprocess.Popen(
            [sys.executable, *command, "serve", *args], env=self.env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._pump, args=(self.proc, self._lines), daemon=True).start()
        self.wait_for("pizzamail is ready", timeout)
        text = "\n".join(self.output)
        self.imap = int(_match(r"IMAP server\s+\S+ port (\d+)", text))
        self.smtp = int(_match(r"SMTP server\s+\S+ port (\d+)", text))
        self.imaps = int(_match(r"or port (\d+) with SSL/TLS", text))
        self.http = int(_match(r"webhooks\s+http://\S+?:(\d+)/hooks/", text))
        return self

    def crash(self, *args: str, crash_after: str, timeout: float = 30) -> int:
        """Run ``pizzamail serve ARGS`` until it dies after ``crash_after`` returned, ready or not
        (a crash during start-up never gets there); returns its exit status."""
        self.output, self._lines = [], queue.Queue()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.crash", crash_after, "serve", *args], env=self.env,
            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._pump, args=(self.proc, self._lines), daemon=True).start()
        self.proc.wait(timeout=timeout)
        return self.stop(None)

    @staticmethod
    def _pump(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def wait_for(self, needle: str | re.Pattern[str], timeout: float = 30, *, after: int = 0) -> str:
        """Block until the server prints a line containing ``needle`` (or a match of it), among its
        lines after the first ``after``."""
        def found(line: str) -> bool:
            return needle in line if isinstance(needle, str) else needle.search(line) is not None

        for line in self.output[after:]:
            if found(line):
                return line
        while (printed := self._lines.get(timeout=timeout)) is not None:
            self.output.append(printed)
            if found(printed):
                return printed
        raise AssertionError(f"serve exited before {needle!r}:\n" + "\n".join(self.output))

    @property
    def password(self) -> str:
        return secret_store(Home(root=self.home)).account_password()

    def send(self, msg: EmailMessage) -> None:
        with smtplib.SMTP("127.0.0.1", self.smtp, timeout=10) as client:
            client.login("me", self.password)
            client.send_message(msg)

    def cli(self, *args: str) -> str:
        """``pizzamail ARGS`` as its own process beside the server (as a user would run it);
        returns its output, failing the test on a non-zero exit."""
        done = subprocess.run([sys.executable, "-m", "pizzamail", *args], env=self.env, text=True,
                              capture_output=True, timeout=60)
        assert done.returncode == 0, f"pizzamail {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
        return done.stdout

    def stop(self, sig: int | None = signal.SIGTERM) -> int:
        """Send ``sig`` (None: send nothing, wait for the process to end by itself); returns its
        exit status."""
        assert self.proc is not None
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # fail, but leave no server behind to load later tests
            self.proc.kill()
            self.proc.wait()
            raise
        while (line := self._lines.get(timeout=10)) is not None:
            self.output.append(line)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.proc = None
        return code


def serve_env(home: Path) -> dict[str, str]:
    return {
        **os.environ, "PIZZAMAIL_HOME": str(home), "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "OPENAI_API_KEY": "sk-fake",
    }


def task_mail(body: str, *, subject: str = "Plan the team offsite", msgid: str | None = None,
              reply_to: EmailMessage | None = None) -> EmailMessage:
    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"], msg["To"] = f"Me <{OWNER}>", BOT
    msg["Subject"] = subject
    msg["Message-ID"] = msgid or email.utils.make_msgid(domain="client.example")
    if reply_to is not None:
        parent = str(reply_to["Message-ID"])
        msg["In-Reply-To"] = parent
        msg["References"] = f"{reply_to.get('References', '')} {parent}".strip()
    msg.set_content(body)
    return msg


def _match(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in serve output:\n{text}"
    return found.group(1)
