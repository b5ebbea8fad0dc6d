"""What a tool gave back besides text, kept in the run's workspace as soon as the call returns (the
loop's calls and approved calls alike, before their step is checkpointed): the files by name (they
go out with the reply, as the files the agent writes do) and the pictures under ``.pictures/`` by
digest (the checkpoint names them so, and a resumed run shows the model the same images). The
workspace outlives a crash, and hidden files are never attached.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from pizzamail.store.blobs import digest_of
from pizzamail.store.runfiles import PICTURES, write_file
from pizzamail.store.runs import Step
from pizzamail.transcript import AgentStep, ToolResult, step_from_row

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


async def keep(result: ToolResult, workspace: Path) -> None:
    if result.files or result.pictures:
        await asyncio.to_thread(_write, result, workspace)


async def load_steps(rows: list[Step], workspace: Path) -> list[AgentStep]:
    """The checkpointed steps with their pictures read back (off the event loop)."""
    def picture(digest: str) -> bytes | None:
        try:
            return (workspace / PICTURES / digest).read_bytes()
        except FileNotFoundError:  # the workspace was cleaned up meanwhile
            return None

    return await asyncio.to_thread(lambda: [step_from_row(row, picture) for row in rows])


def _write(result: ToolResult, workspace: Path) -> None:
    for picture in result.pictures:
        write_file(workspace / PICTURES / digest_of(picture.data), picture.data)
    for file in result.files:
        workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_file(_free(workspace, safe_name(file.name), file.data), file.data)


def safe_name(name: str) -> str:
    """A plain file name: no folders, no leading dot, nothing a mail client would stumble on."""
    cleaned = _UNSAFE.sub("-", name.rsplit("/", 1)[-1]).lstrip(".-")[-100:]
    return cleaned or "file"


def _free(workspace: Path, name: str, data: bytes) -> Path:
    """``name`` in the workspace, numbered when another file already has it (the same bytes again,
    from a call repeated after a crash, keep the name)."""
    stem, dot, suffix = name.partition(".")
    candidate, n = workspace / name, 1
    while candidate.exists() and candidate.read_bytes() != data:
        n += 1
        candidate = workspace / f"{stem}-{n}{dot}{suffix}"
    return candidate
