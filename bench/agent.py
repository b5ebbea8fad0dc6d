"""The agent path of a real ``pizzamail serve``: reply latency, idle CPU, memory, many runs at once, and
SMTP intake while the runner works.

Every part starts its own ``python -m pizzamail serve`` in a fresh home, with the tests' scripted model
server (``FakeOpenAI``, in a process of its own) as its provider, and talks to it over loopback as a
mail program would:

(a) latency: N tasks one after another, each timed from the SMTP send until an IMAP client in IDLE
    sees the reply (``* N EXISTS``), 0-latency model; p50/p90 and where the time goes (SMTP 250, the
    task filed in INBOX, the model request, the reply filed);
(b) idle CPU of serve with ``[runner] concurrency = 256`` and with 1, side by side, over ``--idle``
    seconds (utime + stime from /proc/PID/stat), in % of one core;
(c) RSS after 200 runs on the 0-latency model, of serve and its runner process (and their PSS), and
    the CPU they spent a task (its mail, its run, the filing of both), which moves with the machine
    much less than rates do;
(d) 200 runs on a 1-second model (concurrency 256), submitted by one SMTP client: wall time from
    the last submission until every run is done ÷ 1 s, ms per mail of that client while the runs
    work, and how many runs waited on the model at once (intake's pace bounds it);
(e) SMTP intake, 4 clients x 150 mails, while the runner answers them (0-latency model), ÷ a bare
    aiosmtpd no-op handler (bench/intake.py's baseline server, with the same clients and mails) in
    the same run; and how long after the last mail every run is done.

``--against DIR`` runs every part with a second checkout too (e.g. ``--against /work/main``), side by
side in the same run; the figures of both are printed. Whichever checkout a part measures first has
an edge of its own, so compare with ``--rounds`` of 2 or more: each round measures them in the other
order, and each part ends with every checkout's medians.

    python bench/agent.py [--parts abcde] [--tasks 40] [--idle 10] [--against DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import imaplib
import multiprocessing as mp
import os
import smtplib
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import intake
from pizzamail.home import Home
from tests.e2e.harness import Served, serve_env, task_mail, write_config
from tests.fakes.openai_server import FakeOpenAI, Recorded, Scripted, slow, text

REPO = Path(__file__).resolve().parents[1]
THINKING = 1.0  # seconds the slow model takes for (d)


@dataclass(frozen=True)
class Code:
    """A checkout measured, and whether its runs work in a process of their own ([runner] separate)."""

    path: Path
    separate: bool = False


@dataclass(kw_only=True)
class Serve(Served):
    """``pizzamail serve`` of the checkout ``code`` (its own directory first on sys.path)."""

    code: Path = REPO

    def launch(self) -> Serve:
        self.env = {**self.env, "PYTHONPATH": str(self.code)}
        cwd = os.getcwd()
        os.chdir(self.code)  # ``python -m`` puts the working directory first on sys.path
        try:
            self.start()
        finally:
            os.chdir(cwd)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def done(self) -> int:
        """Runs finished (done) so far, read beside the server."""
        with sqlite3.connect(f"file:{Home(root=self.home).database}?mode=ro", uri=True, timeout=30) as db:
            return int(db.execute("SELECT count(*) FROM runs WHERE status = 'done'").fetchone()[0])

    def until_done(self, runs: int, timeout: float = 300) -> float:
        deadline = time.monotonic() + timeout
        while self.done() < runs:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.done()} of {runs} runs done")
            time.sleep(0.01)
        return time.perf_counter()


class Model:
    """The scripted model (``FakeOpenAI``) in a process of its own. A real provider works on
    another machine; in the bench's process its threads would share the GIL with the SMTP clients
    whose pace (d) and (e) measure (600 requests under (e)). Here it still shares the cores."""

    def __init__(self) -> None:
        self._conn, theirs = mp.Pipe()
        self._proc = mp.Process(target=_model, args=(theirs,), daemon=True, name="fake model")
        self._proc.start()
        self.base_url: str = self._conn.recv()

    def answer(self, delay: float) -> None:
        """From now on every request is answered "Done." after ``delay`` seconds; forgets when
        earlier ones came."""
        self._ask("answer", delay)

    def asked(self) -> list[float]:
        """When the model received each request since :meth:`answer` or :meth:`forget` (perf_counter,
        the same clock in every process)."""
        return list(self._ask("asked"))

    def forget(self) -> None:
        self._ask("forget")

    def close(self) -> None:
        self._ask("stop")
        self._proc.join()

    def _ask(self, command: str, arg: float = 0.0) -> list[float]:
        self._conn.send((command, arg))
        return list(self._conn.recv())


def _model(conn: Connection) -> None:
    asked: list[float] = []

    def answer(delay: float) -> Callable[[Recorded], Scripted]:
        def scripted(request: Recorded) -> Scripted:
            asked.append(time.perf_counter())
            return slow(text("Done."), delay) if delay else text("Done.")
        return scripted

    with FakeOpenAI(keep_alive=True) as fake:
        conn.send(fake.base_url)
        while True:
            command, arg = conn.recv()
            if command == "answer":
                fake.script([], then=answer(arg))
            if command in ("answer", "forget"):
                asked.clear()
                fake.requests.clear()
            conn.send(list(asked) if command == "asked" else [])
            if command == "stop":
                return


@dataclass(kw_only=True)
class Bench:
    root: Path
    model: Model

    @contextmanager
    def serving(self, code: Code, concurrency: int | None = None, delay: float = 0.0) -> Iterator[Serve]:
        self.model.answer(delay)
        home = self.root / f"home-{time.time_ns()}"
        write_config(home, base_url=self.model.base_url)
        runner = [*([f"concurrency = {concurrency}"] if concurrency is not None else []),
                  *(["separate = true"] if code.separate else [])]
        if runner:
            with (home / "config.toml").open("a") as config:
                config.write("[runner]\n" + "".join(f"{line}\n" for line in runner))
        os.sync()  # the previous serve's writeback must not land in this one's figures
        served = Serve(home=home, env=serve_env(home), code=code.path).launch()
        try:
            yield served
        finally:
            served.stop()


# -- (a) latency -----------------------------------------------------------------------------------


class Idle:
    """An IMAP client in IDLE on INBOX, reading the server's pushes."""

    def __init__(self, served: Serve) -> None:
        self.imap = imaplib.IMAP4("127.0.0.1", served.imap)
        self.imap.login("me", served.password)
        _, data = self.imap.select("INBOX")
        self.exists = int(data[0] or 0)
        self.imap.send(b"i1 IDLE\r\n")
        assert self.imap.readline().startswith(b"+")

    def until(self, count: int) -> float:
        """Read pushes until INBOX holds ``count`` messages; returns when (perf_counter)."""
        while self.exists < count:
            line = self.imap.readline()
            if line.endswith(b"EXISTS\r\n"):
                self.exists = int(line.split()[1])
        return time.perf_counter()

    def close(self) -> None:
        self.imap.send(b"DONE\r\n")
        while not self.imap.readline().startswith(b"i1 "):
            pass
        self.imap.logout()


def latency(bench: Bench, code: Code, tasks: int) -> dict[str, list[float]]:
    with bench.serving(code) as served:
        idle = Idle(served)
        smtp = smtplib.SMTP("127.0.0.1", served.smtp, timeout=30)
        smtp.login("me", served.password)
        marks: dict[str, list[float]] = {k: [] for k in ("total", "smtp 250", "task filed", "model asked",
                                                         "reply filed after the model")}
        for n in range(tasks + 3):  # the first three warm up (imports, caches)
            mail = task_mail(f"task {n}", subject=f"Task {n}")
            bench.model.forget()
            base = idle.exists
            sent = time.perf_counter()
            smtp.send_message(mail)
            accepted = time.perf_counter()
            filed = idle.until(base + 1)
            replied = idle.until(base + 2)
            if n < 3:
                continue
            asked = next(iter(bench.model.asked()), float("nan"))
            for key, value in (("total", replied - sent), ("smtp 250", accepted - sent),
                               ("task filed", filed - sent), ("model asked", asked - sent),
                               ("reply filed after the model", replied - asked)):
                marks[key].append(value * 1000)
        smtp.quit()
        idle.close()
    return marks


def p(values: list[float], q: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def show_latency(name: str, marks: dict[str, list[float]]) -> None:
    total = marks["total"]
    print(f"  {name}: mail -> reply seen in IDLE p50 {p(total, 50):6.1f} ms, p90 {p(total, 90):6.1f} ms"
          f" ({len(total)} tasks)")
    for key, values in marks.items():
        if key != "total":
            print(f"      {key:30s} p50 {p(values, 50):6.1f} ms  p90 {p(values, 90):6.1f} ms")


# -- (b) idle CPU, (c) memory ------------------------------------------------------------------------


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (serve and its runner process)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        found.append(current := pending.pop())
        pending.extend(parents.get(current, ()))
    return found


def cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and its descendants, with the ones that ended and were waited for."""
    total = 0
    for each in tree(pid):
        fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (serve and its runner process), in MB."""
    return _memory(pid, "Rss:")


def pss_mb(pid: int) -> float:
    """The same, with the pages they share counted once (proportional set size)."""
    return _memory(pid, "Pss:")


def _memory(pid: int, field: str) -> float:
    total = 0
    for each in tree(pid):
        for line in Path(f"/proc/{each}/smaps_rollup").read_text().splitlines():
            if line.startswith(field):
                total += int(line.split()[1])
    return total / 1024


def idle_cpu(bench: Bench, code: Code, seconds: float) -> dict[int, float]:
    """% of one core used by an idle serve, at concurrency 256 and 1 over the same seconds."""
    with bench.serving(code, 256) as many, bench.serving(code, 1) as one:
        time.sleep(2)  # the start's own work settles
        before = {n: cpu_seconds(s.pid) for n, s in ((256, many), (1, one))}
        time.sleep(seconds)
        return {n: (cpu_seconds(s.pid) - before[n]) / seconds * 100 for n, s in ((256, many), (1, one))}


def submit(port: int, password: str, count: int, tag: str) -> float:
    """``count`` tasks over one SMTP connection; returns when the last was accepted."""
    with smtplib.SMTP("127.0.0.1", port, timeout=120) as smtp:
        smtp.login("me", password)
        for n in range(count):
            smtp.send_message(task_mail(f"task {tag}{n}", subject=f"Task {tag}{n}"))
    return time.perf_counter()


def memory(bench: Bench, code: Code, runs: int) -> tuple[float, float, float]:
    """RSS and PSS (MB) after ``runs`` runs, and the CPU milliseconds a task (mail, run, filing)."""
    with bench.serving(code) as served:
        time.sleep(1)  # the start's own work settles
        before = cpu_seconds(served.pid)
        submit(served.smtp, served.password, runs, "m")
        served.until_done(runs)
        cpu = (cpu_seconds(served.pid) - before) / runs * 1000
        return rss_mb(served.pid), pss_mb(served.pid), cpu


# -- (d) many runs at once, (e) intake while the runner works ------------------------------------------


def many(bench: Bench, code: Code, runs: int) -> tuple[float, float, float, int]:
    """(wall after the last submission ÷ the model's second, ms per mail while runs work, RSS MB,
    most model requests in flight at once)."""
    with bench.serving(code, 256, delay=THINKING) as served:
        bench.model.forget()
        begin = time.perf_counter()
        submitted = submit(served.smtp, served.password, runs, "d")
        finished = served.until_done(runs)
        return ((finished - submitted) / THINKING, (submitted - begin) / runs * 1000, rss_mb(served.pid),
                in_flight(bench.model.asked()))


def in_flight(asked: list[float]) -> int:
    """The most requests to the 1-second model that were waiting for it at the same moment."""
    asked = sorted(asked)
    return max((sum(1 for t in asked[i:] if t < start + THINKING) for i, start in enumerate(asked)),
               default=0)


def intake_busy(bench: Bench, code: Code, clients: int, per_client: int) -> tuple[float, float]:
    """msg/s of ``clients`` SMTP clients while the runner answers every mail, and the seconds from
    the last mail's 250 until every run is done."""
    with bench.serving(code) as served:
        begin = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            # the baseline's own client and mails: the ratio compares the servers alone
            list(pool.map(lambda _: intake.client(served.smtp, per_client, served.password), range(clients)))
        taken = time.perf_counter()
        rate = clients * per_client / (taken - begin)
        return rate, served.until_done(clients * per_client) - taken


# -- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="abcde", help="which parts to run (letters a-e)")
    parser.add_argument("--tasks", type=int, default=40, help="(a) tasks timed one after another")
    parser.add_argument("--idle", type=float, default=10.0, help="(b) seconds of idle CPU measured")
    parser.add_argument("--runs", type=int, default=200, help="(c), (d) runs")
    parser.add_argument("--against", type=Path, help="a second checkout measured side by side")
    parser.add_argument("--rounds", type=int, default=1,
                        help="each part this many times, the checkouts in the other order every other"
                             " round; medians at the end of each part")
    parser.add_argument("--separate", action="store_true",
                        help="this checkout with [runner] separate = true too, side by side")
    args = parser.parse_args()
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"  # the homes' secrets are files
    codes = {"this": Code(REPO), **({"this, separate": Code(REPO, True)} if args.separate else {}),
             **({"against": Code(args.against.resolve())} if args.against else {})}
    model = Model()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run_parts(Bench(root=Path(tmp), model=model), codes, args)
    finally:
        model.close()


def in_turns(codes: dict[str, Code], rounds: int) -> Iterator[tuple[str, Code]]:
    """Each checkout once a round, in the other order every other round: whichever a part measures
    first has an edge of its own (with the same code on both sides, 4-15 % less CPU a task in (c))."""
    names = list(codes)
    for n in range(rounds):
        for name in names if n % 2 == 0 else reversed(names):
            yield name, codes[name]


class Medians:
    """Each checkout's figures of one part, and their medians once every round is in."""

    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.seen: dict[str, list[tuple[float, ...]]] = {}

    def add(self, name: str, *figures: float) -> None:
        self.seen.setdefault(name, []).append(figures)

    def show(self) -> None:
        for name, rounds in self.seen.items():
            if len(rounds) > 1:
                middle = [statistics.median(column) for column in zip(*rounds, strict=True)]
                print(f"  {name}, median of {len(rounds)}: " + self.shown.format(*middle))


def run_parts(bench: Bench, codes: dict[str, Code], args: argparse.Namespace) -> None:
    turns = list(in_turns(codes, args.rounds))
    if "a" in args.parts:
        print("(a) mail -> reply visible to an IDLE client, 0-latency model (goal: p50 < 30 ms)")
        medians = Medians("p50 {0:6.1f} ms, p90 {1:6.1f} ms")
        for name, code in turns:
            marks = latency(bench, code, args.tasks)
            show_latency(name, marks)
            medians.add(name, p(marks["total"], 50), p(marks["total"], 90))
        medians.show()
    if "b" in args.parts:
        print(f"(b) idle CPU of serve over {args.idle:g} s, % of one core (goal: < 0.5 % at any concurrency)")
        medians = Medians("concurrency 256: {0:5.2f} %   concurrency 1: {1:5.2f} %")
        for name, code in turns:
            idle = idle_cpu(bench, code, args.idle)
            print(f"  {name}: concurrency 256: {idle[256]:5.2f} %   concurrency 1: {idle[1]:5.2f} %")
            medians.add(name, idle[256], idle[1])
        medians.show()
    if "c" in args.parts:
        print(f"(c) RSS of serve (and its runner process) after {args.runs} runs (goal: < 120 MB)")
        medians = Medians("{0:6.1f} MB   (PSS {1:6.1f} MB)   CPU {2:5.2f} ms a task")
        for name, code in turns:
            rss, pss, cpu = memory(bench, code, args.runs)
            print(f"  {name}: {rss:6.1f} MB   (PSS {pss:6.1f} MB)   CPU {cpu:5.2f} ms a task")
            medians.add(name, rss, pss, cpu)
        medians.show()
    if "d" in args.parts:
        print(f"(d) {args.runs} runs at once on a {THINKING:g}-s model, concurrency 256, one SMTP client"
              " (goals: wall after the last submission ÷ 1 s < 1.5; < 10 ms per mail)")
        medians = Medians("wall ÷ 1 s {0:5.2f}   {1:6.1f} ms per mail while runs work")
        for name, code in turns:
            ratio, per_mail, rss, most = many(bench, code, args.runs)
            print(f"  {name}: wall ÷ 1 s {ratio:5.2f}   {per_mail:6.1f} ms per mail while runs work"
                  f"   {most} runs at most waited on the model at once   RSS after: {rss:6.1f} MB")
            medians.add(name, ratio, per_mail)
        medians.show()
    if "e" in args.parts:
        print(f"(e) SMTP intake, {intake.CLIENTS} clients x 150 mails, while the runner answers them,"
              " ÷ a bare aiosmtpd no-op handler (goal: >= 0.5x)")
        medians = Medians("{0:5.2f}x   (every run done {1:.1f} s after the last mail)")
        for n, (name, code) in enumerate(turns):
            if n % len(codes) == 0:  # the baseline again each round: rates move with the moment
                baseline, _ = intake.measure("baseline", intake.CLIENTS * 150)
                print(f"  bare aiosmtpd: {baseline:7.1f} msg/s")
            rate, rest = intake_busy(bench, code, intake.CLIENTS, 150)
            print(f"  {name}: {rate:7.1f} msg/s   {rate / baseline:5.2f}x"
                  f"   (every run done {rest:.1f} s after the last mail)")
            medians.add(name, rate / baseline, rest)
        medians.show()


if __name__ == "__main__":
    main()
