"""The HTTP side every remote provider shares."""

from __future__ import annotations

from pizzamail.providers.http import JsonEndpoint, tls_context


async def test_every_runs_client_verifies_with_the_one_tls_context_of_the_process() -> None:
    # a context of its own per client loads the CA bundle again before each run's first request
    endpoints = [JsonEndpoint(name="openai", base_url="https://api.example.com/v1", model="m")
                 for _ in range(2)]
    try:
        transports = [endpoint._http()._transport for endpoint in endpoints]  # type: ignore[attr-defined]
        sessions = [transport.session() for transport in transports]
        assert [session.connector._ssl for session in sessions] == [tls_context(), tls_context()]
    finally:
        for endpoint in endpoints:
            await endpoint.aclose()
