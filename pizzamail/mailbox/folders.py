"""The standard folders, and what makes a folder name usable as a Maildir++ directory."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from pizzamail.errors import FolderError
from pizzamail.mailbox import maildir
from pizzamail.store.mailindex import Folder

#: folder name -> SPECIAL-USE attribute (RFC 6154); the order is the order LIST shows them in
STANDARD_FOLDERS: dict[str, str | None] = {
    "INBOX": None,
    "Action": None,
    "Activity": None,
    "Sent": "\\Sent",
    "Drafts": "\\Drafts",
    "Archive": "\\Archive",
    "Trash": "\\Trash",
}


def check_names(root: Path, names: list[str], folders: list[Folder], moving: Collection[int] = ()) -> None:
    """Each new name is free, fits in a directory name, and is not the directory of another
    folder (on a case-insensitive file system ``Foo`` and ``foo`` are one directory). Looks at
    the file system: run it off the event loop."""
    limit = maildir.name_max(root)
    others = [f for f in folders if f.id not in moving]
    for name in names:
        size = len(os.fsencode(maildir.dir_name(name)))
        if size > limit:
            raise FolderError(
                f"that name is too long: as a Maildir directory it takes {size} bytes (a dot takes"
                f" three, a non-ASCII letter two or more) and the file system allows {limit}",
                code="LIMIT")
        if any(f.name == name for f in folders):
            raise FolderError(f"{name} already exists", code="ALREADYEXISTS")
        sharing = _same_directory(root, name, others)
        if sharing is not None:
            raise FolderError(f"{name} would share its directory with the folder {sharing.name}",
                              code="ALREADYEXISTS")


def _same_directory(root: Path, name: str, folders: list[Folder]) -> Folder | None:
    path = maildir.folder_path(root, name)
    if not path.exists():  # the usual case: nothing there yet
        return None
    return next((f for f in folders if (other := maildir.folder_path(root, f.name)).exists()
                 and os.path.samefile(path, other)), None)
