"""A private Dovecot for tests and benchmarks: its own config, state and log in one directory.

It runs as whoever starts it (no system service, no system config), listens on 127.0.0.1 only,
speaks clear text and lets in any user name with one static password. When that is root, mail is
read and written as ``nobody``: Dovecot never touches mail as uid 0. The config is Dovecot 2.3's
syntax; 2.4 changed it (:func:`unavailable` says so rather than fail).

Used by the tests (``tests/triggers/test_watch_dovecot.py``) and by ``bench/imap.py``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

DOVECOT = "/usr/sbin/dovecot"
PASSWORD = "pw"


def unavailable() -> str | None:
    """Why a private Dovecot cannot run here, or None when it can."""
    if not os.path.exists(DOVECOT):
        return f"Dovecot is not installed ({DOVECOT}; apt-get install dovecot-imapd)"
    version = subprocess.run([DOVECOT, "--version"], capture_output=True, text=True).stdout.strip()
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None or (int(found[1]), int(found[2])) >= (2, 4):
        return f"Dovecot {version or '(unknown version)'}: this config is written for Dovecot 2.3"
    return None


def mail_user() -> pwd.struct_passwd:
    """Whom Dovecot reads the mail as: never root (it refuses uid 0), so ``nobody`` then."""
    return pwd.getpwnam("nobody") if os.getuid() == 0 else pwd.getpwuid(os.getuid())


def hand_over(path: Path) -> None:
    """Make ``path`` (a file or a whole tree) and the way to it usable by the mail user."""
    user = mail_user()
    if user.pw_uid == os.getuid():
        return
    os.chown(path, user.pw_uid, user.pw_gid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), user.pw_uid, user.pw_gid)
    for parent in path.parents:
        if parent == Path(tempfile.gettempdir()):
            break
        parent.chmod(parent.stat().st_mode | 0o711)


@contextlib.contextmanager
def private_root() -> Iterator[Path]:
    """A fresh directory for a Dovecot, right under the system's temp dir and removed afterwards.
    Not in pytest's ``tmp_path``: every pytest session that starts on the machine (another
    checkout's, say) makes ``/tmp/pytest-of-USER`` private again, and the mail user (``nobody``
    when we are root) then gets "Permission denied" on the way to the Maildir."""
    with tempfile.TemporaryDirectory(prefix="pizzamail-dovecot-") as root:
        yield Path(root)


def special_use_folders(drafts: str = "Drafts") -> str:
    """The folders of a typical account, marked by SPECIAL-USE (RFC 6154) as a provider marks them;
    ``drafts`` names the Drafts folder (a localised account has "Brouillons", say)."""
    return f"""\
namespace inbox {{
  inbox = yes
  separator = /
  mailbox "{drafts}" {{
    special_use = \\Drafts
    auto = subscribe
  }}
  mailbox Sent {{
    special_use = \\Sent
    auto = subscribe
  }}
  mailbox Trash {{
    special_use = \\Trash
    auto = create
  }}
}}
"""


def write_config(
    root: Path, maildir: Path, port: int, *, password: str = PASSWORD, idle_check_seconds: int = 30,
    special_use: bool = False, drafts: str = "Drafts",
) -> Path:
    """``root``/dovecot.conf: IMAP on 127.0.0.1:``port`` serving ``maildir`` as INBOX; its runtime
    files, state, the mail user's home and ``dovecot.log`` under ``root`` too.

    In IDLE Dovecot hears of new mail through inotify, and looks anyway every ``idle_check_seconds``
    (its default 30): when inotify is out of instances (a per-user limit, shared with every other
    program of that user), that look is all there is. ``special_use`` adds Drafts (named ``drafts``),
    Sent and Trash, marked as such, with ``/`` between folder levels."""
    me = mail_user()
    if os.getuid() == 0:
        internal = "dovecot" if _user_exists("dovecot") else "root"
        login = "dovenull" if _user_exists("dovenull") else internal
    else:
        internal = login = me.pw_name
    for sub in ("run", "state", "home"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "run").chmod(0o755)
    hand_over(root / "home")
    conf = root / "dovecot.conf"
    conf.write_text(f"""\
protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {internal}
default_login_user = {login}
mail_location = maildir:{maildir}
mailbox_idle_check_interval = {idle_check_seconds} secs
passdb {{
  driver = static
  args = password={password}
}}
userdb {{
  driver = static
  args = uid={me.pw_uid} gid={me.pw_gid} home={root}/home
}}
service imap-login {{
  inet_listener imap {{
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
{special_use_folders(drafts) if special_use else ""}""")
    return conf


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def launch(config: Path, port: int, *, timeout: float = 60.0) -> subprocess.Popen[bytes]:
    """Dovecot in the foreground on ``config`` in a process group of its own, returned once it
    accepts connections on ``port``; its own output goes to dovecot.out next to the config."""
    with (config.parent / "dovecot.out").open("ab") as out:
        proc = subprocess.Popen([DOVECOT, "-F", "-c", str(config)], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_port(port, proc, timeout)
    except BaseException:
        stop(proc)
        raise
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until something accepts on ``port`` (a bounded poll); fails early if ``proc`` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listening on {port} after {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, SIGKILL if it has not ended after 20 s. A process that leads its own group (as
    :func:`launch` starts Dovecot) gets the signal with its whole group, the way systemd stops a
    service: Dovecot's master alone leaves a client in IDLE connected for another 10 s."""
    if proc.poll() is not None:
        return
    _signal(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL)
        proc.wait()


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)


@dataclass
class Dovecot:
    """One private Dovecot over ``root``/Maildir that can be stopped and started again on its port;
    in IDLE it looks for new mail every second even without inotify."""

    root: Path
    port: int = 0
    special_use: bool = False
    drafts: str = "Drafts"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def maildir(self) -> Path:
        return self.root / "Maildir"

    def start(self) -> None:
        for sub in ("tmp", "new", "cur"):
            (self.maildir / sub).mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        config = write_config(self.root, self.maildir, self.port, idle_check_seconds=1,
                              special_use=self.special_use, drafts=self.drafts)
        hand_over(self.maildir)
        self.proc = launch(config, self.port)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None

    def deliver(self, data: bytes, name: str) -> Path:
        """Like a delivery agent: written to tmp/, then renamed into new/ (``name`` unique)."""
        draft = self.maildir / "tmp" / name
        draft.write_bytes(data)
        hand_over(draft)
        return draft.rename(self.maildir / "new" / name)

    def log(self) -> str:
        """The end of Dovecot's log, for a failure message."""
        with contextlib.suppress(OSError):
            return (self.root / "dovecot.log").read_text(errors="replace")[-3000:]
        return ""


@contextlib.contextmanager
def running(*, special_use: bool = False, drafts: str = "Drafts") -> Iterator[Dovecot]:
    """A private Dovecot, started, and stopped again afterwards (what each Dovecot fixture yields)."""
    with private_root() as root:
        server = Dovecot(root=root, special_use=special_use, drafts=drafts)
        server.start()
        try:
            yield server
        finally:
            server.stop()
