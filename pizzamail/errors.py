"""The one error tree of pizzamail. Every error knows how to render itself.

    PizzamailError            base: a CLI message, an email text, an SMTP reply, an IMAP response,
    │                         an HTTP response (a 500 that says nothing of what failed inside)
    ├── ConfigError           a bad or unreadable config.toml value (names key, value, what is allowed)
    │   ├── ConfigSyntaxError     config.toml that is not TOML (names line and column)
    │   └── ConfigProblems        several wrong values at once, one line each
    ├── SecretMissing         a credential that is not stored anywhere (names the command that sets it)
    ├── SmtpRefusal           an SMTP command refused with a specific code (550, 552, 535 …)
    ├── ImapError             an IMAP command that fails: tagged NO (or BAD when ``bad`` is set)
    ├── HttpRefusal           an HTTP request refused (a webhook delivery): a 4xx status and a JSON reason
    ├── Unavailable           a failure that may pass (database busy, disk full): try again later
    ├── StoreUnreachable      the PostgreSQL store of ``[store] url`` refused or did not answer at start
    ├── HomeInUse             ``serve`` on a home another ``serve`` holds (names its pid)
    ├── HomeUnusable          a home folder that cannot be made, read or written
    ├── BackupError           a backup or restore that cannot be made as asked (not a pizzamail
    │                         backup, a home that is not empty); names what to do instead
    ├── TransferError         ``migrate-store`` that cannot copy as asked (a target holding data, an
    │                         unreachable server); names what to do instead
    ├── PortUnavailable       a ``[server]`` port that cannot be listened on (names the key and port)
    ├── FolderError           a folder that cannot be made or renamed as asked (a name the file
    │                         system cannot hold, or one already taken); carries its IMAP code
    ├── ProviderError         a model provider failed; ``retryable`` says whether trying again may help
    │   └── ProviderNotConfigured   no usable provider: the mail explains how to configure one
    ├── RunError              a run that cannot go on (step limit, broken checkpoint)
    └── ToolError             a tool source that cannot be used (an MCP server that does not start,
                              a skill that does not parse); the run goes on without it

Errors have no side effects: nothing is logged in ``__init__``; the code that catches an error
decides where its rendering goes.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path


class PizzamailError(Exception):
    """Base of every error pizzamail raises on purpose."""

    #: the line printed by the CLI before exiting with status 1 (or 2 for usage errors)
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def cli_message(self) -> str:
        if self.hint:
            return f"error: {self.message}\n  fix: {self.hint}"
        return f"error: {self.message}"

    def mail_text(self) -> str:
        if self.hint:
            return f"{self.message}\n\nHow to fix it: {self.hint}"
        return self.message

    def smtp_reply(self) -> str:
        return f"451 4.3.0 {self.message}"

    def imap_response(self, tag: bytes) -> bytes:
        return tag + b" NO " + _imap_text(self.message) + b"\r\n"

    def http_response(self) -> HttpResponse:
        # the caller of a webhook is not the owner: what went wrong inside is for the log only
        return HttpResponse(500, "internal error (the details are in pizzamail's log)")


@dataclass(frozen=True)
class HttpResponse:
    """An error as an HTTP answer; the web app sends ``body()`` as JSON."""

    status: int
    error: str
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, object]:
        return {"ok": False, "error": self.error}


def _imap_text(text: str) -> bytes:
    # Response text is a single line of 7-bit text (RFC 3501 §9, resp-text).
    flat = " ".join(text.split())
    return flat.encode("ascii", "replace")


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@|(password=)[^&\s]*", re.IGNORECASE)


def _masked(value: object) -> object:
    """A value as an error may show it: a password written into a url is not shown back."""
    if not isinstance(value, str):
        return value
    return _URL_PASSWORD.sub(lambda m: f"{m[1]}***@" if m[1] else f"{m[2]}***", value)


class ConfigError(PizzamailError):
    """A config value is missing, of the wrong type or out of range."""

    def __init__(
        self, key: str, value: object, allowed: str, *, hint: str | None = None
    ) -> None:
        super().__init__(
            f"config key {key!r} has value {_masked(value)!r}; allowed: {allowed}",
            hint=hint or "edit config.toml in your pizzamail home",
        )
        self.key = key
        self.value = value
        self.allowed = allowed


class ConfigSyntaxError(ConfigError):
    """config.toml is not TOML at all: names the file, line and column."""

    def __init__(self, path: str, line: int, column: int, reason: str) -> None:
        PizzamailError.__init__(
            self, f"{path} is not valid TOML: line {line}, column {column}: {reason}",
            hint=f"fix line {line} of {path}")
        self.key, self.value, self.allowed = path, f"line {line}", "valid TOML"
        self.line, self.column = line, column


class ConfigProblems(ConfigError):
    """Several wrong values in config.toml, each on its own line (the first one's key is ``key``)."""

    def __init__(self, problems: list[ConfigError]) -> None:
        first = problems[0]
        PizzamailError.__init__(
            self, "\n".join([f"config.toml has {len(problems)} problems:",
                             *(f"  {p.message}" for p in problems)]), hint=first.hint)
        self.key, self.value, self.allowed = first.key, first.value, first.allowed
        self.problems = problems


class SecretMissing(PizzamailError):
    """A credential is not in the keyring, the fallback file or the environment."""

    def __init__(self, name: str, command: str, *, env: str | None = None) -> None:
        where = "the keyring"
        if env:
            where += f" or ${env}"
        super().__init__(f"no secret {name!r} in {where}", hint=f"run `{command}`")
        self.name = name


class SmtpRefusal(PizzamailError):
    """An SMTP command refused; ``code`` and ``enhanced`` go on the wire as they are."""

    def __init__(self, code: int, enhanced: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.enhanced = enhanced

    def smtp_reply(self) -> str:
        return f"{self.code} {self.enhanced} {self.message}"


class ImapError(PizzamailError):
    """An IMAP command failure: tagged NO, or BAD for a syntax error.

    ``code`` is an optional response code such as ``TRYCREATE`` or ``AUTHENTICATIONFAILED``.
    """

    def __init__(self, message: str, *, bad: bool = False, code: str | None = None) -> None:
        super().__init__(message)
        self.bad = bad
        self.code = code

    def imap_response(self, tag: bytes) -> bytes:
        status = b" BAD " if self.bad else b" NO "
        code = f"[{self.code}] ".encode("ascii") if self.code else b""
        return tag + status + code + _imap_text(self.message) + b"\r\n"


class HttpRefusal(PizzamailError):
    """An HTTP request refused with ``status``; ``message`` goes to the client, ``detail`` only to the owner.

    ``detail`` holds what the client must not see or cannot use (an error inside the owner's prompt
    template, say): it goes to the log and to ``pizzamail triggers``.
    """

    def __init__(self, status: int, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail

    def http_response(self) -> HttpResponse:
        return HttpResponse(self.status, self.message)


class Unavailable(PizzamailError):
    """A failure that may pass (the database held by another program, a full disk): the client is
    told to try again later, its request is not refused. What failed goes to the log, not the wire."""

    def __init__(self, message: str = "pizzamail cannot take this just now; try again later") -> None:
        super().__init__(message)

    def imap_response(self, tag: bytes) -> bytes:
        return ImapError(self.message, code="UNAVAILABLE").imap_response(tag)

    def http_response(self) -> HttpResponse:
        return HttpResponse(503, self.message, {"Retry-After": str(RETRY_AFTER)})



class TransactionLost(Unavailable):
    """A part of a write transaction failed and took the whole transaction with it (SQLite rolls
    back by itself on a full disk, an I/O error, memory short): nothing more may be written in it,
    and none of its parts is committed."""

#: seconds an HTTP client is asked to wait before trying again (the store waits 10 s for a lock)
RETRY_AFTER = 30

_DB_BUSY = frozenset({5, 6})
"""SQLITE_BUSY, SQLITE_LOCKED: another connection holds the database (longer than the store waits)"""
_DB_UNUSABLE = frozenset({3, 8, 11, 14, 26})
"""SQLITE_PERM, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_CANTOPEN, SQLITE_NOTADB: not a database
pizzamail may open and write"""
_DB_FAILED = frozenset({10, 13})
"""SQLITE_IOERR, SQLITE_FULL: the disk failed or is full"""


def _database_code(error: BaseException) -> int | None:
    """The primary result code of a database error (None for any other error), read without
    importing the driver."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def transient(error: BaseException) -> bool:
    """Whether ``error`` is the machine's rather than the request's (a database held by another
    process, a full disk, memory short), so that the same request may succeed later."""
    code = _database_code(error)
    if code is not None:
        return code in _DB_BUSY | _DB_FAILED
    return isinstance(error, (OSError, MemoryError))


def database_refusal(error: Exception, path: Path) -> PizzamailError | None:
    """What a database error while opening ``path`` tells the user (None for any other error): the
    database is held by another program, or is none pizzamail may open and write."""
    code = _database_code(error)
    if code in _DB_BUSY:
        return Unavailable(f"{path} is held by another program; stop it, or try again in a moment")
    if code in _DB_UNUSABLE:
        return HomeUnusable(path, error)
    return None


class HomeInUse(PizzamailError):
    """Another ``serve`` holds the home: two would file the same mail and resume each other's runs."""

    def __init__(self, root: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(f"pizzamail is already serving {root} ({holder}); stop it first, or pass"
                         " another --home")
        self.pid = pid


class HomeUnusable(PizzamailError):
    """The home folder (or a file pizzamail must keep in it) cannot be made, read or written:
    ``error`` is the file system's or the database's (which says "unable to open database file")."""

    def __init__(self, path: Path, error: Exception) -> None:
        if isinstance(error, (FileExistsError, NotADirectoryError)):
            why = "a file is in the way of a folder"
        elif isinstance(error, OSError):
            why = (error.strerror or type(error).__name__).lower()
        else:
            why = str(error)
        super().__init__(f"cannot use {path} for pizzamail's home: {why}; fix that, or pass another"
                         " --home")
        self.path = path


class BackupError(PizzamailError):
    """``backup``, ``restore`` or ``export`` cannot do what was asked; the hint names what to do."""


class TransferError(PizzamailError):
    """``migrate-store`` cannot copy the home's state as asked (a target that holds data already, an
    unreachable server, no SQLite state); the hint names what to do."""


class PortUnavailable(PizzamailError):
    """A ``[server]`` port cannot be listened on: in use, privileged, or the host is not this machine's."""

    def __init__(self, key: str, host: str, port: int, error: OSError) -> None:
        where = f"port {port} for [server] {key}"
        if error.errno == errno.EADDRINUSE:
            message = f"{where} is in use by another program; pick a free one in config.toml"
        elif error.errno == errno.EACCES:
            message = f"{where} needs privileges pizzamail does not have; pick one above 1023 in config.toml"
        else:
            why = os.strerror(error.errno) if error.errno else str(error)  # without the socket's additions
            message = f"cannot listen on {host} {where} ({why}); check [server] host and {key} in config.toml"
        super().__init__(message)
        self.key = key
        self.port = port


class FolderError(PizzamailError):
    """A mailbox folder cannot be made or renamed as asked. ``code`` is the RFC 5530 response
    code an IMAP client acts on: ``LIMIT``, ``CANNOT`` or ``ALREADYEXISTS``."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code

    def imap_response(self, tag: bytes) -> bytes:
        return ImapError(self.message, code=self.code).imap_response(tag)


class ProviderError(PizzamailError):
    """A model provider call failed after its retries (or could not be retried)."""

    def __init__(
        self, message: str, *, retryable: bool = False, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.retryable = retryable


class ProviderNotConfigured(ProviderError):
    """No usable provider: no key, unknown provider name, or no model set."""


class RunError(PizzamailError):
    """A run cannot continue (for example it reached its step limit)."""


class StoreUnreachable(PizzamailError):
    """The PostgreSQL server of ``[store] url`` could not be connected to (down, out of reach, or
    refusing this login) when the store opened."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"cannot connect to the PostgreSQL store {place}: {reason}",
                         hint="check [store] url in config.toml, that PostgreSQL runs and lets this machine"
                              " in, and its password (`pizzamail keys set store`, or $PGPASSWORD)")


class LeaseLost(PizzamailError):
    """This worker no longer holds the run (its lease ran out and another worker took it over, or it
    was requeued): it must not checkpoint or finish it. Raised inside the write, so it rolls back."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} is no longer this worker's: another worker took it over")
        self.run_id = run_id


class ToolError(PizzamailError):
    """A tool source cannot be used: an MCP server failed to start, a skill is invalid.

    The run is not stopped by it: the tools are not offered, and the user hears why.
    """
