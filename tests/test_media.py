"""Images made fit for a model: turned upright, bounded, in PNG or JPEG; unreadable ones explained."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from pizzamail.media import MAX_SIDE, Fitted, Unreadable, fit_image


def encoded(image: Image.Image, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def fitted(data: bytes, name: str = "x", media_type: str = "image/png") -> tuple[Fitted, Image.Image]:
    result = fit_image(data, name=name, media_type=media_type)
    assert isinstance(result, Fitted)
    return result, Image.open(io.BytesIO(result.data))


def test_a_photo_the_camera_held_sideways_is_turned_upright() -> None:
    image = Image.new("RGB", (40, 20), "red")
    exif = image.getexif()
    exif[0x0112] = 6  # rotated 90° clockwise
    result, sent = fitted(encoded(image, "JPEG", exif=exif), "photo.jpg", "image/jpeg")
    assert sent.size == (20, 40) and result.media_type == "image/jpeg"
    assert result.original == "photo.jpg: image/jpeg, 40x20, " + result.original.rsplit(", ", 1)[1]


def test_a_big_photo_stays_a_jpeg_within_the_longest_side() -> None:
    result, sent = fitted(encoded(Image.new("RGB", (4000, 3000), "blue"), "JPEG"), "big.jpg", "image/jpeg")
    assert result.media_type == "image/jpeg" and sent.size == (MAX_SIDE, 1176)


def test_a_transparent_gif_becomes_a_png_that_keeps_its_alpha() -> None:
    image = Image.new("RGBA", (30, 30), (255, 0, 0, 0))
    result, sent = fitted(encoded(image, "GIF"), "logo.gif", "image/gif")
    assert result.media_type == "image/png" and sent.mode in ("RGBA", "LA")


def test_an_image_within_bounds_is_sent_as_it_came() -> None:
    data = encoded(Image.new("RGB", (64, 64), "green"), "PNG")
    result, _ = fitted(data)
    assert result.data == data


@pytest.mark.parametrize(("data", "reason"), [
    (b"plain text, not an image", "the data is not an image format pizzamail can read"),
    (encoded(Image.new("RGB", (64, 64), "green"), "PNG")[:80], "the image data is damaged"),
])
def test_what_cannot_be_read_says_why(data: bytes, reason: str) -> None:
    result = fit_image(data, name="x", media_type="image/png")
    assert isinstance(result, Unreadable) and result.reason.startswith(reason)


def test_an_image_with_too_many_pixels_is_not_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    for size in ((15, 10), (40, 30)):  # over the limit (a warning), over twice the limit (an error)
        result = fit_image(encoded(Image.new("RGB", size), "PNG"), name="bomb.png", media_type="image/png")
        assert result == Unreadable(reason="the image has too many pixels to be opened safely")
