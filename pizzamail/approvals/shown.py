"""What a request shows about a held call: which arguments, and the tool's own words for them.

Used by the request mail and by ``pizzamail approvals``; it needs no runner, so the command line can
import it without starting one.
"""

from __future__ import annotations

from typing import Any

from pizzamail.store.actions import HeldAction
from pizzamail.tools import Explained, Offered


def shown_arguments(action: HeldAction, why: str) -> dict[str, Any]:
    """The call a request is about: the one that was running when pizzamail was interrupted
    (``unknown``; the user's edits, if they made any), else the one the agent asked for."""
    return action.release_arguments if why == "unknown" else action.parsed_arguments


def explain(offered: Offered | None, arguments: dict[str, Any]) -> str:
    """The call in the tool's own words ('' when the tool does not describe its calls)."""
    if offered is None or not isinstance(offered.tool, Explained):
        return ""
    return (offered.tool.describe(arguments) or "").strip()
