"""An MCP server behind OAuth 2.1, with its own authorization server, for the tests.

``python oauth_notes.py AS_PORT RS_PORT GRANTS_FILE`` serves the authorization server on
http://127.0.0.1:AS_PORT (metadata, dynamic registration, an authorize endpoint that consents at
once, token, revoke) and the MCP server on http://127.0.0.1:RS_PORT/mcp, which takes only tokens the
authorization server issued. Each token grant is appended to GRANTS_FILE (``authorization_code`` or
``refresh_token``), and ``POST /forget`` on the authorization server drops every token it issued (a
revoked login), so a test can see what the client did.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from pathlib import Path

import uvicorn
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

SCOPE = "notes"


class AutoConsent:
    """An authorization server's memory: clients, codes and tokens, all in this process."""

    def __init__(self, grants: Path) -> None:
        self.grants = grants
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [SCOPE], expires_at=time.time() + 300,
            client_id=client.client_id, code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri, resource=params.resource,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str
                                      ) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, code: AuthorizationCode
                                          ) -> OAuthToken:
        del self.codes[code.code]
        return self._issue(code.client_id, code.scopes, code.resource, "authorization_code")

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str
                                 ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        del self.refresh[refresh_token.token]
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource,
                           "refresh_token")

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, grant: str) -> OAuthToken:
        with self.grants.open("a") as f:
            f.write(grant + "\n")
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + 3600, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes,
                                             resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=3600, refresh_token=refresh,
                          scope=" ".join(scopes))


def apps(as_port: int, rs_port: int, grants: Path) -> tuple[Starlette, Starlette]:
    issuer = f"http://127.0.0.1:{as_port}"
    provider = AutoConsent(grants)

    async def forget(_: Request) -> PlainTextResponse:
        provider.access.clear()
        provider.refresh.clear()
        return PlainTextResponse("forgotten")

    registration = ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE])
    routes = create_auth_routes(provider, AnyHttpUrl(issuer), client_registration_options=registration)
    authorization = Starlette(routes=[*routes, Route("/forget", forget, methods=["POST"])])
    notes = MCPServer("notes", token_verifier=ProviderTokenVerifier(provider), auth=AuthSettings(
        issuer_url=AnyHttpUrl(issuer), resource_server_url=AnyHttpUrl(f"http://127.0.0.1:{rs_port}/mcp"),
        required_scopes=[SCOPE], validate_token_resource=True))

    @notes.tool()
    def whoami() -> str:
        """Who the server thinks is calling."""
        token = get_access_token()
        return f"a client logged in with scopes {token.scopes if token else None}"

    return authorization, notes.streamable_http_app()


async def main(as_port: int, rs_port: int, grants: Path) -> None:
    authorization, resource = apps(as_port, rs_port, grants)
    servers = [uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
               for app, port in ((authorization, as_port), (resource, rs_port))]
    await asyncio.gather(*(s.serve() for s in servers))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
