"""Agent Skills: folders with a ``SKILL.md`` (YAML front matter, then Markdown instructions).

Found in the home's ``skills/`` and the folders of ``[skills] paths``; a name found twice is taken
from the first folder (the home's own wins) and the other is reported as shadowed. A skill that does
not follow the spec is not offered, and ``doctor`` and ``pizzamail skills list`` say why.
Spec: name 1-64 of ``a-z0-9-`` (no leading, trailing or double ``-``) equal to the folder's name;
description 1-1024 characters; optional ``allowed-tools`` (space-separated), ``license``,
``compatibility`` (at most 500 characters), ``metadata``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pizzamail.errors import ToolError

SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_XML_TAG = re.compile(r"<[A-Za-z/][^>]*>")
_RESERVED = ("anthropic", "claude")


@dataclass(frozen=True, kw_only=True)
class Skill:
    name: str
    description: str
    folder: Path
    allowed_tools: list[str] = field(default_factory=list)

    @property
    def location(self) -> Path:
        return self.folder / SKILL_FILE

    def body(self) -> str:
        """The instructions: ``SKILL.md`` without its front matter."""
        return split_front_matter(self.location.read_text(encoding="utf-8"))[1].strip()

    def resources(self, *, limit: int = 50) -> list[str]:
        """Files in the skill's folder other than SKILL.md, relative to it."""
        files = sorted(p.relative_to(self.folder).as_posix() for p in self.folder.rglob("*")
                       if p.is_file() and p.name != SKILL_FILE and not p.name.startswith("."))
        return files[:limit]


@dataclass(frozen=True, kw_only=True)
class Invalid:
    folder: Path
    reason: str


@dataclass(frozen=True, kw_only=True)
class Catalog:
    skills: list[Skill] = field(default_factory=list)
    invalid: list[Invalid] = field(default_factory=list)

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


def split_front_matter(text: str) -> tuple[str, str]:
    """(front matter, body); raises ToolError when there is no ``---`` block at the top."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ToolError("SKILL.md does not start with a --- front matter block")
    for n, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:n]), "".join(lines[n + 1:])
    raise ToolError("the front matter of SKILL.md has no closing ---")


def parse_front_matter(text: str) -> dict[str, Any]:
    """YAML, leniently: a value with an unquoted ``: `` (common in descriptions) is quoted and
    parsed again, as the spec's client guide suggests."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        try:
            data = yaml.safe_load(_quote_values(text))
        except yaml.YAMLError as exc:
            raise ToolError(f"the front matter is not valid YAML ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise ToolError("the front matter is not a table of keys and values")
    return data


def _quote_values(text: str) -> str:
    out = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "\t", "-")) and ": " in value.strip() and \
                not value.strip().startswith(("'", '"')):
            line = f"{key}: " + '"' + value.strip().replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.append(line)
    return "\n".join(out)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def load_skill(folder: Path) -> Skill:
    """The skill in ``folder``; ToolError says what is wrong with it."""
    try:
        text = (folder / SKILL_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"SKILL.md cannot be read ({exc})") from None
    data = parse_front_matter(split_front_matter(text)[0])
    name, description = data.get("name"), data.get("description")
    _check_name(name, folder.name)
    _check_description(description)
    assert isinstance(name, str) and isinstance(description, str)
    compatibility = data.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > 500):
        raise ToolError("compatibility must be text of at most 500 characters")
    return Skill(name=name, description=description.strip(), folder=folder,
                 allowed_tools=_allowed_tools(data.get("allowed-tools")))


def _check_name(name: object, folder: str) -> None:
    if not isinstance(name, str) or not name:
        raise ToolError("name is missing")
    if len(name) > 64 or not _NAME.match(name):
        raise ToolError(f"name {name!r} must be 1-64 characters of a-z, 0-9 and single hyphens,"
                        " not starting or ending with one")
    if any(word in name for word in _RESERVED):
        raise ToolError(f"name {name!r} uses a reserved word ({', '.join(_RESERVED)})")
    if name != folder:
        raise ToolError(f"name {name!r} differs from its folder's name {folder!r}")


def _check_description(description: object) -> None:
    if not isinstance(description, str) or not description.strip():
        raise ToolError("description is missing (it says what the skill does and when to use it)")
    if len(description) > 1024:
        raise ToolError(f"description has {len(description)} characters; at most 1024 are allowed")
    if _XML_TAG.search(description):
        raise ToolError("description must not contain XML tags")


def _allowed_tools(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ToolError("allowed-tools must be a space-separated list of tool names")


def scan(folders: Iterable[Path]) -> Catalog:
    """Every skill folder under ``folders``, in order; a name seen before is shadowed."""
    catalog = Catalog()
    for root in folders:
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if (p / SKILL_FILE).is_file()):
            _add(catalog, folder)
    return catalog


def _add(catalog: Catalog, folder: Path) -> None:
    try:
        skill = load_skill(folder)
    except ToolError as exc:
        catalog.invalid.append(Invalid(folder=folder, reason=exc.message))
        return
    first = catalog.get(skill.name)
    if first is not None:
        catalog.invalid.append(Invalid(folder=folder, reason=f"shadowed by {first.folder}"))
        return
    catalog.skills.append(skill)


def skill_folders(home_skills: Path, paths: Iterable[str]) -> list[Path]:
    return [home_skills, *(Path(p).expanduser() for p in paths)]
