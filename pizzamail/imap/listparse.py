"""LIST / LSUB argument parsing (pure), with RFC 5258 LIST-EXTENDED and RFC 5819 LIST-STATUS:

    LIST [(selection options)] reference (pattern | (pattern ...)) [RETURN (return options)]
"""

from __future__ import annotations

from dataclasses import dataclass

from pizzamail.imap.reader import Reader

SELECTIONS = frozenset({"SUBSCRIBED", "REMOTE", "RECURSIVEMATCH", "SPECIAL-USE"})
RETURNS = frozenset({"SUBSCRIBED", "CHILDREN", "SPECIAL-USE", "STATUS"})


@dataclass(frozen=True)
class ListArgs:
    reference: str
    patterns: tuple[str, ...]
    selection: frozenset[str] = frozenset()
    returns: frozenset[str] = frozenset()
    status: tuple[str, ...] = ()  # RETURN (STATUS (items))

    @property
    def subscribed(self) -> bool:
        """Show the \\Subscribed attribute (asked for, or implied by selecting on it)."""
        return "SUBSCRIBED" in self.selection or "SUBSCRIBED" in self.returns


def list_args(r: Reader, *, extended: bool, status_items: tuple[str, ...]) -> ListArgs:
    r.sp()
    selection: frozenset[str] = frozenset()
    if extended and r.take(b"("):
        selection = frozenset(_words(r))
        if not selection <= SELECTIONS:
            raise r.fail("LIST selection options are " + " ".join(sorted(SELECTIONS)))
        if "RECURSIVEMATCH" in selection and selection == {"RECURSIVEMATCH"}:
            raise r.fail("RECURSIVEMATCH needs another selection option")
        r.sp()
    reference = r.list_mailbox()
    r.sp()
    patterns = _patterns(r) if extended else (r.list_mailbox(),)
    returns: set[str] = set()
    status: tuple[str, ...] = ()
    if extended and r.take(b" RETURN ("):
        while not r.take(b")"):
            if returns:
                r.sp()
            word = r.keyword()
            if word == "STATUS":
                r.sp()
                status = _status(r, status_items)
            elif word not in RETURNS:
                raise r.fail(f"unknown LIST return option {word}")
            returns.add(word)
    return ListArgs(reference, patterns, selection, frozenset(returns), status)


def _patterns(r: Reader) -> tuple[str, ...]:
    if not r.take(b"("):
        return (r.list_mailbox(),)
    patterns = [r.list_mailbox()]
    while not r.take(b")"):
        r.sp()
        patterns.append(r.list_mailbox())
    return tuple(patterns)


def _status(r: Reader, allowed: tuple[str, ...]) -> tuple[str, ...]:
    r.expect(b"(")
    items = tuple(_words(r))
    if not items or not set(items) <= set(allowed):
        raise r.fail("STATUS items are " + " ".join(allowed))
    return items


def _words(r: Reader) -> list[str]:
    words: list[str] = []
    while not r.take(b")"):
        if words:
            r.sp()
        words.append(r.keyword())
    return words


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether ``name`` matches a LIST ``pattern``: ``*`` matches anything, ``%`` anything but the
    delimiter ``/`` (RFC 3501 §6.3.8); ``INBOX`` in any case.

    Every place the pattern may have reached is followed at once, so a name is checked in
    ``len(name) * len(pattern)`` steps at most; a regular expression would backtrack exponentially
    on ``*a*a*a…``, holding the whole process."""
    if name == "INBOX":
        pattern = pattern.upper()
    steps = _wildcard_runs(pattern)
    if sum(step not in "*%" for step in steps) > len(name):
        return False  # more letters to match than the name has
    places = _skip_wildcards({0}, steps)
    for char in name:
        places = _skip_wildcards({p for at in places for p in _after(steps, at, char)}, steps)
    return len(steps) in places


def _wildcard_runs(pattern: str) -> list[str]:
    """The pattern's characters, each run of wildcards made one (``*`` if it has any ``*``)."""
    steps: list[str] = []
    for char in pattern:
        if char in "*%" and steps and steps[-1] in "*%":
            steps[-1] = "*" if "*" in (char, steps[-1]) else "%"
        else:
            steps.append(char)
    return steps


def _after(steps: list[str], at: int, char: str) -> tuple[int, ...]:
    """Where matching ``char`` at ``at`` leads: a wildcard takes it and stays, a letter moves on."""
    if at == len(steps):
        return ()
    step = steps[at]
    if step == "*" or (step == "%" and char != "/"):
        return (at,)
    return (at + 1,) if step == char else ()


def _skip_wildcards(places: set[int], steps: list[str]) -> set[int]:
    """A wildcard may match nothing: each place also reaches the end of the wildcard it is on."""
    return places | {at + 1 for at in places if at < len(steps) and steps[at] in "*%"}
