"""Where each run's model comes from: a provider made for the run's model, sharing the runner's one
HTTP client, so runs reuse its connections instead of opening a client and a connection each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import httpx

from pizzamail.config import Config
from pizzamail.providers.http import new_client
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

    def provider(self, model: str) -> Provider:
        """A provider for ``model`` (``NAME:MODEL``), looked up now: a key set meanwhile is used."""
        if self.factory is not None:
            return self.factory()
        assert self.secrets is not None
        config = replace(self.config, agent=replace(self.config.agent, model=model))
        return select_provider(config, self.secrets, http=self._shared())

    async def aclose(self) -> None:
        """Close the shared client (at the runner's stop, once no run uses it)."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _shared(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = new_client()
        return self._http
