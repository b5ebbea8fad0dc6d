"""What of a run's workspace goes out with its reply (the folder, and how it outlives a crash or
moves to another machine: :mod:`pizzamail.store.runfiles`)."""

from __future__ import annotations

from pathlib import Path

#: the most files one reply carries (the rest stay in the workspace)
MAX_ATTACHMENTS = 20


def attachments(workspace: Path) -> list[Path]:
    """The files written in the workspace, by name; a missing workspace has none."""
    if not workspace.is_dir():
        return []
    files = sorted(p for p in workspace.iterdir() if p.is_file() and not p.name.startswith("."))
    return files[:MAX_ATTACHMENTS]
