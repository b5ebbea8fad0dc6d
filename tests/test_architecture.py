"""The architecture docs/ARCHITECTURE.md describes, checked: a one-way package order, SQL only in store.

Both read the source with ``ast``, so function-level and ``TYPE_CHECKING`` imports count like any other.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pizzamail

ROOT = Path(pizzamail.__file__).parent

LAYERS: list[set[str]] = [
    {"errors"},
    {"home", "logs", "guard", "resources", "when", "mail", "media", "lanes", "collector"},
    {"account"},
    {"tls"},
    {"config"},
    {"secrets", "onboard"},
    {"store"},
    {"composer"},
    {"auth"},
    {"providers"},
    {"transcript"},
    {"mailbox"},
    {"remote"},
    {"tools"},
    {"approvals"},
    {"activity"},
    {"triggers"},
    {"runner"},
    {"intake"},
    {"imap"},
    {"web"},
    {"skills"},
    {"demo"},
    {"service"},
    {"worker"},
    {"cli"},
    {"__main__"},
]
"""Low to high: a package imports only from packages in earlier layers (or its own)."""

RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}

SQL = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\bCREATE\s+(TABLE|INDEX|VIRTUAL)\b|\bBEGIN\s+(IMMEDIATE|EXCLUSIVE)\b|\bPRAGMA\b",
    re.IGNORECASE,
)


def package_of(path: Path) -> str:
    return path.relative_to(ROOT).with_suffix("").parts[0]


def module_of(path: Path) -> list[str]:
    parts = ["pizzamail", *path.relative_to(ROOT).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported(path: Path, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, top-level pizzamail package) for every import in the file, at any depth."""
    here = module_of(path)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (here if path.name == "__init__.py" else here[:-1]) if node.level else []
            base = base[: len(base) - node.level + 1] if node.level else base
            module = ".".join([*base, node.module] if node.module else base)
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            if parts[0] == "pizzamail" and len(parts) > 1 and parts[1] in RANK:
                yield node.lineno, parts[1]


def sources() -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(ROOT.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_every_package_has_a_layer() -> None:
    packages = {package_of(path) for path in ROOT.rglob("*.py")} - {"__init__"}
    assert packages - set(RANK) == set(), "add the new package to LAYERS and docs/ARCHITECTURE.md"


def test_imports_only_go_down_the_layers() -> None:
    upward = [
        f"{path.relative_to(ROOT.parent)}:{line} imports pizzamail.{target}"
        for path, tree in sources()
        if (source := package_of(path)) != "__init__"
        for line, target in imported(path, tree)
        if target != source and RANK[target] >= RANK[source]
    ]
    assert upward == []


def test_sql_lives_only_in_the_store() -> None:
    found = []
    for path, tree in sources():
        if package_of(path) == "store":
            continue
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if text and SQL.search(text):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert found == []


def test_the_checks_see_a_violation() -> None:
    """The checkers themselves can fail: an upward import and a query are both noticed."""
    path = ROOT / "store" / "example.py"
    tree = ast.parse("def f():\n    from pizzamail.runner import Runner\n")
    assert [target for _, target in imported(path, tree)] == ["runner", "runner"]
    assert SQL.search("SELECT id FROM runs WHERE status = ?")
    assert not SQL.search("SELECT the folder, then FETCH")  # IMAP words are not SQL
