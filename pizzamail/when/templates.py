"""The one sandboxed Jinja2 environment for trigger prompts (webhooks, watched mailboxes), and the
check config runs on a template before anything renders it (pure)."""

from __future__ import annotations

import jinja2
import jinja2.sandbox

#: a template comes from config, its variables from outside senders: sandboxed, never autoescaped
#: (the result is a prompt, not HTML)
TEMPLATES = jinja2.sandbox.ImmutableSandboxedEnvironment(
    undefined=jinja2.ChainableUndefined, autoescape=False)


def template_problem(source: str) -> str | None:
    try:
        TEMPLATES.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        return f"a Jinja2 template ({exc.message}, line {exc.lineno})"
    return None
