"""``pizzamail worker`` as a real subprocess beside a served front, on a PostgreSQL store."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
from dataclasses import dataclass

from tests.e2e.harness import Served

STARTED = re.compile(r"run (\d+) started")
FINISHED = re.compile(r"run (\d+) (done|failed|waiting|stopped) \(")


@dataclass(kw_only=True)
class Working(Served):
    """A ``pizzamail worker`` process: started, waited for and stopped as :class:`Served` is
    (it opens no port)."""

    def start(self, *args: str, timeout: float = 120, crash_after: str | None = None) -> Working:
        return self.launch(*args).ready(timeout)

    def launch(self, *args: str) -> Working:
        """Start ``pizzamail worker ARGS`` without waiting for it (start several at once)."""
        self.output, self._lines = [], queue.Queue()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pizzamail", "worker", *args], env=self.env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._pump, args=(self.proc, self._lines), daemon=True).start()
        return self

    def ready(self, timeout: float = 120) -> Working:
        self.wait_for("pizzamail worker is ready", timeout)
        return self

    def drain(self) -> list[str]:
        """Every line printed so far (without waiting for more)."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return self.output
            if line is None:
                self._lines.put(None)  # the end stays visible to wait_for and stop
                return self.output
            self.output.append(line)

    def runs(self, pattern: re.Pattern[str]) -> set[int]:
        """The runs of every line so far that matches ``pattern`` (:data:`STARTED`, :data:`FINISHED`)."""
        return {int(m.group(1)) for line in self.drain() if (m := pattern.search(line))}
