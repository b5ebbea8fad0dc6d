"""``python -m tests.e2e.crash MODULE:FUNCTION ARGS…`` runs ``pizzamail ARGS…``, except that the process
dies the first time FUNCTION returns: ``os._exit``, like kill -9 no cleanup, no flush, no stop.

Tests use it to crash at one exact moment, with no timing involved, e.g. right after a Maildir file
was renamed into place and before its index row is committed
(``pizzamail.mailbox.maildir:write_atomic``).
"""

from __future__ import annotations

import importlib
import os
import sys
from functools import wraps
from typing import Any

#: the exit status of the crashed process (what a shell shows for kill -9)
CRASHED = 137


def die_after(target: str) -> None:
    """Replace ``MODULE:FUNCTION`` by a wrapper that ends the process once the original returned."""
    module_name, _, name = target.partition(":")
    module = importlib.import_module(module_name)
    original = getattr(module, name)

    @wraps(original)
    def dying(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        os._exit(CRASHED)

    setattr(module, name, dying)


if __name__ == "__main__":
    die_after(sys.argv[1])
    sys.argv = ["pizzamail", *sys.argv[2:]]
    from pizzamail.cli import main

    main()
