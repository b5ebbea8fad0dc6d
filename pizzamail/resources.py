"""Files shipped with pizzamail: inside the wheel, or at the repository root when run from source.

The wheel carries ``templates/`` as ``pizzamail/templates`` (pyproject's force-include); a source
checkout has it beside the package.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def shipped(in_wheel: str, in_repo: str) -> Path:
    installed = _PACKAGE / in_wheel
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / in_repo


def templates_dir() -> Path:
    return shipped("templates", "templates")
