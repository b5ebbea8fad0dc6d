"""HTML as the plain text a task or a tool reads. Pure; no I/O.

nh3 (the HTML sanitiser pizzamail already uses for the mail it writes) does the parsing: it drops
the markup nobody reads (scripts, styles, the head) with its content and every other tag but the
few that break lines or separate cells, which are then turned into line breaks and spaces.
Decisions on approvals are read by :mod:`pizzamail.approvals.markup`, which also looks for hidden
and quoted text; this is the general reading.
"""

from __future__ import annotations

import re
from html import unescape

import nh3

_UNREAD = {"script", "style", "head", "title", "template", "noscript"}
_LINES = {"p", "div", "br", "li", "tr", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
          "hr", "ul", "ol", "table", "dd", "dt", "section", "article", "header", "footer"}
_CELLS = {"td", "th"}
_LINE_TAG = re.compile(r"</?(?:" + "|".join(sorted(_LINES)) + r")\b[^>]*>")
_CELL_TAG = re.compile(r"</?(?:td|th)\b[^>]*>")
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANKS = re.compile(r"\n{3,}")


def html_to_text(markup: str) -> str:
    """``markup`` as text: blocks on lines of their own, spaces collapsed, entities decoded."""
    kept = nh3.clean(markup, tags=_LINES | _CELLS, clean_content_tags=_UNREAD, attributes={})
    text = unescape(_CELL_TAG.sub(" ", _LINE_TAG.sub("\n", kept)))
    lines = (_SPACES.sub(" ", line).strip() for line in text.splitlines())
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()
