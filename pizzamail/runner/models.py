"""Where each run's model comes from: a provider made for the run's model, sharing one of the runner's
HTTP clients, so runs reuse their connections instead of opening a client and a connection each.

Runs are spread over :data:`CLIENTS` clients by their id. httpcore's pool looks through all its
connections twice over each time a request comes or goes (O(n²) in connections), so one client
for 200 runs at once spent more CPU choosing a connection than sending the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import httpx

from pizzamail.config import Config
from pizzamail.providers.http import new_client
from pizzamail.providers.registry import select_provider
from pizzamail.providers.types import Provider
from pizzamail.secrets import SecretStore

#: HTTP clients a runner spreads its runs over (each made at its first use)
CLIENTS = 8


@dataclass(kw_only=True)
class Models:
    config: Config
    factory: Callable[[], Provider] | None = None
    """makes every run's provider (tests, embedders); else :func:`select_provider` with ``secrets``"""
    secrets: SecretStore | None = None
    _http: dict[int, httpx.AsyncClient] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.factory is None and self.secrets is None:
            raise TypeError("Runner needs a provider_factory or a SecretStore (secrets=...)")

    def provider(self, model: str, run: int = 0) -> Provider:
        """A provider for ``model`` (``NAME:MODEL``), looked up now: a key set meanwhile is used;
        over the client of ``run``."""
        if self.factory is not None:
            return self.factory()
        assert self.secrets is not None
        config = replace(self.config, agent=replace(self.config.agent, model=model))
        return select_provider(config, self.secrets, http=self._shared(run % CLIENTS))

    async def aclose(self) -> None:
        """Close the shared clients (at the runner's stop, once no run uses them)."""
        clients, self._http = list(self._http.values()), {}
        for client in clients:
            await client.aclose()

    def _shared(self, lane: int) -> httpx.AsyncClient:
        if lane not in self._http:
            self._http[lane] = new_client()
        return self._http[lane]
