"""`pizzamail threads` on a home with 10,000 threads, next to `python -c pass` in the same run.

The home is made by ``pizzamail init``; its store is then filled through the store's own API in one
transaction: each thread has the task mail, the agent's reply and a finished run with usage, so the
listing's counts, last error and usage all have rows to read. Each command runs as its own process,
``--runs`` times, taking turns; the figures are medians of wall time. Bytecode is cached as after
an install (as in bench/cli_start.py). The goal is under 0.5 s.

    python bench/threads.py [--threads 10000] [--runs 9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pizzamail.store import Store, Tx
from pizzamail.store.runs import create_run
from pizzamail.store.threads import NewMessage, add_message, create_thread

ROOT = Path(__file__).resolve().parents[1]
BOT = "bot@pizzamail.localhost"


def message(n: int, direction: str) -> NewMessage:
    return NewMessage(message_id=f"{direction}-{n}@bench", in_reply_to=None, refs=[], direction=direction,
                      kind="task" if direction == "in" else "reply", sender=BOT, subject=f"Task {n}",
                      body="Summarise the quarterly numbers.", blob="0" * 64, size=1000)


async def fill(database: Path, threads: int) -> None:
    async def work(db: Tx) -> None:
        for n in range(threads):
            thread = await create_thread(db, subject=f"Task {n}", agent=BOT)
            task = await add_message(db, thread, message(n, "in"))
            run = await create_run(db, thread, task, agent=BOT)
            await db.execute("UPDATE runs SET status = 'done', model_calls = 2, input_tokens = 900,"
                             " output_tokens = 120 WHERE id = ?", (run,))
            await add_message(db, thread, message(n, "out"))

    async with Store(path=database) as store:
        await store.write_at_once(work)


def taken(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process (the only child running, so its CPU is the delta)."""
    started, cpu = time.perf_counter(), _cpu_of_children()
    subprocess.run([sys.executable, *args], env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, _cpu_of_children() - cpu


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PIZZAMAIL_HOME": home,
               "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "pizzamail", "init"], env=env, cwd=ROOT, check=True,
                       capture_output=True)
        started = time.perf_counter()
        asyncio.run(fill(Path(home) / "state.db", args.threads))
        print(f"filled {args.threads} threads in {time.perf_counter() - started:.1f} s")
        programs = {"python -c pass": ["-c", "pass"], "pizzamail --version": ["-m", "pizzamail", "--version"],
                    "pizzamail threads": ["-m", "pizzamail", "threads"],
                    "pizzamail threads --all": ["-m", "pizzamail", "threads", "--all"]}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in programs}
        for _ in range(args.runs):
            for name, program in programs.items():
                times[name].append(taken(program, env))
    print(f"median of {args.runs} runs each (goal: pizzamail threads under 0.5 s); ratios to python -c pass")
    wall0, cpu0 = (statistics.median(t[i] for t in times["python -c pass"]) for i in (0, 1))
    for name, runs in times.items():
        wall, cpu = (statistics.median(t[i] for t in runs) for i in (0, 1))
        print(f"{name:<24} wall {wall:6.3f} s {wall / wall0:5.1f}x   cpu {cpu:6.3f} s {cpu / cpu0:5.1f}x")


if __name__ == "__main__":
    main()
