"""Markdown from the model to sanitised HTML, and where the mail templates live."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import nh3
from markdown_it import MarkdownIt

# Raw HTML in the model's Markdown is escaped ("html": False) and the result is cleaned again by
# nh3: model output is untrusted text (it may quote web pages or tool output).
_md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def markdown_html(text: str) -> str:
    """Safe HTML for ``text`` (Markdown): scripts, styles, event handlers and raw HTML are gone."""
    return nh3.clean(_md.render(text))


def templates_dir() -> Traversable:
    """The installed ``pizzamail/templates`` (the wheel force-includes the repo's ``templates/``),
    else the repo-root ``templates/`` when running from a source checkout."""
    packaged = resources.files("pizzamail") / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "templates"
