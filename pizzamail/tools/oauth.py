"""OAuth 2.1 for remote MCP servers (``auth = "oauth"``), on the MCP SDK's client provider.

``pizzamail mcp login NAME`` runs the authorization code flow with PKCE once: the SDK discovers the
authorization server, registers pizzamail dynamically and sends the user's browser to it; the answer
comes back to a loopback listener of ours. Tokens and the registration are kept in the keyring
(``mcp-oauth:NAME``), never in config or logs. ``serve`` then uses them and the SDK refreshes an
expired token by itself; when no token works any more the server is reported as needing a login,
since a background service cannot open a browser.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import uvicorn
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from pizzamail.errors import ToolError
from pizzamail.logs import known_secret
from pizzamail.secrets import SecretStore

CLIENT_NAME = "pizzamail"
CALLBACK_PATH = "/oauth/callback"


def secret_name(server: str) -> str:
    return f"mcp-oauth:{server}"


def login_needed(server: str, why: str = "it has no login yet") -> ToolError:
    return ToolError(f"the MCP server {server!r} needs an OAuth login: {why}",
                     hint=f"run `pizzamail mcp login {server}`")


@dataclass(kw_only=True)
class KeyringTokens:
    """The SDK's ``TokenStorage`` over one keyring entry: tokens, when they expire, the registration."""

    secrets: SecretStore
    server: str

    def _load(self) -> dict[str, Any]:
        """What is kept; nothing when the entry is missing or not ours (a value typed in by hand
        with `keys set`): the server then needs a login, and says so."""
        raw = self.secrets.get(secret_name(self.server))
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return dict(data) if isinstance(data, dict) else {}

    def _save(self, data: dict[str, Any]) -> None:
        self.secrets.set(secret_name(self.server), json.dumps(data))
        self.secrets.remember_name(secret_name(self.server), True)

    async def get_tokens(self) -> OAuthToken | None:
        data = self._load().get("tokens")
        if not data:
            return None
        tokens = OAuthToken.model_validate(data)
        for value in (tokens.access_token, tokens.refresh_token):
            if value:
                known_secret(value)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self._load()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        # the SDK keeps only the relative expires_in: the absolute time lets a restart refresh first
        data["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in else None
        self._save(data)

    def expires_at(self) -> float | None:
        value = self._load().get("expires_at")
        return float(value) if value is not None else None

    def metadata(self) -> OAuthMetadata | None:
        data = self._load().get("metadata")
        return OAuthMetadata.model_validate(data) if data else None

    def set_metadata(self, metadata: OAuthMetadata) -> None:
        data = self._load()
        data["metadata"] = metadata.model_dump(mode="json", exclude_none=True)
        self._save(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        data = self._load().get("client")
        return OAuthClientInformationFull.model_validate(data) if data else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self._load()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._save(data)

    def forget_registration(self) -> None:
        """A new login registers again (its redirect address has a new port)."""
        if self._load():
            self._save({})


class StoredOAuth(OAuthClientProvider):
    """The SDK's provider, told what a restart forgets: when the stored tokens expire and where the
    authorization server's token endpoint is. So after a restart an expired access token is
    refreshed before the first request, instead of sending the browser flow's way."""

    def __init__(self, url: str, metadata: OAuthClientMetadata, *, tokens: KeyringTokens,
                 redirect: Callable[[str], Awaitable[None]],
                 callback: Callable[[], Awaitable[AuthorizationCodeResult]]) -> None:
        super().__init__(url, metadata, tokens, redirect_handler=redirect, callback_handler=callback)
        self._tokens = tokens

    async def _initialize(self) -> None:
        await super()._initialize()
        self.context.token_expiry_time = self._tokens.expires_at()
        if self.context.oauth_metadata is None:
            self.context.oauth_metadata = self._tokens.metadata()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        if self.context.oauth_metadata is not None:
            self._tokens.set_metadata(self.context.oauth_metadata)


def oauth_provider(
    server: str, url: str, secrets: SecretStore, *, scope: str = "", redirect_uri: str,
    redirect: Callable[[str], Awaitable[None]], callback: Callable[[], Awaitable[AuthorizationCodeResult]],
) -> StoredOAuth:
    metadata = OAuthClientMetadata(client_name=CLIENT_NAME, redirect_uris=[redirect_uri],  # type: ignore[list-item]
                                   scope=scope or None, token_endpoint_auth_method="none")
    return StoredOAuth(url, metadata, tokens=KeyringTokens(secrets=secrets, server=server),
                       redirect=redirect, callback=callback)


def serving_provider(server: str, url: str, secrets: SecretStore, *, scope: str = "") -> StoredOAuth:
    """For ``serve``: stored tokens, refreshed as needed; a flow that needs the user fails."""
    async def no_browser(_: str) -> None:
        raise login_needed(server, "its login has expired or was revoked")

    async def no_callback() -> AuthorizationCodeResult:
        raise login_needed(server)

    return oauth_provider(server, url, secrets, scope=scope, redirect_uri=f"http://127.0.0.1{CALLBACK_PATH}",
                          redirect=no_browser, callback=no_callback)


@dataclass(kw_only=True)
class Callback:
    """The loopback listener the browser is sent back to (Starlette on uvicorn); ``async with``
    binds it to a free port of 127.0.0.1."""

    timeout: float = 300.0
    port: int = 0
    _result: asyncio.Future[AuthorizationCodeResult] = field(init=False)
    _server: uvicorn.Server | None = field(default=None, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def __aenter__(self) -> Callback:
        self._result = asyncio.get_running_loop().create_future()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        app = Starlette(routes=[Route(CALLBACK_PATH, self._answer)])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="pizzamail-oauth-callback")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.gather(self._task, return_exceptions=True)

    async def wait(self) -> AuthorizationCodeResult:
        try:
            return await asyncio.wait_for(asyncio.shield(self._result), self.timeout)
        except TimeoutError:
            raise ToolError(f"no answer from the browser within {self.timeout:g} s",
                            hint="run the login again and finish it in the browser") from None

    async def _answer(self, request: Request) -> PlainTextResponse:
        params = request.query_params
        if self._result.done():
            return PlainTextResponse("pizzamail: the login was already answered; you can close this tab.")
        if "error" in params:
            why = params.get("error_description") or params["error"]
            self._result.set_exception(ToolError(f"the authorization server refused: {why}",
                                                 hint="run the login again"))
            return PlainTextResponse(f"pizzamail: the login failed ({why}). You can close this tab.")
        if "code" not in params:
            return PlainTextResponse("pizzamail: this answer carries no authorization code.", status_code=400)
        self._result.set_result(AuthorizationCodeResult(code=params["code"], state=params.get("state"),
                                                        iss=params.get("iss")))
        return PlainTextResponse("pizzamail: logged in. You can close this tab.")
