"""Logging for ``serve``: JSON lines in the home's ``logs/``, a short readable form on the terminal.

Nothing here formats secrets: callers never pass them to a logger. As a safety net, every value
:mod:`pizzamail.secrets` loads or stores is registered with :func:`known_secret`, and both handlers
mask those values in each record's message and exception text.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from datetime import UTC, datetime
from pathlib import Path

MASK = "[secret]"
# Shorter values are not masked: a two-letter test password would blank out every word holding it.
SHORTEST_MASKED = 6

_known: set[str] = set()


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
        entry = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(log_dir: Path, *, verbose: bool = False) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    file_handler = logging.handlers.RotatingFileHandler(
        log_dir / "pizzamail.log", maxBytes=5_000_000, backupCount=5, encoding="utf-8"
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
