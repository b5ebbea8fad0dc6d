"""The one error tree of pizzamail. Every error knows how to render itself.

    PizzamailError            base: a CLI message, an email text, an SMTP reply, an IMAP response
    ├── ConfigError           a bad or unreadable config.toml value (names key, value, what is allowed)
    │   └── ConfigSyntaxError     config.toml that is not TOML (names line and column)
    ├── SecretMissing         a credential that is not stored anywhere (names the command that sets it)
    ├── SmtpRefusal           an SMTP command refused with a specific code (550, 552, 535 …)
    ├── ImapError             an IMAP command that fails: tagged NO (or BAD when ``bad`` is set)
    ├── HttpRefusal           an HTTP request refused (a webhook delivery): a 4xx status and a JSON reason
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


def _imap_text(text: str) -> bytes:
    # Response text is a single line of 7-bit text (RFC 3501 §9, resp-text).
    flat = " ".join(text.split())
    return flat.encode("ascii", "replace")


class ConfigError(PizzamailError):
    """A config value is missing, of the wrong type or out of range."""

    def __init__(
        self, key: str, value: object, allowed: str, *, hint: str | None = None
    ) -> None:
        super().__init__(
            f"config key {key!r} has value {value!r}; allowed: {allowed}",
            hint=hint or "edit config.toml in your pizzamail home (see `pizzamail doctor`)",
        )
        self.key = key
        self.value = value
        self.allowed = allowed


class ConfigSyntaxError(ConfigError):
    """config.toml is not TOML at all: names the file, line and column."""

    def __init__(self, path: str, line: int, column: int, reason: str) -> None:
        PizzamailError.__init__(
            self, f"{path} is not valid TOML: line {line}, column {column}: {reason}",
            hint=f"fix line {line} of config.toml (`pizzamail doctor` checks the whole file)")
        self.key, self.value, self.allowed = path, f"line {line}", "valid TOML"
        self.line, self.column = line, column


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

    def http_body(self) -> dict[str, object]:
        return {"ok": False, "error": self.message}


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


class ToolError(PizzamailError):
    """A tool source cannot be used: an MCP server failed to start, a skill is invalid.

    The run is not stopped by it: the tools are not offered, and the user hears why.
    """
