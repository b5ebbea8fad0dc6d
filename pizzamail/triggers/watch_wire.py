"""Pure readers of IMAPClient's answers for watches: untyped dicts and tuples in, typed values out.

No I/O. IMAPClient already parses the responses, quotes folder names and decodes their modified
UTF-7; what is left is picking the values a watch needs and trusting none of their types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def folder_status(answer: Mapping[bytes, object]) -> tuple[int | None, int | None, int]:
    """(UIDVALIDITY, UIDNEXT, EXISTS) from ``select_folder``; UIDNEXT is optional before IMAP4rev2."""
    return _int(answer.get(b"UIDVALIDITY")), _int(answer.get(b"UIDNEXT")), _int(answer.get(b"EXISTS")) or 0


def fetched_mail(answer: Mapping[int, Mapping[bytes, object]], uid: int) -> bytes | None:
    """The ``BODY[]`` of ``uid`` from ``fetch`` (``BODY[]<0>`` for a partial one); None if the server
    sent none (the mail was expunged)."""
    for key, value in answer.get(uid, {}).items():
        if key.upper().startswith(b"BODY[]") and isinstance(value, bytes):
            return value
    return None


def folder_names(listing: Iterable[tuple[object, object, object]]) -> list[str]:
    """The names from ``list_folders``' (flags, delimiter, name) triples."""
    return [name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
            for _, _, name in listing]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
