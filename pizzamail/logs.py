"""Logging for ``serve``: JSON lines in the home's ``logs/``, a short readable form on the terminal.

Nothing here formats secrets: callers never pass them to a logger.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from datetime import UTC, datetime
from pathlib import Path


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
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
    root.handlers[:] = [file_handler, terminal]
    # Third-party chatter stays in the file unless asked for.
    for name in ("mail.log", "httpx", "httpcore", "uvicorn", "uvicorn.error", "aiosqlite"):
        logging.getLogger(name).setLevel(logging.WARNING)
