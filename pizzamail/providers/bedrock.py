"""Amazon Bedrock Converse (``POST {base_url}/model/{modelId}/converse``) over the shared HTTP mechanism.

Auth is a Bedrock API key sent as ``Authorization: Bearer …`` (keyring entry ``bedrock`` or
``$AWS_BEARER_TOKEN_BEDROCK``; no extra dependency), else SigV4 (service ``bedrock``) with AWS
credentials from the standard chain, which needs the optional extra ``pizzamail[bedrock]`` (botocore).

Differences from Anthropic Messages: every content item is a one-key object (``{"text"}``,
``{"toolUse"}``, ``{"toolResult"}``); ``system`` is a list of text blocks; the token limit is
``inferenceConfig.maxTokens``; tools are ``toolConfig.tools[].toolSpec`` with the schema under
``inputSchema.json``; a tool result carries ``status`` ``success`` or ``error``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from pizzamail.errors import ProviderError, ProviderNotConfigured
from pizzamail.providers.blocks import merge_tool_results, tool_call
from pizzamail.providers.http import HttpProvider, complete_fitting, malformed
from pizzamail.providers.types import Message, Picture, Response, ToolCall, ToolSpec, Usage

DEFAULT_REGION = "us-east-1"
DEFAULT_MAX_TOKENS = 4096
KEY_ENV = "AWS_BEARER_TOKEN_BEDROCK"
INSTALL = "pip install 'pizzamail[bedrock]'"
WIRE = "Bedrock Converse"


def region_of(configured: str) -> str:
    """The configured region, else ``$AWS_REGION`` / ``$AWS_DEFAULT_REGION``, else us-east-1."""
    from_env = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return configured or from_env or DEFAULT_REGION


def base_url_for(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def converse_path(model: str) -> str:
    """``model/{modelId}/converse``; the id is escaped (ids have ``:``, ARNs have ``/``)."""
    return f"model/{quote(model, safe='')}/converse"


# -- auth --------------------------------------------------------------------------------------


class SigV4(httpx.Auth):
    """Signs each request with AWS Signature Version 4 through botocore (the ``bedrock`` extra)."""

    requires_request_body = True

    def __init__(self, credentials: Any, region: str, service: str = "bedrock") -> None:
        self.credentials = credentials
        self.region = region
        self.service = service

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        for name, value in sign(self.credentials, self.region, self.service, request).items():
            request.headers[name] = value
        yield request


def sign(credentials: Any, region: str, service: str, request: httpx.Request) -> dict[str, str]:
    """The SigV4 headers (Authorization, X-Amz-Date, maybe X-Amz-Security-Token) for ``request``."""
    from botocore.auth import SigV4Auth  # type: ignore[import-untyped, import-not-found, unused-ignore]
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped, import-not-found, unused-ignore]

    aws = AWSRequest(method=request.method, url=str(request.url), data=request.content,
                     headers={"Content-Type": request.headers.get("content-type", "application/json")})
    SigV4Auth(credentials, service, region).add_auth(aws)
    wanted = ("authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256")
    return {str(k): str(v) for k, v in aws.headers.items() if str(k).lower() in wanted}


def botocore_available() -> bool:
    try:
        import botocore.session  # type: ignore[import-untyped, import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def chain_credentials() -> Any:
    """AWS credentials from the standard chain (env, ~/.aws, SSO, instance role), or None."""
    import botocore.session  # type: ignore[import-untyped, import-not-found, unused-ignore]

    return botocore.session.get_session().get_credentials()


def not_configured(name: str, why: str) -> ProviderNotConfigured:
    return ProviderNotConfigured(
        f"no credentials for the Bedrock provider {name!r}: {why}",
        hint=f"store a Bedrock API key with `pizzamail keys set {name}` or set ${KEY_ENV}; or, to use"
             f" AWS credentials (aws configure, SSO, an instance role), `{INSTALL}`",
    )


def auth_for(name: str, api_key: str, region: str) -> tuple[dict[str, str], httpx.Auth | None]:
    """Bearer headers when there is an API key, else SigV4 from the AWS chain; else ProviderNotConfigured."""
    if api_key:
        return {"Authorization": f"Bearer {api_key}"}, None
    if not botocore_available():
        raise not_configured(name, "no Bedrock API key, and botocore is not installed")
    credentials = chain_credentials()
    if credentials is None:
        raise not_configured(name, "no Bedrock API key, and no AWS credentials were found")
    return {}, SigV4(credentials, region)


# -- the provider ------------------------------------------------------------------------------


@dataclass(kw_only=True)
class BedrockProvider(HttpProvider):
    """One Bedrock Converse endpoint and model. Close it with ``aclose``."""

    headers: dict[str, str] = field(default_factory=dict)
    auth: httpx.Auth | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS

    wire: ClassVar[str] = WIRE

    def request_headers(self) -> dict[str, str]:
        return self.headers

    def request_auth(self) -> httpx.Auth | None:
        return self.auth

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Response:
        async def send(fitting: list[Message]) -> Response:
            body = request_body(fitting, tools, max_tokens=self.max_tokens)
            answer = await self.endpoint().post(converse_path(self.model), body)
            return parse_response(answer, model=self.model)

        return await complete_fitting(self.shown(messages), send)


# -- wire format -------------------------------------------------------------------------------


def request_body(messages: list[Message], tools: list[ToolSpec], *,
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": wire_messages([m for m in messages if m.role != "system"]),
                            "inferenceConfig": {"maxTokens": max_tokens}}
    system = [{"text": m.content} for m in messages if m.role == "system" and m.content]
    if system:
        body["system"] = system
    if tools:
        body["toolConfig"] = {"tools": [wire_tool(t) for t in tools]}
    return body


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages in Converse's shape."""
    return merge_tool_results(messages, wire_message)


def wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        content = [{"text": message.content}, *(image_block(p) for p in message.pictures)]
        result = {"toolUseId": message.tool_call_id, "content": content,
                  "status": "error" if message.is_error else "success"}
        return {"role": "user", "content": [{"toolResult": result}]}
    bare = not (message.content or message.tool_calls or message.pictures)
    text = [{"text": message.content}] if message.content or bare else []
    uses = [wire_tool_use(c) for c in message.tool_calls] if message.role == "assistant" else []
    images = [image_block(p) for p in message.pictures] if message.role == "user" else []
    return {"role": message.role, "content": [*text, *images, *uses]}


def image_block(picture: Picture) -> dict[str, Any]:
    """In raw JSON the bytes are base64 (an AWS SDK would take them raw)."""
    data = base64.b64encode(picture.data).decode("ascii")
    return {"image": {"format": picture.format, "source": {"bytes": data}}}


def wire_tool_use(call: ToolCall) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.arguments}}


def wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"toolSpec": {"name": spec.name, "description": spec.description,
                         "inputSchema": {"json": spec.parameters}}}


def parse_response(data: Any, *, model: str) -> Response:
    """A Converse answer as a :class:`Response`; anything malformed is a ProviderError."""
    try:
        blocks = list(data["output"]["message"]["content"])
        usage = data.get("usage") or {}
        return Response(
            text="".join(str(b["text"]) for b in blocks if "text" in b),
            tool_calls=[parse_tool_use(b["toolUse"]) for b in blocks if "toolUse" in b],
            usage=Usage(input_tokens=int(usage.get("inputTokens") or 0),
                        output_tokens=int(usage.get("outputTokens") or 0)),
            model=model,
            finish_reason=str(data.get("stopReason") or ""),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise _malformed(f"{type(exc).__name__}: {exc}") from None


def parse_tool_use(block: dict[str, Any]) -> ToolCall:
    return tool_call(block["toolUseId"], block["name"], block.get("input"))


def _malformed(why: str) -> ProviderError:
    return malformed(WIRE, why)
