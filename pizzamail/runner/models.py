"""Where each run's model comes from: a provider made for the run's model, sharing the runner's one
HTTP client, so runs reuse their connections instead of opening a client and a connection each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import httpx

from pizzamail.config import Config
from pizzamail.providers.http import new_client, tls_context
from pizzamail.providers.registry import select_provider
from pizzamail.providers.types import Provider
from pizzamail.secrets import SecretStore


@dataclass(kw_only=True)
class Models:
    config: Config
    factory: Callable[[], Provider] | None = None
    """makes every run's provider (tests, embedders); else :func:`select_provider` with ``secrets``"""
    secrets: SecretStore | None = None
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.factory is None and self.secrets is None:
            raise TypeError("Runner needs a provider_factory or a SecretStore (secrets=...)")

    async def prepare(self) -> None:
        """Load the CA bundle in a thread before the first run needs it: on the event loop it took
        40-60 ms, holding up every mail that arrived meanwhile."""
        if self.factory is None:
            await asyncio.to_thread(tls_context)

    def provider(self, model: str) -> Provider:
        """A provider for ``model`` (``NAME:MODEL``), looked up now: a key set meanwhile is used."""
        if self.factory is not None:
            return self.factory()
        assert self.secrets is not None
        config = replace(self.config, agent=replace(self.config.agent, model=model))
        if self._http is None:
            self._http = new_client()
        return select_provider(config, self.secrets, http=self._http)

    async def aclose(self) -> None:
        """Close the shared client (at the runner's stop, once no run uses it)."""
        client, self._http = self._http, None
        if client is not None:
            await client.aclose()
