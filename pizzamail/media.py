"""Images made fit for a model: bounded in size and bytes, in a format every vision API takes.

Pure (bytes in, bytes out; no I/O) and CPU-bound: callers on the event loop run :func:`fit_image` in
a worker thread. An image that cannot be decoded is an :class:`Unreadable` with the reason, never an
exception, so a corrupt attachment becomes a line of text for the model instead of a failed run.

The bounds are the strictest of the providers we speak to: Anthropic downscales anything over 1568 px
on its long side, Bedrock takes at most 3.75 MB and 20 images per message.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

#: the longest side an image is sent with (Anthropic scales larger ones down anyway)
MAX_SIDE = 1568
#: bytes of one encoded image (Bedrock: 3.75 MB, Anthropic: 5 MB after base64)
MAX_BYTES = 3_000_000
#: formats sent as they came when they are within bounds; anything else becomes PNG or JPEG
_KEPT = {"PNG": "image/png", "JPEG": "image/jpeg"}
_JPEG_QUALITIES = (85, 70, 50)
_ORIENTATION = 0x0112  # the EXIF tag that says how a camera held the picture


@dataclass(frozen=True, kw_only=True)
class Fitted:
    """An image ready for a model: PNG or JPEG bytes within :data:`MAX_SIDE` and :data:`MAX_BYTES`."""

    media_type: str
    data: bytes
    original: str
    """the image as it came, in words (``photo.heic: image/heic, 3000x4000, 2.1 MB``)"""


@dataclass(frozen=True, kw_only=True)
class Unreadable:
    """Bytes that were meant to be an image but could not be read as one."""

    reason: str


def fit_image(data: bytes, *, name: str, media_type: str) -> Fitted | Unreadable:
    """``data`` as a model-ready image, or why it cannot be one."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            size = image.size
            image.draft("RGB", (MAX_SIDE, MAX_SIDE))  # a big JPEG decodes at a fraction of its size
            image.load()
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return Unreadable(reason=_why(exc))
    except (OSError, ValueError, SyntaxError) as exc:  # truncated or corrupt data
        return Unreadable(reason=f"the image data is damaged ({exc})")
    about = describe(name=name, media_type=media_type, size=len(data), dimensions=size)
    kept = _KEPT.get(image.format or "")
    upright = image.getexif().get(_ORIENTATION, 1) == 1  # models are not trusted to turn it
    if kept and upright and max(size) <= MAX_SIDE and len(data) <= MAX_BYTES:
        return Fitted(media_type=kept, data=data, original=about)
    return _reencoded(_upright(image), about, photo=image.format == "JPEG")


def describe(*, name: str, media_type: str, size: int, dimensions: tuple[int, int] | None = None) -> str:
    """``name: type, WxH, size`` for a person or a model that cannot see it."""
    parts = [media_type]
    if dimensions:
        parts.append(f"{dimensions[0]}x{dimensions[1]}")
    parts.append(human_size(size))
    return f"{name}: {', '.join(parts)}"


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _why(exc: Exception) -> str:
    if isinstance(exc, Image.DecompressionBombError | Image.DecompressionBombWarning):
        return "the image has too many pixels to be opened safely"
    return "the data is not an image format pizzamail can read"


def _upright(image: Image.Image) -> Image.Image:
    """The first frame, turned as the camera's EXIF says, scaled to :data:`MAX_SIDE`."""
    image.seek(0)
    upright = ImageOps.exif_transpose(image)
    upright.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    return upright


def _reencoded(image: Image.Image, about: str, *, photo: bool) -> Fitted | Unreadable:
    """A photo (it came as JPEG) as JPEG; anything else as PNG when that keeps its transparency or a
    drawing's sharp edges within budget, else as JPEG too, smaller until it fits."""
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        image = image.convert("RGBA" if "transparency" in image.info or "A" in image.mode else "RGB")
    if not photo:
        png = _encode(image, "PNG")
        if len(png) <= MAX_BYTES:
            return Fitted(media_type="image/png", data=png, original=about)
    flat = _flattened(image)
    while True:
        for quality in _JPEG_QUALITIES:
            jpeg = _encode(flat, "JPEG", quality=quality)
            if len(jpeg) <= MAX_BYTES:
                return Fitted(media_type="image/jpeg", data=jpeg, original=about)
        if max(flat.size) < 64:
            return Unreadable(reason="the image could not be made small enough to send")
        flat = flat.resize((flat.width // 2, flat.height // 2), Image.Resampling.LANCZOS)


def _flattened(image: Image.Image) -> Image.Image:
    """RGB on white (JPEG has no transparency)."""
    if image.mode in ("RGBA", "LA"):
        background = Image.new("RGB", image.size, "white")
        background.paste(image.convert("RGBA"), mask=image.convert("RGBA").getchannel("A"))
        return background
    return image.convert("RGB")


def _encode(image: Image.Image, fmt: str, **options: int) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()
