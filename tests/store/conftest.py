"""The store's own suites run on both engines."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
