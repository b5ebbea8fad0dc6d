"""``doctor``: check the installation and say what to fix."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

import click

from pizzamail.auth import password_command, sender_key
from pizzamail.cli.app import App
from pizzamail.cli.mcp import probe
from pizzamail.cli.skills import catalog
from pizzamail.errors import ConfigError, ConfigProblems, PizzamailError
from pizzamail.mailbox import STANDARD_FOLDERS, maildir
from pizzamail.providers.registry import answering, check_kinds
from pizzamail.tls import certificate_days_left, fingerprint, server_context


@dataclass(frozen=True)
class Check:
    status: str  # ok | warn | fail
    name: str
    detail: str


def _home(app: App) -> Check:
    root = app.home.root
    if not app.home.exists():
        return Check("fail", "home", f"{root} is not set up; run `pizzamail init`")
    mode = root.stat().st_mode & 0o777
    if mode & 0o077:
        return Check("warn", "home", f"{root} is readable by others (mode {mode:o}); chmod 700 it")
    return Check("ok", "home", str(root))


def _config(app: App) -> list[Check]:
    """One line per problem in config.toml, then where to fix them; loading it is the check."""
    try:
        check_kinds(app.config)
    except ConfigError as exc:
        *others, last = [p.message for p in (exc.problems if isinstance(exc, ConfigProblems) else [exc])]
        return [*(Check("fail", "config", p) for p in others),
                Check("fail", "config", f"{last}\nfix: {exc.hint}")]
    return [Check("ok", "config", str(app.home.config))]


def _keyring(app: App) -> Check:
    if app.secrets.use_keyring:
        return Check("ok", "secrets", f"kept in {app.secrets.location}")
    return Check("warn", "secrets", f"no OS keyring on this machine: kept in {app.secrets.location}")


def _password(app: App) -> Check:
    app.secrets.account_password()
    return Check("ok", "account", f"user {app.config.account.user}, password stored")


def _senders(app: App) -> Check:
    """One line for all ``[senders.NAME]``: login, address, and whether it can log in."""
    senders = app.config.senders
    if not senders:
        return Check("ok", "senders", "none configured")
    parts, missing = [], False
    for name, sender in sorted(senders.items()):
        state = "disabled" if not sender.enabled else "password stored"
        if sender.enabled and not app.secrets.get(sender_key(name)):
            state, missing = f"no password: run `{password_command(name)}`", True
        parts.append(f"{name} (login {sender.login(name)}, {sender.address}) {state}")
    return Check("warn" if missing else "ok", "senders", "; ".join(parts))


def _triggers(app: App) -> Check:
    """Webhooks and watched mailboxes that cannot work yet because their secret is missing."""
    config = app.config
    named = [(f"hook:{n}", f"hook {n}") for n in sorted(config.hooks)]
    named += [(f"watch:{n}", f"watch {n}") for n, w in sorted(config.watches.items()) if w.enabled]
    if not (named or config.schedules):
        return Check("ok", "triggers", "none in config.toml (see `pizzamail triggers`)")
    missing = [f"{label}: run `pizzamail keys set {key}`" for key, label in named if not app.secrets.get(key)]
    if missing:
        return Check("warn", "triggers", "no secret for " + "; ".join(missing))
    counts = (f"{len(config.schedules)} schedule(s), {len(config.hooks)} hook(s),"
              f" {len(config.watches)} watch(es)")
    return Check("ok", "triggers", counts + " in config.toml; `pizzamail watch test NAME` tries a watch")


def _model(app: App) -> Check:
    """Which model answers: the selected one, the offline toy model standing in, or none. A model
    that cannot answer is a warning: the server still runs and each run's mail says what to do."""
    found = answering(app.config, app.secrets)
    if not found.problem:
        return Check("ok", "model", found.summary)
    return Check("warn", "model", f"{found.summary}\nfix: {found.fix}")


def _tls(app: App) -> Check:
    cert, key = app.tls_paths()
    if not cert.exists():
        return Check("warn", "tls", f"no certificate at {cert}; `pizzamail init` creates one")
    server_context(cert, key)
    days = certificate_days_left(cert)
    if days < 30:
        return Check("warn", "tls", f"{cert} expires in {days} days; replace it")
    return Check("ok", "tls", f"{cert}, SHA-256 {fingerprint(cert)[:23]}…, {days} days left")


def _maildir(app: App) -> Check:
    missing = [f for f in STANDARD_FOLDERS if not (maildir.folder_path(app.home.maildir, f) / "cur").is_dir()]
    if missing:
        return Check("warn", "maildir", "missing " + ", ".join(missing) + "; `pizzamail serve` creates them")
    return Check("ok", "maildir", str(app.home.maildir))


def _mcp(app: App) -> Check:
    """Enabled servers are started once with a short timeout, as serve would start them."""
    servers = app.config.mcp.servers
    if not servers:
        return Check("ok", "mcp", "no MCP servers configured")
    reports = asyncio.run(probe(app, startup_timeout=5.0))
    parts = []
    for r in reports:
        if r.status == "ready":
            parts.append(f"{r.name} ready ({len(r.tools)} tools)")
        elif r.status == "disabled":
            parts.append(f"{r.name} disabled")
        else:
            parts.append(f"{r.name} {r.status}: {r.error}")
    failed = any(r.status not in ("ready", "disabled") for r in reports)
    return Check("warn" if failed else "ok", "mcp", "; ".join(parts))


def _skills(app: App) -> Check:
    found = catalog(app)
    if found.invalid:
        problems = "; ".join(f"{i.folder.name}: {i.reason}" for i in found.invalid)
        return Check("warn", "skills", f"{len(found.skills)} valid, invalid: {problems}")
    return Check("ok", "skills", f"{len(found.skills)} skill(s)")


def _server(app: App) -> Check:
    try:
        state = json.loads(app.home.state_file.read_text())
    except FileNotFoundError:
        return Check("warn", "server", "not running; start it with `pizzamail serve`")
    if not _alive(int(state["pid"])):
        return Check("warn", "server", "not running (stale serve.json); start it with `pizzamail serve`")
    for key in [key for key in ("smtp_port", "imap_port") if int(state[key])]:  # 0: IMAP mode, no port
        with socket.socket() as s:
            s.settimeout(2)
            if s.connect_ex((state["host"], int(state[key]))) != 0:
                return Check("fail", "server", f"pid {state['pid']} runs but {key} does not answer")
    return Check("ok", "server", f"pid {state['pid']}, SMTP {state['smtp_port']}, IMAP {state['imap_port']}")


def _leader(app: App) -> Check:
    """With PostgreSQL: which serve runs what runs once per deployment (another may stand by)."""
    try:
        leader = asyncio.run(_ask_leader(app))
    except Exception as exc:  # the database is away or refuses: said here, the other checks go on
        return Check("fail", "leader", f"the database did not answer: {exc}")
    if leader is None:
        return Check("warn", "leader", "no serve leads: schedules, watches and filing wait;"
                                       " start one with `pizzamail serve`")
    return Check("ok", "leader", f"the serve on {leader} runs schedules, watches and filing")


async def _ask_leader(app: App) -> str | None:
    from pizzamail.store.leader import leader_of

    async with app.store() as store:
        return await leader_of(store)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: the checks that read config.toml: skipped (with one line saying so) while it has problems
WITH_CONFIG: list[Callable[[App], Check]] = [_password, _senders, _triggers, _model, _tls, _mcp, _skills]


def run_checks(app: App) -> list[Check]:
    config = _config(app)
    configured = config[0].status == "ok"
    shared = configured and bool(app.config.store.url)  # serves on other machines may share it
    checks = [_keyring, *(WITH_CONFIG if configured else []), _maildir, _server,
              *([_leader] if shared else [])]
    results = [_run(_home, app), *config, *(_run(check, app) for check in checks)]
    if not configured:
        names = ", ".join(check.__name__.strip("_") for check in WITH_CONFIG)
        results.append(Check("warn", "skipped", f"{names}: checked once config.toml loads"))
    return results


def _run(check: Callable[[App], Check], app: App) -> Check:
    try:
        return check(app)
    except PizzamailError as exc:
        return Check("fail", check.__name__.strip("_"), exc.cli_message().removeprefix("error: "))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def doctor(app: App, as_json: bool) -> None:
    """Check the home folder, config, secrets, model key, MCP servers, skills and running server."""
    results = run_checks(app)
    if as_json:
        click.echo(json.dumps([c.__dict__ for c in results], indent=2))
    else:
        colours = {"ok": "green", "warn": "yellow", "fail": "red"}
        for c in results:
            detail = c.detail.replace("\n", "\n" + " " * 15)  # under the first line's detail
            click.echo(click.style(f"{c.status:<5}", fg=colours[c.status]) + f"{c.name:<9} {detail}")
    if any(c.status == "fail" for c in results):
        raise SystemExit(1)
