"""Turning what pydantic and tomllib refuse into a :class:`ConfigError` that names the key, the
value and what is allowed, with "did you mean" for a misspelt key."""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from pizzamail.errors import ConfigError, ConfigProblems, ConfigSyntaxError

S = TypeVar("S")

_TYPES: dict[object, str] = {
    int: "a whole number", str: "a quoted string", float: "a number", bool: "true or false",
    list: "a list of quoted strings", dict: "a table of quoted strings",
}
_AT = re.compile(r"^(?P<reason>.*?) \(at line (?P<line>\d+), column (?P<column>\d+)\)$")


def read_toml(text: str, path: Path | str = "config.toml") -> dict[str, Any]:
    """Parsed TOML; a syntax error names the line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _AT.match(str(exc))
        if found:
            line, column, reason = int(found["line"]), int(found["column"]), found["reason"]
        else:  # "(at end of document)": the position is the end of the text
            line, column = text.count("\n") + 1, len(text.rpartition("\n")[2]) + 1
            reason = str(exc).removesuffix(" (at end of document)")
        raise ConfigSyntaxError(str(path), line, column, reason) from None


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    if cls not in _ADAPTERS:  # building one walks the whole class: once per class
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def validate(cls: type[S], data: object, prefix: str = "") -> S:
    """``data`` (parsed TOML) as a ``cls``; what is wrong raised as a :class:`ConfigError`, or as
    :class:`ConfigProblems` when several keys are."""
    try:
        result: S = _adapter(cls).validate_python(data)
    except ValidationError as exc:
        explained = (explain(problem, cls, data, prefix) for problem in exc.errors())
        problems = list({p.message: p for p in explained}.values())  # once each
        raise problems[0] if len(problems) == 1 else ConfigProblems(problems) from None
    return result


def explain(problem: ErrorDetails, root: type[Any], data: object, prefix: str) -> ConfigError:
    loc = [str(part) for part in problem["loc"]]
    path, section, annotation = _field_path(root, loc)
    key = ".".join([prefix, *path] if prefix else path)
    value = _value_at(data, path, problem["input"])
    if problem["type"] == "unexpected_keyword_argument":
        return ConfigError(key, value, _unknown(path[-1], section, root, key))
    if problem["type"] == "value_error" and len(loc) == len(path):
        return ConfigError(key, value, str(problem["ctx"]["error"]))
    return ConfigError(key, value, _described(annotation, key))


def _field_path(root: type[Any], loc: list[str]) -> tuple[list[str], type[Any], Any]:
    """The config key an error location points into (a field, never an item of a list or table),
    the section class holding it and the field's type."""
    section, path, annotation, at = root, list[str](), root, 0
    while at < len(loc):
        path.append(loc[at])
        field = section.__pydantic_fields__.get(loc[at])
        if field is None:
            return path, section, None
        annotation = field.annotation
        named = _named_of(annotation)
        if is_dataclass(annotation):
            section, at = annotation, at + 1
        elif named is not None and at + 1 < len(loc):
            path.append(loc[at + 1])
            section, annotation, at = named, named, at + 2
        else:
            break
    return path, section, annotation


def _named_of(annotation: Any) -> type[Any] | None:
    """The section class of a ``[KIND.NAME]`` table (``dict[str, Section]``), else None."""
    args = get_args(annotation)
    if get_origin(annotation) is dict and isinstance(args[-1], type) and is_dataclass(args[-1]):
        return args[-1]
    return None


def _value_at(data: object, path: list[str], fallback: object) -> object:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return fallback
        data = data[part]
    return data


def _unknown(name: str, section: type[Any], root: type[Any], key: str) -> str:
    known = list(section.__pydantic_fields__)
    close = difflib.get_close_matches(name, known, n=1)
    guess = f"did you mean {close[0]}? " if close else ""
    if section is root and "." not in key:
        return f"{guess}config.toml has the sections {', '.join(known)}"
    return f"{guess}[{key.rpartition('.')[0]}] takes one of {', '.join(known)}"


def _described(annotation: Any, key: str) -> str:
    if _named_of(annotation) is not None:
        return f"a table of [{key}.NAME] sections"
    return _TYPES.get(get_origin(annotation) or annotation, "a table")
