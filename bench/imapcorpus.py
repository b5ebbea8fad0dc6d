"""The synthetic but realistic Maildir bench/imap.py serves: 1-30 KB messages, plain, alternative
and with attachments, some 8-bit; most read, some flagged or answered, the newest tenth in new/."""

from __future__ import annotations

import base64
import os
import random
import shutil
import time
from pathlib import Path

START = 1_735_689_600  # 2025-01-01 00:00 UTC

# -- the corpus ---------------------------------------------------------------------------------

_VOCABULARY = ("the agent summary issue report weekly build release approval draft thread reply schedule "
               "repository comment review merge deploy invoice customer numbers quarter progress step "
               "result error retry timeout provider model tool request action pending meeting notes "
               "please attached figures chart budget plan owner status today tomorrow Größe prüfen résumé "
               "naïve café déjà Übersicht")
WORDS = _VOCABULARY.split()
NAMES = ("Alice Martin", "Bob Chen", "Carla Díaz", "Dmitri Ivanov", "Eve Okafor", "Jürgen Müller",
         "Pizzamail Bot", "Noor Haddad", "Sam Lee", "Yuki Tanaka")


def _address(rng: random.Random) -> tuple[str, str]:
    name = rng.choice(NAMES)
    local = name.split()[0].lower().encode("ascii", "ignore").decode() or "user"
    return name, f"{local}@{rng.choice(('example.org', 'pizzamail.localhost', 'corp.example'))}"


def _encoded(name: str) -> str:
    if name.isascii():
        return f'"{name}"'
    return "=?UTF-8?B?" + base64.b64encode(name.encode()).decode() + "?="


def _paragraphs(rng: random.Random, size: int) -> str:
    lines, total = [], 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 13)))
        lines.append(line.capitalize() + ".")
        total += len(line) + 3
        if rng.random() < 0.15:
            lines.append("")
    return "\r\n".join(lines) + "\r\n"


def _size(rng: random.Random) -> int:
    """Mostly a few KB, a long tail to 30 KB."""
    return int(min(30_000, max(1_000, rng.lognormvariate(8.4, 0.7))))


def message(i: int, rng: random.Random, stamp: int) -> bytes:
    name, addr = _address(rng)
    subject = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))).capitalize()
    if rng.random() < 0.3:
        subject = "Re: " + subject
    date = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(stamp))
    head = [
        f"Return-Path: <{addr}>",
        f"Received: from mx.example.org (mx.example.org [192.0.2.{i % 250 + 1}])\r\n"
        f"\tby pizzamail.localhost with ESMTPS id {i:08x}; {date}",
        f"From: {_encoded(name)} <{addr}>",
        "To: Me <me@pizzamail.localhost>",
        f"Subject: {subject if subject.isascii() else _encoded(subject)}",
        f"Date: {date}",
        f"Message-ID: <bench-{i}.{stamp}@{addr.split('@')[1]}>",
    ]
    if rng.random() < 0.3:
        head.append(f"In-Reply-To: <bench-{max(0, i - rng.randint(1, 50))}@example.org>")
    head.append("MIME-Version: 1.0")
    size, kind = _size(rng), rng.random()
    if kind < 0.6:
        head.append("Content-Type: text/plain; charset=utf-8")
        head.append("Content-Transfer-Encoding: 8bit")
        body = _paragraphs(rng, size)
    elif kind < 0.8:
        text = _paragraphs(rng, size // 3)
        html = "<html><body><p>" + text.replace("\r\n\r\n", "</p>\r\n<p>") + "</p></body></html>\r\n"
        head.append(f'Content-Type: multipart/alternative; boundary="alt-{i}"')
        body = (f"--alt-{i}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{text}"
                f"--alt-{i}\r\nContent-Type: text/html; charset=utf-8\r\n\r\n{html}--alt-{i}--\r\n")
    else:
        text = _paragraphs(rng, min(size // 4, 3000))
        blob = rng.randbytes(max(200, (size - len(text)) * 3 // 4))
        encoded = base64.encodebytes(blob).decode().replace("\n", "\r\n")
        kind_name = rng.choice((("application/pdf", "report.pdf"), ("text/csv", "numbers.csv"),
                                ("image/png", "chart.png")))
        head.append(f'Content-Type: multipart/mixed; boundary="mix-{i}"')
        body = (f"This is a multi-part message in MIME format.\r\n\r\n"
                f"--mix-{i}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{text}"
                f'--mix-{i}\r\nContent-Type: {kind_name[0]}; name="{kind_name[1]}"\r\n'
                f'Content-Disposition: attachment; filename="{kind_name[1]}"\r\n'
                f"Content-Transfer-Encoding: base64\r\n\r\n{encoded}--mix-{i}--\r\n")
    return ("\r\n".join(head) + "\r\n\r\n" + body).encode()


def build_maildir(root: Path, count: int) -> None:
    """A Maildir (INBOX only) of ``count`` messages; most are read, some flagged or answered,
    the newest tenth still in new/."""
    rng = random.Random(20_000)
    for sub in ("tmp", "new", "cur"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        stamp = START + i * 600
        data = message(i, rng, stamp)
        base = f"{stamp}.M{i}P4242Q{i}.bench"
        if i >= count * 0.9:
            path = root / "new" / base
        else:
            flags = "S" + rng.choice(("", "", "", "", "F", "R"))
            path = root / "cur" / f"{base}:2,{''.join(sorted(flags))}"
        path.write_bytes(data)
        os.utime(path, (stamp, stamp))


def corpus(count: int, cache: Path | None, tmp: Path) -> Path:
    """The source Maildir: built in ``cache`` once (and reused), else in ``tmp``."""
    where = (cache or tmp) / f"maildir-{count}"
    done = where / ".complete"
    if not done.exists():
        shutil.rmtree(where, ignore_errors=True)
        started = time.perf_counter()
        print(f"building {count} messages in {where} ...", flush=True)
        build_maildir(where, count)
        done.touch()
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
    return where


def copy_maildir(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".complete"), copy_function=shutil.copy2)
