"""``serve --demo-data``: copy the sample Maildir shipped with pizzamail into the user's folders.

Each sample keeps its file name as its Maildir name, so seeding again adds nothing twice.
"""

from __future__ import annotations

import asyncio
import email.utils
from email.parser import BytesHeaderParser
from pathlib import Path

from pizzamail.mailbox import maildir
from pizzamail.mailbox.box import Mailbox
from pizzamail.resources import demo_maildir


async def seed_demo_data(mailbox: Mailbox, source: Path | None = None) -> int:
    """Copy every sample message into the matching folder; returns how many were new."""
    source = source or demo_maildir()
    added = 0
    for folder_dir in [source, *sorted(p for p in source.glob(".*") if p.is_dir())]:
        name = "INBOX" if folder_dir == source else maildir.folder_name(folder_dir.name)
        folder = await mailbox.folder(name) or await mailbox.create_folder(name)
        before = len(await mailbox.messages(folder))
        for base, (subdir, filename) in sorted((await asyncio.to_thread(maildir.scan, folder_dir)).items()):
            data, sent = await asyncio.to_thread(_sample, folder_dir / subdir / filename)
            await mailbox.deliver(folder, data, flags=maildir.split_name(filename)[1], base=base,
                                  internaldate=sent)
        added += len(await mailbox.messages(folder)) - before
    return added


def _sample(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), _sent_at(path)


def _sent_at(path: Path) -> int:
    """The sample's Date header (file times change when pizzamail is installed)."""
    with path.open("rb") as f:
        date = BytesHeaderParser().parse(f).get("Date")
    try:
        return int(email.utils.parsedate_to_datetime(str(date)).timestamp())
    except (TypeError, ValueError):
        return int(path.stat().st_mtime)
