"""What a tool gave back besides text, kept before its step is checkpointed: the pictures in the blob
store (the checkpoint names them by digest, so a resumed run shows the model the same images) and
the files in the run's workspace (they go out with the reply, as the files the agent writes do).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from pizzamail.store.blobs import BlobStore
from pizzamail.store.runs import Step
from pizzamail.transcript import AgentStep, ToolFile, ToolStep, step_from_row

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


async def keep(step: AgentStep, *, blobs: BlobStore, workspace: Path) -> None:
    if not isinstance(step, ToolStep):
        return
    for picture in step.result.pictures:
        await blobs.save(picture.data)
    if step.result.files:
        await asyncio.to_thread(_write, step.result.files, workspace)


async def load_steps(rows: list[Step], blobs: BlobStore) -> list[AgentStep]:
    """The checkpointed steps with their pictures read back (off the event loop)."""
    return await asyncio.to_thread(lambda: [step_from_row(row, blobs.get) for row in rows])


def _write(files: tuple[ToolFile, ...], workspace: Path) -> None:
    workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
    for file in files:
        target = _free(workspace, safe_name(file.name), file.data)
        tmp = workspace / f".{target.name}.tmp"
        tmp.write_bytes(file.data)
        os.replace(tmp, target)


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
