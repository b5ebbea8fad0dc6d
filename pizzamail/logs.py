"""Logging for ``serve`` and ``worker``: JSON lines in the home's ``logs/`` (``pizzamail.log``;
``worker.log`` for workers), a short readable form on the terminal.

A line logged while a run works carries ``run`` and ``thread`` (:func:`in_run`), so that
``pizzamail logs --run N`` finds every line of one run, its tools' and providers' too.

Nothing here formats secrets: callers never pass them to a logger. As a safety net, every value
:mod:`pizzamail.secrets` loads or stores is registered with :func:`known_secret`, and both handlers
mask those values in each record's message and exception text.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from collections.abc import Awaitable
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

MASK = "[secret]"
# Shorter values are not masked: a two-letter test password would blank out every word holding it.
SHORTEST_MASKED = 6

_known: set[str] = set()
#: (run, thread) of the run the current task works on; tasks it starts inherit it
_run: ContextVar[tuple[int, int] | None] = ContextVar("pizzamail_run", default=None)
LOG_FILE = "pizzamail.log"
#: the log of ``pizzamail worker`` processes that use this home
WORKER_LOG_FILE = "worker.log"


async def in_run(run_id: int, thread_id: int, work: Awaitable[T]) -> T:
    """Await ``work`` with every line it logs marked as run ``run_id`` of thread ``thread_id``."""
    token = _run.set((run_id, thread_id))
    try:
        return await work
    finally:
        _run.reset(token)


def known_secret(value: str) -> None:
    """Mask ``value`` in every log record from now on."""
    if len(value) >= SHORTEST_MASKED:
        _known.add(value)


def masked(text: str) -> str:
    for value in sorted(_known, key=len, reverse=True):  # a secret inside a longer one: the longer first
        text = text.replace(value, MASK)
    return text


class MaskSecrets(logging.Filter):
    """Replaces known secret values in a record before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _known:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format: keep both, masked
            message = f"{record.msg} {record.args}"
        record.msg, record.args = masked(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = masked(record.exc_text)
        return True


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, str | int] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if (run := _run.get()) is not None:
            entry["run"], entry["thread"] = run
        if record.exc_info:
            entry["exception"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(log_dir: Path, *, verbose: bool = False, name: str = LOG_FILE) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    file_handler = logging.handlers.RotatingFileHandler(
        log_dir / name, maxBytes=5_000_000, backupCount=5, encoding="utf-8"
    )
    file_handler.setFormatter(JsonLines())
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    terminal.setLevel(logging.DEBUG if verbose else logging.INFO)
    for handler in (file_handler, terminal):
        handler.addFilter(MaskSecrets())
    root.handlers[:] = [file_handler, terminal]
    # Third-party chatter stays in the file unless asked for.
    for name in ("mail.log", "httpx", "httpcore", "uvicorn", "uvicorn.error", "aiosqlite"):
        logging.getLogger(name).setLevel(logging.WARNING)
