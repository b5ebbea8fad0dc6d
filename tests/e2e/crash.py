"""``python -m tests.e2e.crash MODULE:NAME[#N][~TEXT] ARGS…`` runs ``pizzamail ARGS…``, except that the
process dies the N-th time (by default the first) NAME returns: ``os._exit``, like kill -9 no cleanup,
no flush, no stop. With ``~TEXT`` only calls whose arguments' repr holds TEXT count
(``Mailbox.deliver~name='Action'``: deliveries into Action, not the other folders').

NAME is a function of MODULE or a method (``Class.method``); a coroutine function dies once its
coroutine has finished, not when it was merely called. Tests use it to crash at one exact moment,
with no timing involved, e.g. right after a Maildir file was renamed into place and before its index
row is committed (``pizzamail.mailbox.maildir:write_all``).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from functools import wraps
from typing import Any

#: the exit status of the crashed process (what a shell shows for kill -9)
CRASHED = 137


def die_after(target: str) -> None:
    """Replace ``MODULE:NAME[#N]`` by a wrapper that ends the process once the original returned
    for the N-th time."""
    target, _, needle = target.partition("~")
    where, _, nth = target.partition("#")
    module_name, _, qualname = where.partition(":")
    *path, name = qualname.split(".")
    importlib.import_module("pizzamail.service")  # the order serve imports in (no import cycle)
    owner: Any = importlib.import_module(module_name)
    for part in path:
        owner = getattr(owner, part)
    function = getattr(owner, name)
    left = [int(nth or 1)]

    def returned(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if needle and needle not in repr((args, kwargs)):
            return
        left[0] -= 1
        if left[0] == 0:
            os._exit(CRASHED)

    if inspect.iscoroutinefunction(function):
        @wraps(function)
        async def dying_async(*args: Any, **kwargs: Any) -> Any:
            result = await function(*args, **kwargs)
            returned(args, kwargs)
            return result
        dying: Any = dying_async
    else:
        @wraps(function)
        def dying_sync(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            returned(args, kwargs)
            return result
        dying = dying_sync

    setattr(owner, name, dying)


if __name__ == "__main__":
    die_after(sys.argv[1])
    sys.argv = ["pizzamail", *sys.argv[2:]]
    from pizzamail.cli import main

    main()
