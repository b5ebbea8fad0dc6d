"""How long the command line takes to start, next to a bare interpreter measured in the same run.

Each command runs as its own process (``python -m pizzamail ...``), ``--runs`` times, the commands
taking turns so that a busy moment of the machine hits all of them alike. The figures are the median
wall time and the median CPU time (user + system), which a busy machine inflates far less. The home
is made by ``pizzamail init`` and holds one thread; the keyring is off (its fallback file), so
nothing touches the user's keyring. Bytecode is cached as after an install (the set-up writes it,
even where ``PYTHONDONTWRITEBYTECODE`` is set). The goal is under 0.3 s for each.

    python bench/cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["--version"], ["--help"], ["threads"], ["approvals"])
BASELINE = ["-c", "pass"]


def cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process (the only child running, so its CPU is the delta)."""
    started, cpu = time.perf_counter(), cpu_of_children()
    subprocess.run([sys.executable, *args], env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, cpu_of_children() - cpu


def medians(runs: int, env: dict[str, str]) -> dict[str, tuple[float, float]]:
    programs = {"python -c pass": BASELINE}
    programs |= {f"pizzamail {' '.join(c)}": ["-m", "pizzamail", *c] for c in COMMANDS}
    taken: dict[str, list[tuple[float, float]]] = {name: [] for name in programs}
    for _ in range(runs):
        for name, args in programs.items():
            taken[name].append(run(args, env))
    return {name: (statistics.median(w for w, _ in times), statistics.median(c for _, c in times))
            for name, times in taken.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PIZZAMAIL_HOME": home,
               "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for setup in (["init"], ["task", "a thread for the listing"], ["approvals"]):
            subprocess.run([sys.executable, "-m", "pizzamail", *setup], env=env, cwd=ROOT, check=True,
                           capture_output=True)
        found = medians(runs, env)
    wall0, cpu0 = found["python -c pass"]
    print(f"median of {runs} runs each; ratios to python -c pass")
    for name, (wall, cpu) in found.items():
        print(f"{name:<22} wall {wall:6.3f} s {wall / wall0:5.1f}x   cpu {cpu:6.3f} s {cpu / cpu0:5.1f}x")


if __name__ == "__main__":
    main()
