"""How long the command line takes to start, next to a bare interpreter measured in the same run.

Each command runs as its own process (``python -m pizzamail ...``), ``--runs`` times, the commands
taking turns so that a busy moment of the machine hits all of them alike; the figure is the median
wall time. The home is made by ``pizzamail init`` and holds one thread; the keyring is off (its
fallback file), so nothing touches the user's keyring. The goal is under 0.3 s for each.

    python bench/cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["--version"], ["--help"], ["threads"], ["approvals"])
BASELINE = ["-c", "pass"]


def run(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def medians(runs: int, env: dict[str, str]) -> dict[str, float]:
    programs = {"python -c pass": BASELINE}
    programs |= {f"pizzamail {' '.join(c)}": ["-m", "pizzamail", *c] for c in COMMANDS}
    taken: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(runs):
        for name, args in programs.items():
            taken[name].append(run(args, env))
    return {name: statistics.median(times) for name, times in taken.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PIZZAMAIL_HOME": home,
               "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
        for setup in (["init"], ["task", "a thread for the listing"]):
            subprocess.run([sys.executable, "-m", "pizzamail", *setup], env=env, cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
        found = medians(runs, env)
    baseline = found["python -c pass"]
    print(f"median of {runs} runs each")
    for name, seconds in found.items():
        print(f"{name:<22} {seconds:6.3f} s  {seconds / baseline:5.1f}x python -c pass")


if __name__ == "__main__":
    main()
