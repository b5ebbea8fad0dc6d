"""A run's workspace: ``workspaces/<run>/`` in the home folder, for the files the agent writes.

The folder outlives a crash, so a resumed run still attaches what it wrote before.
"""

from __future__ import annotations

from pathlib import Path

#: the most files one reply carries (the rest stay in the workspace)
MAX_ATTACHMENTS = 20


def workspace_for(root: Path, run_id: int) -> Path:
    return root / str(run_id)


def attachments(workspace: Path) -> list[Path]:
    """The files written in the workspace, by name; a missing workspace has none."""
    if not workspace.is_dir():
        return []
    files = sorted(p for p in workspace.iterdir() if p.is_file() and not p.name.startswith("."))
    return files[:MAX_ATTACHMENTS]
