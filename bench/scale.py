"""Runs per second with 1, 2 and 4 ``pizzamail worker``s on one PostgreSQL store, and the time a
killed worker's run takes to be taken over.

Every worker is its own process with the same ``--concurrency``; the model is the tests' scripted
fake server, answering each request after 1 second, so a run costs one second of waiting and the
runner's own work. For each worker count the runs are queued (as intake commits them) into a fresh
database while the ready workers are paused (SIGSTOP), and timed from their SIGCONT until the last
run is done; ratios are against 1 worker in the same run
(the goal: 4 workers at least 3 times as fast). Then two workers, one killed with SIGKILL while its run
waits on the model: the time until the other holds the run, against ``[store] lease_seconds``.
A throwaway PostgreSQL cluster is made and removed (tests/postgres.py: needs the postgresql package).

    python bench/scale.py [--runs 200] [--concurrency 4] [--workers 1,2,4] [--lease 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from pizzamail.home import Home
from pizzamail.intake.tasks import store_task
from pizzamail.mail.parse import parse_mail
from pizzamail.store import Store
from pizzamail.store.location import blobs_for
from tests.e2e.harness import BOT, serve_env, task_mail, write_config
from tests.e2e.workers import Working
from tests.fakes.openai_server import FakeOpenAI, gated, slow, text
from tests.postgres import Cluster, point_home, running

THINKING = 1.0


def home_for(root: Path, url: str, fake: FakeOpenAI, lease: float) -> Path:
    home = root / f"home-{time.time_ns()}"
    write_config(home, base_url=fake.base_url)
    point_home(Home(root=home), url)
    with (home / "config.toml").open("a") as config:
        config.write(f"lease_seconds = {lease}\n")  # in [store], the last section point_home wrote
    return home


def workers(home: Path, count: int, concurrency: int) -> list[Working]:
    """``count`` workers on ``home``, all ready."""
    env = serve_env(home)
    started = [Working(home=home, env=env).launch("--concurrency", str(concurrency)) for _ in range(count)]
    return [w.ready() for w in started]


def signal_all(processes: list[Working], sig: int) -> None:
    for process in processes:
        assert process.proc is not None
        process.proc.send_signal(sig)


def stop(processes: list[Working]) -> None:
    for process in processes:
        if process.proc is not None:
            process.proc.terminate()
    for process in processes:
        if process.proc is not None:
            process.stop(None)


async def queue_tasks(home: Path, url: str, mails: list[EmailMessage]) -> None:
    """Each task committed as intake commits it: message, thread and queued run."""
    async with Store(url=url) as store:
        blobs = blobs_for(Home(root=home), store)  # in the database, where every worker reads them
        for mail in mails:
            raw = mail.as_bytes()
            await store_task(store, blobs, raw, parse_mail(raw), agent=BOT, domain="pizzamail.localhost")


def count(url: str, where: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM runs WHERE {where}").fetchone()
    return int(row[0]) if row else 0


def until(look: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not look():
        if time.monotonic() > deadline:
            raise TimeoutError("the workers did not get there in time")
        time.sleep(0.05)


def throughput(cluster: Cluster, root: Path, fake: FakeOpenAI, runs: int, count_: int, concurrency: int,
               lease: float) -> float:
    """Runs per second of ``count_`` workers on ``runs`` queued runs."""
    url = cluster.empty_database()  # migrated by the first store to open it
    home = home_for(root, url, fake, lease)
    started = workers(home, count_, concurrency)
    try:
        tasks = [task_mail(f"task {n}", subject=f"Task {n}") for n in range(runs)]
        # the workers are paused while the runs are queued: intake's pace is not measured here
        signal_all(started, signal.SIGSTOP)
        asyncio.run(queue_tasks(home, url, tasks))
        begin = time.perf_counter()
        signal_all(started, signal.SIGCONT)
        until(lambda: count(url, "status = 'done'") == runs, timeout=runs * THINKING * 3 + 60)
        return runs / (time.perf_counter() - begin)
    finally:
        stop(started)


def takeover(cluster: Cluster, root: Path, fake: FakeOpenAI, lease: float) -> float:
    """Seconds from a SIGKILL of the worker holding a run to another worker holding it."""
    url = cluster.empty_database()  # migrated by the first store to open it
    home = home_for(root, url, fake, lease)
    hold = threading.Event()
    fake.script([gated(text("never read: its worker is killed"), hold)], then=slow(text("Done."), THINKING))
    started = workers(home, 2, 1)
    try:
        asyncio.run(queue_tasks(home, url, [task_mail("the run to take over")]))
        until(lambda: len(fake.requests) >= 1, timeout=60)
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT lease_owner FROM runs").fetchone()
        owner = int(str(row[0]).split(":")[1]) if row else 0
        victim = next(w for w in started if w.proc is not None and w.proc.pid == owner)
        killed = time.perf_counter()
        os.kill(owner, signal.SIGKILL)
        elsewhere = f"status <> 'queued' AND COALESCE(lease_owner, '') NOT LIKE '%:{owner}:%'"
        until(lambda: count(url, elsewhere) == 1, timeout=lease * 4 + 30)
        taken = time.perf_counter() - killed
        victim.stop(None)
        return taken
    finally:
        hold.set()
        stop(started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4, help="runs at a time in each worker")
    parser.add_argument("--workers", default="1,2,4", help="worker counts (the first is the baseline)")
    parser.add_argument("--lease", type=float, default=5.0, help="[store] lease_seconds")
    args = parser.parse_args()
    with running() as cluster, tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        fake.script([], then=slow(text("Done."), THINKING))
        rates = {n: throughput(cluster, Path(tmp), fake, args.runs, n, args.concurrency, args.lease)
                 for n in map(int, args.workers.split(","))}
        taken = takeover(cluster, Path(tmp), fake, args.lease)
    baseline = next(iter(rates.values()))
    print(f"{args.runs} runs, a {THINKING:.0f}-second model, {args.concurrency} at a time per worker:")
    for n, rate in rates.items():
        print(f"  {n} worker(s): {rate:7.2f} runs/s   {rate / baseline:5.2f}x the first")
    print(f"takeover of a killed worker's run: {taken:.1f} s with lease_seconds = {args.lease:g}"
          f" ({taken / args.lease:.2f}x the lease)")


if __name__ == "__main__":
    main()
