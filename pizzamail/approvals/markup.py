"""An HTML reply as the text a reader sees. Pure; no I/O.

Blocks go on their own lines and spaces collapse as a browser lays them out. Never read: quoted mail
(``<blockquote>`` at any depth), markup that is not shown (head, style, script, template, comments)
and a client's signature element. Text a reader may not see — hidden by CSS (``display:none``, a
zero font size, white or transparent colour …, inline or by a rule of a ``<style>`` element), by
the ``hidden`` attribute, inside ``<noscript>``, a closed ``<details>`` or an Outlook-only
conditional comment, or shown with its letters reversed (``<bdo>``, ``bidi-override``) — is read
only when asked for (``hidden=True``), so that a caller can check that it changes nothing. Text a
stylesheet adds (``content: "…"``) is read as if typed. Struck-out text (``<s>``, ``<del>``,
``line-through``) is kept between ``~~``, as Markdown writes it: crossed-out words are a change of
mind, not consent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser

_SKIPPED = frozenset({"blockquote", "head", "style", "script", "title", "template"})
_VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "wbr", "area", "base", "col", "source"})
_BLOCK = frozenset({"p", "div", "br", "li", "tr", "pre", "table", "ul", "ol", "hr", "h1", "h2", "h3",
                    "h4", "h5", "h6", "section", "article", "header", "footer", "dd", "dt"})
#: shown only by a client that runs no scripts (most mail clients; not all), shown only when opened
#: (``<details>``, ``<dialog>`` without ``open``), or shown with its letters reversed (``<bdo>``)
_MAYBE_SHOWN = frozenset({"noscript", "details", "dialog", "bdo"})
_STRUCK = frozenset({"s", "strike", "del"})
#: inline styles that hide text from a reader or reorder its letters (matched with spaces removed,
#: lower case)
_HIDING = re.compile(
    r"display:none|visibility:hidden|visibility:collapse|mso-hide:all|bidi-override"
    r"|(?<![-\w])(?:font-size|max-height|max-width|opacity):0(?:\.0*)?(?:px|pt|em|rem|%)?(?![.\d])"
    r"|(?<![-\w])color:(?:white|#fff(?:fff)?|transparent|rgba?\(255,255,255)(?![\w])")

_STYLE_BLOCK = re.compile(r"<style\b[^>]*>(.*?)(?:</style\s*>|$)", re.IGNORECASE | re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?\*/|<!--|-->", re.DOTALL)
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_CONTENT = re.compile(r"""content\s*:\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Seen:
    text: str
    """the text, blocks on lines"""
    signatures: tuple[str, ...]
    """the text of each signature element set aside"""


def html_text(markup: str, *, hidden: bool = False) -> str:
    """``markup`` as a reader sees it, without quoted parts and signature elements; with text
    hidden from a reader when ``hidden``."""
    return html_seen(markup, hidden=hidden).text


def html_seen(markup: str, *, hidden: bool = False) -> Seen:
    sheet = _sheet(markup)
    reader = _HtmlReader(hidden=hidden, unseen=sheet.unseen)
    reader.handle_data(" ".join(sheet.added))  # words a stylesheet shows are read as typed
    reader.feed(markup)
    reader.close()
    return reader.seen()


class _HtmlReader(HTMLParser):
    """Text as a browser lays it out: blocks on lines, spaces collapsed except in ``<pre>``."""

    def __init__(self, *, hidden: bool, unseen: frozenset[str] = frozenset()) -> None:
        super().__init__(convert_charrefs=True)
        self._hidden = hidden
        self._unseen = unseen
        self._parts: list[str] = []
        self._signature: list[str] = []
        self._signatures: list[str] = []
        self._skipping: list[str] = []  # the tag skipped, repeated once per nested open one
        self._in_signature = False
        self._open: list[tuple[str, bool]] = []  # elements open, and whether each strikes out
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._in_signature:
            self._signature.append(" ")  # "Anna<br>Head of …": the lines stay words apart
        if tag in _VOID:
            if tag in _BLOCK and not self._skipping:
                self._parts.append("\n")
            return
        if self._skipping:
            if tag == self._skipping[0]:
                self._skipping.append(tag)
            return
        if tag in _SKIPPED or self._is_unseen(tag, attrs) or _is_signature(attrs):
            self._in_signature = _is_signature(attrs)
            self._skipping.append(tag)
            return
        self._enter(tag, _strikes(tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag == self._skipping[0]:
                self._skipping.pop()
                self._end_signature()
            return
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        if tag in _BLOCK:
            self._parts.append("\n")
        if any(name == tag for name, _ in self._open):
            self._close(tag)

    def handle_comment(self, data: str) -> None:
        """Outlook shows what an ``<!--[if mso]>…<![endif]-->`` comment holds; other clients do not."""
        if self._hidden and not self._skipping and data.lstrip().lower().startswith("[if"):
            inner = data.partition("]>")[2].rpartition("<![endif]")[0]
            self._parts.append(" " + unescape(re.sub(r"<[^>]*>", " ", inner)) + " ")

    def handle_data(self, data: str) -> None:
        if "*" in self._unseen and not self._hidden:
            return  # a rule hides everything (text outside any element included)
        if self._skipping:
            if self._in_signature:
                self._signature.append(data)
            return
        self._parts.append(data if self._pre else re.sub(r"[ \t\r\n\f]+", " ", data))

    def seen(self) -> Seen:
        self._close(None)
        self._skipping.clear()
        self._end_signature()
        lines = "".join(self._parts).split("\n")
        return Seen(text="\n".join(line.lstrip(" ") for line in lines).strip("\n"),
                    signatures=tuple(self._signatures))

    def _enter(self, tag: str, struck: bool) -> None:
        self._pre += tag == "pre"
        if tag in _BLOCK:
            self._parts.append("\n")
        self._open.append((tag, struck))
        if struck:
            self._parts.append("~~")

    def _close(self, tag: str | None) -> None:
        """Close the open elements up to ``tag`` (an end tag closes those inside it too)."""
        while self._open:
            name, struck = self._open.pop()
            if struck:
                self._parts.append("~~")
            if name == tag:
                return

    def _is_unseen(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        if self._hidden:
            return False
        if tag in _MAYBE_SHOWN and not any(name == "open" for name, _ in attrs):
            return True
        return not self._unseen.isdisjoint(_selectors(tag, attrs)) or any(
            name == "hidden" or (name == "style" and value and _HIDING.search(_squeezed(value)))
            for name, value in attrs)

    def _end_signature(self) -> None:
        if self._in_signature and not self._skipping:
            self._signatures.append(" ".join("".join(self._signature).split()))
            self._signature, self._in_signature = [], False


@dataclass(frozen=True, kw_only=True)
class _Sheet:
    unseen: frozenset[str]
    """the simple selectors (``p``, ``.x``, ``#y``, ``*``) of rules that hide what they match"""
    added: tuple[str, ...]
    """the text rules add (``content: "…"``)"""


def _sheet(markup: str) -> _Sheet:
    """What the reply's stylesheets hide and add. A rule's selector is reduced to its last simple
    parts ("div .x:first-child" hides every ``.x``): hiding too much only ever stops an approval."""
    unseen: set[str] = set()
    added: list[str] = []
    for block in _STYLE_BLOCK.findall(markup):
        for selectors, body in _RULE.findall(_CSS_COMMENT.sub("", block)):
            added += [a or b for a, b in _CONTENT.findall(body)]
            if _HIDING.search(_squeezed(body)):
                unseen.update(_subject(selector) for selector in selectors.split(","))
    return _Sheet(unseen=frozenset(unseen), added=tuple(added))


def _subject(selector: str) -> str:
    last = re.split(r"[\s>+~]+", selector.strip().lower())[-1]
    simple = re.split(r"[\[:]", last, maxsplit=1)[0]
    parts = re.findall(r"[.#]?[^.#]+", simple)
    return parts[-1] if parts else "*"


def _selectors(tag: str, attrs: list[tuple[str, str | None]]) -> set[str]:
    found = {"*", tag}
    for name, value in attrs:
        if name == "class" and value:
            found.update("." + c.lower() for c in value.split())
        elif name == "id" and value:
            found.add("#" + value.lower())
    return found


def _squeezed(style: str) -> str:
    return re.sub(r"\s+", "", style.lower())


def _strikes(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    return tag in _STRUCK or any(name == "style" and value and "line-through" in value.lower()
                                 for name, value in attrs)


def _is_signature(attrs: list[tuple[str, str | None]]) -> bool:
    """A client's signature element: Thunderbird's ``moz-signature``, Gmail's ``gmail_signature``,
    Outlook's ``id="Signature"`` (a whole class or id, so that other names containing the word do
    not hide what the user wrote)."""
    names = [n.lower() for key, value in attrs if key in ("class", "id") and value for n in value.split()]
    return any(n == "signature" or n.endswith(("-signature", "_signature")) for n in names)
