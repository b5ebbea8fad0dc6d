"""An MCP tool's result as a :class:`ToolResult`: text for the model, images also as pictures it may
see, and every image, audio clip and embedded resource as a file attached to the run's reply (with the
MIME type the server gave), so what a tool makes reaches the user byte for byte.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import mimetypes
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from pizzamail.media import human_size
from pizzamail.providers.pictures import is_image, picture
from pizzamail.providers.types import Picture
from pizzamail.transcript import ToolFile, ToolResult

#: the largest file one result attaches (a mail carrying more would be refused by many servers)
MAX_FILE_BYTES = 20_000_000


async def tool_result(result: CallToolResult) -> ToolResult:
    """``result`` converted (images are fitted for the model in a worker thread)."""
    return await asyncio.to_thread(_converted, result)


@dataclass
class _Parts:
    texts: list[str] = field(default_factory=list)
    pictures: list[Picture] = field(default_factory=list)
    files: list[ToolFile] = field(default_factory=list)


def _converted(result: CallToolResult) -> ToolResult:
    parts = _Parts()
    for n, block in enumerate(result.content, 1):
        _take(parts, block, n)
    if not parts.texts and result.structured_content is not None:
        parts.texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts.texts) if parts.texts else "(the tool returned nothing)"
    return ToolResult(text=text, is_error=result.is_error, pictures=tuple(parts.pictures),
                      files=tuple(parts.files))


def _take(parts: _Parts, block: ContentBlock, n: int) -> None:
    if isinstance(block, TextContent):
        parts.texts.append(block.text)
    elif isinstance(block, ImageContent | AudioContent):
        _file(parts, block.data, name=_name(block.type, n, block.mime_type), media_type=block.mime_type)
    elif isinstance(block, EmbeddedResource):
        _resource(parts, block, n)
    elif isinstance(block, ResourceLink):
        parts.texts.append(f"[a link to the resource {block.uri} ({block.name}); it was not fetched]")
    else:
        parts.texts.append(f"[{block.type} content not shown]")


def _resource(parts: _Parts, block: EmbeddedResource, n: int) -> None:
    resource = block.resource
    media_type = resource.mime_type or "application/octet-stream"
    name = _name("resource", n, media_type, uri=str(resource.uri))
    if isinstance(resource, BlobResourceContents):
        _file(parts, resource.blob, name=name, media_type=media_type)
        return
    media_type = resource.mime_type or "text/plain"
    parts.texts.append(f"[resource {name} ({media_type}), also attached to your reply:]\n{resource.text}")
    parts.files.append(ToolFile(name=name, media_type=media_type, data=resource.text.encode("utf-8")))


def _file(parts: _Parts, encoded: str, *, name: str, media_type: str) -> None:
    """A base64 payload as a file for the reply, and as a picture when it is an image."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        parts.texts.append(f"[{name} ({media_type}) could not be decoded: the tool sent broken base64]")
        return
    if len(data) > MAX_FILE_BYTES:
        parts.texts.append(f"[{name} ({media_type}, {human_size(len(data))}) is too large to attach;"
                           f" the limit is {human_size(MAX_FILE_BYTES)}]")
        return
    parts.files.append(ToolFile(name=name, media_type=media_type, data=data))
    parts.texts.append(f"[{name} ({media_type}, {human_size(len(data))}): attached to your reply]")
    if is_image(name, media_type):
        shown = picture(data, name=name, media_type=media_type)
        if isinstance(shown, str):
            parts.texts.append(shown)
        else:
            parts.pictures.append(shown)


def _name(kind: str, n: int, media_type: str, *, uri: str = "") -> str:
    """The resource's own file name when its URI has one, else ``image-2.png`` (by position)."""
    own = unquote(urlparse(uri).path).rstrip("/").rsplit("/", 1)[-1] if uri else ""
    if own:
        return own
    return f"{kind}-{n}{_extension(media_type)}"


def _extension(media_type: str) -> str:
    """``.png`` for image/png; the subtype itself when the table has none (audio/wav: ``.wav``)."""
    bare = media_type.split(";")[0].strip().lower()
    subtype = bare.partition("/")[2].split("+")[0]
    fallback = f".{subtype}" if subtype.isalnum() and len(subtype) <= 5 else ".bin"
    return mimetypes.guess_extension(bare) or fallback
