"""FETCH attribute parsing (pure): ``(UID FLAGS BODY.PEEK[HEADER.FIELDS (FROM)]<0.100>)``."""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.imap.reader import Reader

MACROS = {
    "ALL": ("FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE"),
    "FAST": ("FLAGS", "INTERNALDATE", "RFC822.SIZE"),
    "FULL": ("FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODY"),
}
SIMPLE = {"FLAGS", "UID", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODYSTRUCTURE", "BODY",
          "RFC822", "RFC822.HEADER", "RFC822.TEXT", "MODSEQ"}
_TEXTS = ("HEADER.FIELDS.NOT", "HEADER.FIELDS", "HEADER", "TEXT", "MIME")


@dataclass(frozen=True)
class Section:
    """``1.2.HEADER.FIELDS (FROM TO)``: a part path, then an optional text specifier."""

    part: tuple[int, ...] = ()
    text: str | None = None  # HEADER, HEADER.FIELDS, HEADER.FIELDS.NOT, TEXT, MIME
    fields: tuple[bytes, ...] = ()

    def wire(self) -> bytes:
        """The section as echoed in the response (field names as the client spelled them)."""
        pieces = [str(n).encode() for n in self.part]
        if self.text:
            pieces.append(self.text.encode())
        out = b".".join(pieces)
        if self.fields:
            out += b" (" + b" ".join(self.fields) + b")"
        return out


@dataclass(frozen=True)
class FetchAtt:
    """One FETCH item. ``name`` is ``BODY[]`` for every section fetch (see ``section``)."""

    name: str
    section: Section | None = None
    peek: bool = False
    partial: tuple[int, int] | None = None

    @property
    def sets_seen(self) -> bool:
        reads_content = self.name in ("BODY[]", "BINARY[]") and not self.peek
        return reads_content or self.name in ("RFC822", "RFC822.TEXT")


def fetch_atts(r: Reader) -> tuple[FetchAtt, ...]:
    if r.take(b"("):
        atts = [fetch_att(r)]
        while not r.take(b")"):
            r.sp()
            atts.append(fetch_att(r))
        return tuple(atts)
    start = r.pos
    word = r.keyword()
    if word in MACROS:
        return tuple(FetchAtt(n) for n in MACROS[word])
    r.pos = start
    return (fetch_att(r),)


def fetch_att(r: Reader) -> FetchAtt:
    word = _att_word(r)
    if word in ("BODY", "BODY.PEEK") and r.take(b"["):
        section = _section(r)
        return FetchAtt("BODY[]", section, word == "BODY.PEEK", _partial(r))
    if word in ("BINARY", "BINARY.PEEK", "BINARY.SIZE") and r.take(b"["):
        part = _binary_section(r)
        if word == "BINARY.SIZE":
            return FetchAtt("BINARY.SIZE[]", part)
        return FetchAtt("BINARY[]", part, word == "BINARY.PEEK", _partial(r))
    if word not in SIMPLE:
        raise r.fail(f"unknown FETCH item {word}")
    return FetchAtt(word)


def _att_word(r: Reader) -> str:
    """An item name; ``[`` ends it (it is an atom char, but starts a section here)."""
    start = r.pos
    while r.pos < len(r.data) and r.data[r.pos] not in b" ()[]<":
        r.pos += 1
    if r.pos == start:
        raise r.fail("expected a FETCH item")
    return r.data[start:r.pos].decode("ascii", "replace").upper()


def _section(r: Reader) -> Section:
    part: list[int] = []
    while r.peek().isdigit():
        part.append(r.nz_number())
        if not r.take(b"."):
            r.expect(b"]")
            return Section(tuple(part))
    if r.take(b"]"):
        if part:
            raise r.fail("section part ends in a dot")
        return Section()
    text = next((t for t in _TEXTS if r.take(t.encode())), None)
    if text is None or (text == "MIME" and not part):
        raise r.fail("bad section text")
    fields: tuple[bytes, ...] = ()
    if text.startswith("HEADER.FIELDS"):
        r.sp()
        fields = _header_list(r)
    r.expect(b"]")
    return Section(tuple(part), text, fields)


def _binary_section(r: Reader) -> Section:
    """RFC 3516 section-binary: part numbers only, ``[1.2]`` or ``[]``."""
    part: list[int] = []
    while not r.take(b"]"):
        if part:
            r.expect(b".")
        part.append(r.nz_number())
    return Section(tuple(part))


def _header_list(r: Reader) -> tuple[bytes, ...]:
    r.expect(b"(")
    names = [r.astring()]
    while not r.take(b")"):
        r.sp()
        names.append(r.astring())
    return tuple(names)


def _partial(r: Reader) -> tuple[int, int] | None:
    if not r.take(b"<"):
        return None
    start = r.number()
    r.expect(b".")
    length = r.nz_number()
    r.expect(b">")
    return start, length
