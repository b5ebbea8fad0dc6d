"""Documents as the text a model reads: PDF (pypdf), DOCX (python-docx), XLSX (openpyxl), CSV and
HTML, a part at a time (pages, a sheet's rows, or a character offset) and never more than a limit.

Pure: bytes in, text out. Every reading that stops early says what was left out and which
arguments read the rest, so the model can page through a long file instead of guessing. A file the
libraries cannot read (encrypted, corrupt) is a :class:`Reading` with ``is_error`` set, never an
exception: the model is told and can ask the user for another copy.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

log = logging.getLogger("pizzamail.tools")

_RANGE = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d+)?)?\s*$")
_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
#: by file name, for mail clients that send everything as application/octet-stream
_BY_SUFFIX = {".pdf": "pdf", ".docx": "docx", ".xlsx": "xlsx", ".xlsm": "xlsx", ".csv": "csv",
              ".html": "html", ".htm": "html"}
_BY_TYPE = {"application/pdf": "pdf", _DOCX: "docx", _XLSX: "xlsx", "text/csv": "csv",
            "application/csv": "csv", "text/html": "html", "application/xhtml+xml": "html"}


@dataclass(frozen=True, kw_only=True)
class Part:
    """Which part of a document to read; empty fields mean from the start."""

    pages: str = ""
    sheet: str = ""
    rows: str = ""
    offset: int = 0


@dataclass(frozen=True, kw_only=True)
class Reading:
    text: str
    is_error: bool = False


def document_kind(filename: str, content_type: str, data: bytes) -> str | None:
    """'pdf', 'docx', 'xlsx', 'csv' or 'html' when this module reads the file, else None."""
    kind = _BY_TYPE.get(content_type.lower())
    if kind is None and content_type in ("application/octet-stream", "binary/octet-stream", ""):
        kind = next((k for s, k in _BY_SUFFIX.items() if filename.lower().endswith(s)), None)
    if kind is None and data.startswith(b"%PDF-"):
        kind = "pdf"
    return kind


def read_document(kind: str, name: str, data: bytes, part: Part, *, limit: int) -> Reading:
    """The text of ``part`` of a ``kind`` document, at most ``limit`` characters plus a note."""
    readers: dict[str, Callable[[str, bytes, Part, int], Reading]] = {
        "pdf": _pdf, "docx": _docx, "xlsx": _xlsx, "csv": _csv, "html": _html}
    try:
        return readers[kind](name, data, part, limit)
    except _Bad as exc:
        return Reading(text=f"{name}: {exc}", is_error=True)
    except Exception as exc:
        # hostile or damaged bytes make the parsers raise nearly anything (csv.Error for a huge
        # field, an XML ParseError from a broken sheet …); all mean the same to the model, and none
        # may fail the run, or every later run in the thread that reads this mail again
        log.info("could not read %s as %s: %r", name, kind, exc)
        return Reading(is_error=True, text=(
            f"{name} could not be read: the {kind.upper()} file looks damaged ({type(exc).__name__})."
            " Ask the user for another copy or a different format."))


def text_part(name: str, text: str, part: Part, *, limit: int) -> Reading:
    """Plain text from ``part.offset`` on, cut at ``limit`` with a note naming the next offset."""
    if part.offset < 0 or (part.offset and part.offset >= len(text)):
        return Reading(text=f"offset {part.offset} is past the end: {name} has {len(text)} characters",
                       is_error=True)
    end = part.offset + limit
    shown = text[part.offset:end]
    if end < len(text):
        shown += (f"\n[… cut: characters {part.offset}-{end} of {len(text)} shown; call read_attachment"
                  f" with offset={end} for the rest]")
    return Reading(text=shown)


class _Bad(Exception):
    """A file or a requested part that cannot be read, with the reason the model sees. Private:
    :func:`read_document` turns it into an error :class:`Reading`."""


def span(text: str, what: str, total: int | None = None) -> tuple[int, int | None]:
    """``"2-5"`` as (2, 5), ``"3"`` as (3, 3), ``"4-"`` as (4, None); 1-based and inclusive."""
    if not text.strip():
        return 1, None
    m = _RANGE.match(text)
    if m is None or int(m[1]) < 1 or (m[3] and int(m[3]) < int(m[1])):
        raise _Bad(f'{what}={text!r} is not a range: write "3", "2-5" or "4-" (counting from 1)')
    first = int(m[1])
    last = int(m[3]) if m[3] else (None if m[2] else first)
    if total is not None and first > total:
        raise _Bad(f"there are only {total} {what}")
    return first, last


def _pdf(name: str, data: bytes, part: Part, limit: int) -> Reading:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise _Bad("the PDF is protected with a password; ask the user for an unprotected copy")
    total = len(reader.pages)
    first, last = span(part.pages, "pages", total)
    last = min(last or total, total)
    chunks: list[str] = []
    used, blank = 0, 0
    for number in range(first, last + 1):
        page = (reader.pages[number - 1].extract_text() or "").strip()
        blank += not page
        chunk = f"[page {number} of {total}]\n{page or '(no text on this page)'}\n"
        if chunks and used + len(chunk) > limit:
            chunks.append(f'[… cut: pages {number}-{last} not shown; call read_attachment with'
                          f' pages="{number}-{last}" for them]')
            break
        if len(chunk) > limit:  # one page longer than a whole reading: its end cannot be shown
            chunk = chunk[:limit] + f"\n[… page {number} cut after {limit} of its {len(page)} characters]\n"
        chunks.append(chunk)
        used += len(chunk)
    if blank == last - first + 1:
        return Reading(text=(f"{name}: this PDF has no text layer (scanned?): pages {first}-{last} of"
                             f" {total} hold no text. It is probably an image of paper; ask the user"
                             " for a text version, or read it as an image if you can see images."))
    return Reading(text="\n".join(chunks))


def _docx(name: str, data: bytes, part: Part, limit: int) -> Reading:
    from docx import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = Document(io.BytesIO(data))
    lines: list[str] = []
    # paragraphs and tables in the order they appear in the body
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            lines.append(block.text)
        elif isinstance(block, Table):
            lines += [" | ".join(c.text.strip() for c in row.cells) for row in block.rows]
    return text_part(name, "\n".join(lines).strip(), part, limit=limit)


def _html(name: str, data: bytes, part: Part, limit: int) -> Reading:
    from pizzamail.mail.text import html_to_text

    return text_part(name, html_to_text(data.decode("utf-8", "replace")), part, limit=limit)


def _csv(name: str, data: bytes, part: Part, limit: int) -> Reading:
    records = csv.reader(io.StringIO(data.decode("utf-8-sig", "replace"), newline=""))
    # the whole file unasked reads as itself; a range or a cut gets a line saying which rows these are
    return _rows(name, records, part, limit, heading=f"{name}" if part.rows else "")


def _xlsx(name: str, data: bytes, part: Part, limit: int) -> Reading:
    from openpyxl import load_workbook

    # Cached values come from the program that saved the file; a file no spreadsheet program saved
    # (one written by a script) has none, so its formulas are shown instead of nothing.
    values = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    formulas = load_workbook(io.BytesIO(data), read_only=True, data_only=False)
    try:
        names = values.sheetnames
        sheet = part.sheet.strip() or names[0]
        if sheet not in names:
            raise _Bad(f"there is no sheet {sheet!r}; the sheets are: {', '.join(names)}")
        rows = _merged(values[sheet].iter_rows(values_only=True),
                       formulas[sheet].iter_rows(values_only=True))
        others = f" (other sheets: {', '.join(n for n in names if n != sheet)})" if len(names) > 1 else ""
        return _rows(name, rows, part, limit, heading=f'{name}, sheet "{sheet}"{others}', sheet=sheet)
    finally:
        values.close()
        formulas.close()


def _merged(values: Iterable[tuple[Any, ...]], formulas: Iterable[tuple[Any, ...]]) -> Iterator[list[str]]:
    for shown, written in zip(values, formulas, strict=False):
        yield [_cell(v, f) for v, f in zip(shown, written, strict=False)]


def _cell(value: object, formula: object) -> str:
    shown = value if value is not None else formula
    return "" if shown is None else str(shown)


def _rows(name: str, rows: Iterable[list[str]], part: Part, limit: int, *, heading: str,
          sheet: str = "") -> Reading:
    """Rows as CSV lines; ``heading`` (with the rows shown) goes first unless it is empty."""
    first, last = span(part.rows, "rows")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    number, cut = first - 1, ""
    for number, row in enumerate(islice(rows, first - 1, last), start=first):
        size = out.tell()
        writer.writerow(row)
        if out.tell() > limit and size:
            out.truncate(size)
            again = f'sheet="{sheet}", ' if sheet else ""
            cut = f'[… cut at row {number}; call read_attachment with {again}rows="{number}-" for the rest]'
            number -= 1
            break
    if number < first:
        raise _Bad(f"there is no row {first}" + (f" in sheet {sheet!r}" if sheet else ""))
    text = out.getvalue()[:limit]  # one huge first row is cut rather than never read
    if cut and not heading:
        heading = name
    if heading:
        text = f"[{heading}: rows {first}-{number}]\n{text}"
    return Reading(text=text + cut)
