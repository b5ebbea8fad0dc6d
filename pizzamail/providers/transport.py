"""httpx's interface over aiohttp's connections, for the providers' requests.

The providers speak httpx: its auth flows (Bedrock's SigV4), timeouts and the tests' transports. But
httpx's own pool (httpcore) looks through every connection twice each time a request comes or goes:
with 50-200 runs asking at once that is 3-4 ms of CPU a request on the event loop, where a whole
request over aiohttp takes about 0.2 ms. :class:`AiohttpTransport` sends the request httpx built through one
aiohttp session and hands back the whole answer (no provider request streams).

Kept here rather than taken from ``httpx-aiohttp``, which lets aiohttp requote the URL: Bedrock's
``model/anthropic.claude…v1%3A0/converse`` would go out with ``:`` and no longer match its signature.
"""

from __future__ import annotations

import io
import ssl

import aiohttp
import httpx
import yarl
from aiohttp.helpers import get_env_proxy_for_url

Proxy = tuple[yarl.URL | None, aiohttp.BasicAuth | None]

#: aiohttp writes a larger body from a file-like object in chunks, turning the loop between them
#: (given bytes, it warns that it might not)
LARGE_BODY = 1 << 20

#: how each of aiohttp's failures is told to httpx's callers; the first class that matches wins
FAILURES: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (TimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectionError, httpx.ReadError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    (aiohttp.ClientError, httpx.TransportError),
)


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One aiohttp session (made at the first request, in the loop that uses it) for every request.
    No cap on connections: the runner's concurrency is the cap. Proxies come from the environment
    (``HTTPS_PROXY``, ``NO_PROXY``), as with httpx's own transport, looked up once for each origin
    (aiohttp's ``trust_env`` looks again, and reads ``~/.netrc``, for every request: 0.4 ms)."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self.ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str | None, int | None], Proxy] = {}

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=self.ssl_context),
                auto_decompress=False)  # httpx decodes, as it asked for the encoding
        return self._session

    def proxy(self, url: yarl.URL) -> Proxy:
        """The proxy the environment names for ``url``'s origin, and its credentials."""
        origin = (url.scheme, url.host, url.port)
        if origin not in self._proxies:
            try:
                self._proxies[origin] = get_env_proxy_for_url(url)
            except LookupError:
                self._proxies[origin] = (None, None)
        return self._proxies[origin]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        timeout = request.extensions.get("timeout", {})
        url = yarl.URL(str(request.url), encoded=True)
        proxy, proxy_auth = self.proxy(url)
        try:
            async with self.session().request(
                request.method, url, proxy=proxy, proxy_auth=proxy_auth,
                headers=request.headers.multi_items(), allow_redirects=False,
                data=(io.BytesIO(content) if len(content) > LARGE_BODY else content) or None,
                timeout=aiohttp.ClientTimeout(total=None, connect=timeout.get("pool"),
                                              sock_connect=timeout.get("connect"),
                                              sock_read=timeout.get("read")),
            ) as answer:
                body = await answer.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise failure(exc) from exc
        return httpx.Response(answer.status, headers=answer.raw_headers, content=body, request=request,
                              extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def failure(exc: BaseException) -> httpx.TransportError:
    """httpx's error for one of aiohttp's, saying what happened."""
    kind = next(theirs for ours, theirs in FAILURES if isinstance(exc, ours))
    return kind(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
