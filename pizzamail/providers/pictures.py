"""What a model is shown of a conversation's pictures: the images themselves when it has vision,
bounded per request, and a line of text for each one it cannot see.

Every provider passes its messages through :func:`for_model` before rendering them, so each wire
format only ever renders pictures it should send.
"""

from __future__ import annotations

import mimetypes
from dataclasses import replace

from pizzamail.media import Unreadable, fit_image
from pizzamail.providers.types import Message, Picture

#: images in one request (Bedrock takes 20 per message; Anthropic 100 with large contexts)
MAX_PICTURES = 20
#: image bytes in one request: base64 adds a third, and Anthropic takes 32 MB in all
MAX_PICTURE_BYTES = 20_000_000

BLIND = "the model in use cannot see images, so only this description reaches it"
NOT_AGAIN = "not shown again: only the most recent images are sent to the model"


def is_image(name: str, media_type: str) -> bool:
    return image_type(name, media_type) is not None


def image_type(name: str, media_type: str) -> str | None:
    """The image type: the declared one, else (mail clients often send octet-stream) the one its
    name's extension says; None for anything that is not an image."""
    if media_type.startswith("image/"):
        return media_type
    guessed, _ = mimetypes.guess_type(name)
    if media_type == "application/octet-stream" and guessed and guessed.startswith("image/"):
        return guessed
    return None


def picture(data: bytes, *, name: str, media_type: str) -> Picture | str:
    """An image as a :class:`Picture`, or the line of text that says why it cannot be one. CPU-bound:
    run it in a worker thread."""
    media_type = image_type(name, media_type) or media_type
    fitted = fit_image(data, name=name, media_type=media_type)
    if isinstance(fitted, Unreadable):
        return f"[image {name} ({media_type}) could not be read: {fitted.reason}]"
    return Picture(media_type=fitted.media_type, data=fitted.data, about=fitted.original)


def for_model(messages: list[Message], *, vision: bool) -> list[Message]:
    """``messages`` with the pictures this model is shown; the others become lines of text."""
    if not any(m.pictures for m in messages):
        return messages
    if not vision:
        return [_in_words(m, m.pictures, BLIND) if m.pictures else m for m in messages]
    shown = _newest_within_bounds(messages)
    out = []
    for message in messages:
        dropped = tuple(p for p in message.pictures if id(p) not in shown)
        out.append(_in_words(message, dropped, NOT_AGAIN) if dropped else message)
    return out


def _newest_within_bounds(messages: list[Message]) -> set[int]:
    """The ids of the pictures sent: the newest first, until a bound is reached."""
    shown: set[int] = set()
    total = 0
    for message in reversed(messages):
        for picture in reversed(message.pictures):
            if len(shown) >= MAX_PICTURES or total + len(picture.data) > MAX_PICTURE_BYTES:
                return shown
            shown.add(id(picture))
            total += len(picture.data)
    return shown


def _in_words(message: Message, pictures: tuple[Picture, ...], why: str) -> Message:
    lines = [f"[image {p.about}; {why}]" for p in pictures]
    content = "\n".join([message.content, *lines]) if message.content else "\n".join(lines)
    kept = tuple(p for p in message.pictures if all(p is not q for q in pictures))
    return replace(message, content=content, pictures=kept)
