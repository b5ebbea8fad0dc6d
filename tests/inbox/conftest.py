"""A private Dovecot as the owner's own mail server, with Sent, Drafts and Trash marked by SPECIAL-USE."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.dovecot import Dovecot, private_root


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with private_root() as root:
        server = Dovecot(root=root, special_use=True)
        server.start()
        try:
            yield server
        finally:
            server.stop()
