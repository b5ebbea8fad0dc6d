"""IMAP serving against Dovecot: the same Maildir served by pizzamail and by Dovecot, same run.

Builds a Maildir of synthetic but realistic mail (1-30 KB, plain, alternative and with
attachments), gives each server its own copy, starts each in its own process on a loopback port,
and measures with real clients:

  (a) mbsync full pull of INBOX into an empty local Maildir (wall time, median of --rounds), once
      with mbsync's defaults (it fsyncs every message it stores, as users run it) and once with
      FSync no into memory (/dev/shm), where neither the client's disk flushes nor its disk's
      moods hide the servers' differences; with each, mbsync's own CPU time, the floor under any
      server's pull; both servers are up at once and pulled from in turns (one pull from each,
      --rounds times), so that other work on the machine and its disk meanwhile weighs on both
      alike;
  (b) the header listing a client does on first open,
      UID FETCH 1:* (UID FLAGS RFC822.SIZE INTERNALDATE BODY.PEEK[HEADER.FIELDS (FROM TO SUBJECT
      DATE MESSAGE-ID)]), first and repeated;
  (c) SELECT INBOX, the first (cold) one after start and a warm one (median of 5);
  (d) server RSS after the runs and CPU over 5 s with one client in IDLE;
  (e) on a second, 2,000-message folder, both servers running side by side: the header listing
      (the first, then the median of 3 more, alternating between the servers), Thunderbird's own
      listing of 14 fields and UID SEARCH FROM (each the median of 3, alternating) and APPEND of
      a small mail with imaplib (what IMAPClient runs on; median of 30).

Prints one table with the ratios pizzamail / Dovecot. Needs Dovecot (``apt-get install
dovecot-imapd``) and mbsync (``apt-get install isync``).

    python bench/imap.py [--messages 20000] [--rounds 3] [--cache DIR] [--keep] [--profile FILE]
    python bench/imap.py --scale [--cache DIR]   # 100,000 messages: one pull each, no (e)

--profile runs the pizzamail server under cProfile (its figures are then slower than real).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import imaplib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.imapclient import (
    PASSWORD,
    USER,
    Imap,
    client,
    header_listing,
    search_from,
    select_inbox,
    thunderbird_listing,
    timed,
)
from bench.imapcorpus import copy_maildir, corpus
from tests import dovecot  # the private Dovecot the tests use too
from tests.dovecot import free_port, stop, wait_port

IDLE_SECONDS = 5.0
SMALL_FOLDER = 2_000
APPENDS = 30
SMALL_MAIL = (b"From: Bench <bench@example.org>\r\nTo: me@pizzamail.localhost\r\nSubject: appended\r\n"
              b"Date: Wed, 01 Jan 2025 00:00:00 +0000\r\nMessage-ID: <append@example.org>\r\n\r\n"
              b"A small mail.\r\n")

# -- the servers --------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    startup: float
    log: Path

    def pids(self) -> list[int]:
        """The server process and all its descendants (Dovecot forks one per role and client)."""
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    ppid = int(stat.rpartition(")")[2].split()[1])
                    children.setdefault(ppid, []).append(int(entry))
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found


def start_pizzamail(home: Path, log: Path, profile: Path | None) -> Server:
    port = free_port()
    argv = [sys.executable, str(Path(__file__).resolve()), "--serve-pizzamail", str(home),
            "--port", str(port)]
    if profile is not None:
        argv += ["--profile", str(profile)]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc, timeout=3600)
    except BaseException:
        stop(proc)
        raise
    return Server("pizzamail", proc, port, time.perf_counter() - started, log)


def start_dovecot(tmp: Path, maildir: Path) -> Server:
    port = free_port()
    conf = dovecot.write_config(tmp, maildir, port, password=PASSWORD)
    dovecot.hand_over(maildir)
    started = time.perf_counter()
    proc = dovecot.launch(conf, port)
    return Server("Dovecot", proc, port, time.perf_counter() - started, tmp / "dovecot.log")


# -- the pizzamail runner (in its own process) ----------------------------------------------------


async def _serve_pizzamail(home: Path, port: int) -> None:
    from pizzamail.auth import Accounts
    from pizzamail.imap import cache, start_imap_server
    from pizzamail.mailbox import Mailbox
    from pizzamail.store import Store

    accounts = Accounts(user=USER, password=PASSWORD, addresses=frozenset({"me@pizzamail.localhost"}))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    async with Store(path=home / "state.db") as store:
        started = time.perf_counter()
        mailbox = await Mailbox(root=home / "Maildir", store=store, describe=cache.describe).open()
        print(f"indexed in {time.perf_counter() - started:.1f} s", flush=True)
        server = await start_imap_server(host="127.0.0.1", port=port, mailbox=mailbox, accounts=accounts)
        await stopping.wait()
        await server.close()


def serve_pizzamail(home: Path, port: int, profile: Path | None) -> None:
    import warnings

    from pizzamail import collector

    warnings.simplefilter("ignore")
    collector.pace()  # as serve does
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    try:
        asyncio.run(_serve_pizzamail(home, port))
    finally:
        if profiler is not None and profile is not None:
            profiler.disable()
            profiler.dump_stats(profile)


# -- mbsync ------------------------------------------------------------------------------------


def mbsync_rc(tmp: Path, port: int, fsync: bool) -> Path:
    out = subprocess.run(["mbsync", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    tls = "TLSType" if m and (int(m.group(1)), int(m.group(2))) >= (1, 5) else "SSLType"
    local = tmp / "mbsync-local"
    local.mkdir()
    rc = tmp / "mbsyncrc"
    rc.write_text(f"""\
FSync {"yes" if fsync else "no"}

IMAPAccount bench
Host 127.0.0.1
Port {port}
User {USER}
Pass {PASSWORD}
{tls} None
AuthMechs LOGIN

IMAPStore far
Account bench

MaildirStore near
Path {local}/
Inbox {local}/INBOX

Channel bench
Far :far:
Near :near:
Patterns INBOX
Create Near
Sync Pull
SyncState *
""")
    return rc


@dataclass(frozen=True)
class Pull:
    wall: float
    cpu: float
    """mbsync's own user and system time: no server can make the pull shorter"""


def mbsync_pull(tmp: Path, port: int, expected: int, fsync: bool) -> Pull:
    """A full pull into ``tmp`` (with FSync yes) or into memory (FSync no, see :func:`in_memory`)."""
    with contextlib.nullcontext(tmp) if fsync else in_memory(tmp) as where:
        shutil.rmtree(where / "mbsync-local", ignore_errors=True)
        rc = mbsync_rc(where, port, fsync)
        os.sync()  # the previous run's writeback must not land in this one
        before, started = os.times(), time.perf_counter()
        done = subprocess.run(["mbsync", "-a", "-c", str(rc)], capture_output=True, timeout=3600)
        elapsed, after = time.perf_counter() - started, os.times()
        if done.returncode != 0:
            raise RuntimeError(f"mbsync failed: {done.stderr.decode(errors='replace')[-2000:]}")
        inbox = where / "mbsync-local" / "INBOX"
        pulled = sum(len(os.listdir(inbox / sub)) for sub in ("cur", "new"))
        if pulled != expected:
            raise RuntimeError(f"mbsync pulled {pulled} of {expected} messages")
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return Pull(wall=elapsed, cpu=cpu)


@contextlib.contextmanager
def in_memory(tmp: Path) -> Iterator[Path]:
    """A directory in /dev/shm for an FSync-no pull (``tmp`` when it has no room for twice the
    folder): there the pull is bound by the server and mbsync's CPU, not by how the disk feels (into
    the same disk, FSync no pulls of one server took 2 to 16 s)."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shutil.disk_usage(shm).free < 2 * _size(tmp):
        yield tmp
        return
    where = Path(tempfile.mkdtemp(prefix="pizzamail-bench-", dir=shm))
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def rss_kb(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            m = re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())
            total += int(m.group(1)) if m else 0
    return total


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def idle_cpu(server: Server) -> tuple[float, int, int]:
    """CPU (% of one core) over IDLE_SECONDS with one client in IDLE; RSS of all the server's
    processes and of its imap processes, in kB, taken then."""
    with client(server.port) as c:
        select_inbox(c)
        tag = c.send(b"IDLE")
        if not c.read_line().startswith(b"+"):
            raise RuntimeError("IDLE refused")
        pids = server.pids()
        before, started = cpu_ticks(pids), time.perf_counter()
        time.sleep(IDLE_SECONDS)
        ticks, elapsed = cpu_ticks(pids) - before, time.perf_counter() - started
        rss_all = rss_kb(pids)
        rss_imap = rss_kb([p for p in pids if comm(p) == "imap"]) if server.name == "Dovecot" else rss_all
        c.sock.sendall(b"DONE\r\n")
        while not c.response().startswith(tag + b" "):
            pass
    return 100.0 * ticks / os.sysconf("SC_CLK_TCK") / elapsed, rss_all, rss_imap


@dataclass
class Figures:
    startup: float = 0.0
    select_cold: float = 0.0
    listing_first: float = 0.0
    listing_again: float = 0.0
    select_warm: float = 0.0
    mbsync: float = 0.0
    mbsync_cpu: float = 0.0
    mbsync_nofsync: float = 0.0
    mbsync_nofsync_cpu: float = 0.0
    rss_kb: int = 0
    rss_imap_kb: int = 0
    idle_cpu: float = 0.0
    restart: float = 0.0
    select_restart: float = 0.0
    small_listing_first: float = 0.0
    small_listing: float = 0.0
    small_listing_steady: float = 0.0
    thunderbird_listing: float = 0.0
    search_from: float = 0.0
    append: float = 0.0


def measure(server: Server, count: int) -> Figures:
    """(b) and (c) on one server, alone: the listing and SELECT that open its folder."""
    f = Figures(startup=server.startup)
    os.sync()
    with client(server.port) as c:
        f.select_cold, exists = timed(select_inbox, c)
        if exists != count:
            raise RuntimeError(f"{server.name}: SELECT says {exists} messages, expected {count}")
        f.listing_first, listed = timed(header_listing, c)
        if listed != count:
            raise RuntimeError(f"{server.name}: header listing gave {listed} of {count}")
        f.listing_again, _ = timed(header_listing, c)
    warm = []
    with client(server.port) as c:  # the warm-up connection
        select_inbox(c)
    for _ in range(5):
        with client(server.port) as c:
            warm.append(timed(select_inbox, c)[0])
    f.select_warm = statistics.median(warm)
    return f


def pulls(
    both: list[tuple[Server, Figures, Path]], count: int, rounds: int, fsyncs: tuple[bool, ...],
) -> None:
    """(a): mbsync pulls from both servers in turns (one from each, ``rounds`` times), so that
    whatever else loads the machine and its disk meanwhile loads both alike; the median of each."""
    for fsync in fsyncs:
        done: dict[str, list[Pull]] = {server.name: [] for server, _, _ in both}
        for n in range(rounds):
            for server, _, base in both:
                mode = "yes" if fsync else "no"
                print(f"  {server.name}: mbsync full pull, FSync {mode}, {n + 1}/{rounds}", flush=True)
                done[server.name].append(mbsync_pull(base, server.port, count, fsync))
        for server, figures, _ in both:
            wall = statistics.median(p.wall for p in done[server.name])
            cpu = statistics.median(p.cpu for p in done[server.name])
            if fsync:
                figures.mbsync, figures.mbsync_cpu = wall, cpu
            else:
                figures.mbsync_nofsync, figures.mbsync_nofsync_cpu = wall, cpu


def start_server(name: str, source: Path, tmp: Path, count: int, profile: Path | None) -> tuple[Server, Path]:
    """A copy of ``source`` served by ``name``; the server and the directory it works in."""
    base = tmp / name
    base.mkdir()
    if name == "pizzamail":
        copy_maildir(source, base / "home" / "Maildir")
        print(f"  {name}: starting (indexes {count} messages on first open) ...", flush=True)
        return start_pizzamail(base / "home", base / "server.log", profile), base
    copy_maildir(source, base / "Maildir")
    print(f"  {name}: starting ...", flush=True)
    return start_dovecot(base, base / "Maildir"), base


def restart(server: Server, base: Path, figures: Figures) -> None:
    """Again on the same folder: pizzamail finds its index, Dovecot its index files."""
    if server.name == "pizzamail":
        server = start_pizzamail(base / "home", base / "server-restart.log", None)
    else:
        server = start_dovecot(base, base / "Maildir")
    with running(server), client(server.port) as c:
        figures.restart = server.startup
        figures.select_restart = timed(select_inbox, c)[0]


def run_servers(
    source: Path, tmp: Path, count: int, rounds: int, profile: Path | None, fsyncs: tuple[bool, ...],
) -> tuple[Figures, Figures]:
    """Both servers up at once: (b) and (c) on each alone, (a) in turns, then (d) on each."""
    ours, ours_base = start_server("pizzamail", source, tmp, count, profile)
    with running(ours):
        dove, dove_base = start_server("dovecot", source, tmp, count, None)
        with running(dove):
            both = [(ours, measure(ours, count), ours_base), (dove, measure(dove, count), dove_base)]
            pulls(both, count, rounds, fsyncs)
            for server, figures, _ in both:
                figures.idle_cpu, figures.rss_kb, figures.rss_imap_kb = idle_cpu(server)
    for server, figures, base in both:
        restart(server, base, figures)
    return both[0][1], both[1][1]


def append_times(port: int) -> list[float]:
    """APPEND of a small mail with imaplib, which sends the literal and its CRLF in two writes."""
    imap = imaplib.IMAP4("127.0.0.1", port)
    try:
        imap.login(USER, PASSWORD)
        times = []
        for _ in range(APPENDS):
            started = time.perf_counter()
            status, _ = imap.append("INBOX", None, None, SMALL_MAIL)
            times.append(time.perf_counter() - started)
            if status != "OK":
                raise RuntimeError(f"APPEND: {status}")
        return times
    finally:
        imap.logout()


def side_by_side(source: Path, tmp: Path, ours: Figures, dove: Figures) -> None:
    """(e): both servers up at once on copies of the small folder, measured in turns, so that
    whatever else loads the machine loads both alike."""
    base = tmp / "small"
    copy_maildir(source, base / "pizzamail" / "home" / "Maildir")
    copy_maildir(source, base / "dovecot" / "Maildir")
    print(f"  side by side on {SMALL_FOLDER} messages: header listing, APPEND ...", flush=True)
    servers = [start_pizzamail(base / "pizzamail" / "home", base / "pizzamail.log", None)]
    with running(servers[0]):
        servers.append(start_dovecot(base / "dovecot", base / "dovecot" / "Maildir"))
        with running(servers[1]), client(servers[0].port) as a, client(servers[1].port) as b:
            pairs = ((ours, a), (dove, b))
            for figures, c in pairs:
                select_inbox(c)
                figures.small_listing_first = timed(header_listing, c)[0]
            listings, thunderbird = _in_turns(pairs, header_listing), _in_turns(pairs, thunderbird_listing)
            searches = _in_turns(pairs, search_from)
            steady = _in_turns(pairs, header_listing, rounds=15)
            for figures, _ in pairs:
                figures.small_listing = listings[id(figures)]
                figures.small_listing_steady = steady[id(figures)]
                figures.thunderbird_listing = thunderbird[id(figures)]
                figures.search_from = searches[id(figures)]
            ours.append = statistics.median(append_times(servers[0].port))
            dove.append = statistics.median(append_times(servers[1].port))


def _in_turns(
    pairs: tuple[tuple[Figures, Imap], ...], listing: Callable[[Imap], int], rounds: int = 3
) -> dict[int, float]:
    """The median of ``rounds`` ``listing`` runs on each connection, one on each in turn."""
    runs: dict[int, list[float]] = {id(f): [] for f, _ in pairs}
    for _ in range(rounds):
        for figures, c in pairs:
            runs[id(figures)].append(timed(listing, c)[0])
    return {key: statistics.median(times) for key, times in runs.items()}


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    """Stop the server on leaving; show the end of its log when something failed."""
    try:
        yield server
    except BaseException:
        print(f"  {server.name}: failed; server log {server.log}:", file=sys.stderr)
        with contextlib.suppress(OSError):
            print(server.log.read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        stop(server.proc)


# -- report ------------------------------------------------------------------------------------


def table(count: int, ours: Figures, dove: Figures) -> str:
    rows: list[tuple[str, str, str, str, str]] = []

    def secs(label: str, a: float, b: float, goal: str = "") -> None:
        rows.append((label, f"{a:.3f} s", f"{b:.3f} s", f"{a / b:.2f}x" if b else "-", goal))

    secs(f"(a) mbsync full pull, {count} msgs", ours.mbsync, dove.mbsync, "<= 0.9x")
    secs("    mbsync's own CPU in it (no pull is shorter)", ours.mbsync_cpu, dove.mbsync_cpu)
    if ours.mbsync_nofsync:
        secs("    same, FSync no, into memory (server-bound)", ours.mbsync_nofsync, dove.mbsync_nofsync)
        secs("    mbsync's own CPU in it", ours.mbsync_nofsync_cpu, dove.mbsync_nofsync_cpu)
    secs("(b) header listing UID FETCH 1:*, first", ours.listing_first, dove.listing_first)
    secs("    same, repeated on the connection", ours.listing_again, dove.listing_again)
    secs("(c) SELECT INBOX, cold (first after start)", ours.select_cold, dove.select_cold)
    secs("    SELECT INBOX, warm (median of 5)", ours.select_warm, dove.select_warm, "<= 1.0x")
    rows.append(("(d) RSS after the runs, all processes", f"{ours.rss_kb / 1024:.1f} MB",
                 f"{dove.rss_kb / 1024:.1f} MB", f"{ours.rss_kb / dove.rss_kb:.2f}x", "bounded"))
    rows.append(("    RSS, imap processes only", f"{ours.rss_imap_kb / 1024:.1f} MB",
                 f"{dove.rss_imap_kb / 1024:.1f} MB", f"{ours.rss_imap_kb / dove.rss_imap_kb:.2f}x", ""))
    rows.append((f"    CPU, 1 client in IDLE for {IDLE_SECONDS:.0f} s", f"{ours.idle_cpu:.1f} %",
                 f"{dove.idle_cpu:.1f} %", "-", "~ 0"))
    if ours.small_listing:
        secs(f"(e) header listing, {SMALL_FOLDER} msgs, first", ours.small_listing_first,
             dove.small_listing_first)
        secs("    same, median of the 3 after it", ours.small_listing, dove.small_listing, "<= 1.0x")
        secs("    same, median of 15 more (steadier)", ours.small_listing_steady, dove.small_listing_steady)
        secs("    Thunderbird's listing (14 fields), median of 3", ours.thunderbird_listing,
             dove.thunderbird_listing)
        secs("    UID SEARCH FROM, median of 3", ours.search_from, dove.search_from)
        rows.append((f"    APPEND of a small mail (imaplib, median of {APPENDS})",
                     f"{ours.append * 1000:.1f} ms", f"{dove.append * 1000:.1f} ms",
                     f"{ours.append / dove.append:.2f}x", "<= 3x"))
    secs("start until listening (pizzamail indexes)", ours.startup, dove.startup)
    secs("restart until listening (already indexed)", ours.restart, dove.restart)
    secs("SELECT INBOX, first after that restart", ours.select_restart, dove.select_restart)
    head = ("work", "pizzamail", "Dovecot", "ratio", "goal")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths,
             strict=True))) for r in [head, *rows]]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--cache", type=Path, help="build the Maildir here once and reuse it")
    parser.add_argument("--rounds", type=int, default=3, help="mbsync pulls per server (median)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--profile", type=Path, help="cProfile the pizzamail server into this file")
    parser.add_argument("--scale", action="store_true",
                        help=f"100,000 messages, one mbsync pull each (FSync yes), no {SMALL_FOLDER}-message"
                        " part")
    parser.add_argument("--serve-pizzamail", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_pizzamail:
        serve_pizzamail(args.serve_pizzamail, args.port, args.profile)
        return
    missing = [f"{what} ({fix})" for what, ok, fix in (
        ("Dovecot", os.path.exists(dovecot.DOVECOT), "apt-get install dovecot-imapd"),
        ("mbsync", shutil.which("mbsync") is not None, "apt-get install isync"),
    ) if not ok]
    if missing:
        sys.exit("missing: " + ", ".join(missing))
    if args.scale:
        args.messages, args.rounds = 100_000, 1
    fsyncs = (True,) if args.scale else (True, False)
    tmp = Path(tempfile.mkdtemp(prefix="bench-imap-"))
    try:
        if args.cache:
            args.cache.mkdir(parents=True, exist_ok=True)
        source = corpus(args.messages, args.cache, tmp)
        profile = args.profile.resolve() if args.profile else None
        ours, dove = run_servers(source, tmp, args.messages, args.rounds, profile, fsyncs)
        if not args.scale:
            side_by_side(corpus(SMALL_FOLDER, args.cache, tmp), tmp, ours, dove)
        print()
        print(table(args.messages, ours, dove))
        if profile:
            print(f"\nprofile of the pizzamail server: {profile} (python -m pstats {profile})")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
