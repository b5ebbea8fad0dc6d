"""``${VAR}`` and ``${secret:NAME}`` in MCP server settings, resolved when the server starts.

Secrets stay out of config.toml: a header says ``"Bearer ${secret:github}"`` and the value comes from
the keyring (``pizzamail keys set github``) at start time, never written anywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pizzamail.errors import ToolError
from pizzamail.secrets import SecretStore

_REF = re.compile(r"\$\{(secret:)?([A-Za-z_][A-Za-z0-9_.-]*)\}")


def expand(value: str, *, key: str, secrets: SecretStore | None,
           environ: Mapping[str, str] | None = None) -> str:
    """``value`` with its references filled in; ``key`` names the setting in errors."""
    env = os.environ if environ is None else environ

    def fill(match: re.Match[str]) -> str:
        secret, name = match.group(1), match.group(2)
        if secret:
            if secrets is None:
                raise ToolError(f"{key} refers to the secret {name!r}, but no secret store is open")
            return secrets.lookup(name)
        if name not in env:
            secret_name = name.lower()
            raise ToolError(f"{key} refers to ${{{name}}}, which is not set",
                            hint=f"export {name} before `pizzamail serve`, or keep the value in the"
                                 f" keyring (`pizzamail keys set {secret_name}`) and write"
                                 f" ${{secret:{secret_name}}}")
        return env[name]

    return _REF.sub(fill, value)


def expand_all(table: Mapping[str, str], *, key: str, secrets: SecretStore | None) -> dict[str, str]:
    return {name: expand(value, key=f"{key}.{name}", secrets=secrets) for name, value in table.items()}
