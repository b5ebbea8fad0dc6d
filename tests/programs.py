"""The real programs some tests drive (mbsync, neomutt, curl, Dovecot), and what a missing one means.

On a developer's machine a test whose program is missing skips and says why (``-ra`` lists it). CI
sets ``PIZZAMAIL_REQUIRE_CLIENTS=1`` (``.ci/run``): there the same test fails, so a green CI run is
evidence that the real clients ran.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE_CLIENTS = "PIZZAMAIL_REQUIRE_CLIENTS"


def find(*names: str) -> str | None:
    """The path of the first of ``names`` on PATH."""
    return next((path for name in names if (path := shutil.which(name)) is not None), None)


def missing(*names: str, install: str) -> str | None:
    """Why none of ``names`` can run here (with the command that installs one), or None."""
    if find(*names) is not None:
        return None
    return f"{' or '.join(names)} not installed ({install})"


def needs(why_missing: str | None) -> pytest.MarkDecorator:
    """Mark a test (or a module's ``pytestmark``) that drives a real program; see :func:`require`."""
    return pytest.mark.real_client(why_missing)


def require(why_missing: str | None) -> None:
    """Skip for a missing program, or fail where CI requires every real client."""
    if why_missing is None:
        return
    if os.environ.get(REQUIRE_CLIENTS) == "1":
        pytest.fail(f"{why_missing}; {REQUIRE_CLIENTS}=1 requires it", pytrace=False)
    pytest.skip(why_missing)
