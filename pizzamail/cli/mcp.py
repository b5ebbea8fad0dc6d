"""``mcp``: list the configured MCP servers with their tools and policies, add and import servers."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pizzamail.cli.app import App
from pizzamail.config import Config, McpServerSettings, parse_config, read_toml
from pizzamail.errors import ConfigError
from pizzamail.home import write_private
from pizzamail.tools.hub import McpHub
from pizzamail.tools.importing import from_mcp_json
from pizzamail.tools.names import exposed_name

if TYPE_CHECKING:  # tomlkit takes a noticeable while to import: only `mcp add` loads it
    from tomlkit.items import Table


@dataclass(kw_only=True)
class ServerReport:
    name: str
    transport: str
    enabled: bool
    status: str
    error: str | None = None
    tools: list[dict[str, str]] = field(default_factory=list)


async def probe(app: App, *, startup_timeout: float) -> list[ServerReport]:
    """Start the enabled servers once (as serve would), list their tools, stop them."""
    config = app.config
    settings = replace(config.mcp, startup_timeout=startup_timeout)
    reports = {name: ServerReport(name=name, transport=s.transport, enabled=s.enabled, status="disabled")
               for name, s in config.mcp.servers.items()}
    hub = McpHub(settings=settings, secrets=app.secrets, cwd=app.home.root, rules=config.tools.policy,
                 log_dir=app.home.logs if app.home.logs.is_dir() else None)
    async with hub:
        for name, connection in hub.connections.items():
            report = reports[name]
            report.status, report.error = connection.status, connection.error
            report.tools = [{"name": d.name, "exposed": exposed_name(name, d.name),
                             "policy": connection.policy(d, hub.rules)} for d in connection.tools]
    return list(reports.values())


@click.group()
def mcp() -> None:
    """MCP servers: the tools the agent can use beyond the built-ins."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds each server may take to start.")
@click.pass_obj
def mcp_list(app: App, as_json: bool, timeout: float) -> None:
    """Servers, whether they start, and each tool with its policy (enabled servers are started)."""
    reports = asyncio.run(probe(app, startup_timeout=timeout))
    if as_json:
        click.echo(json.dumps([asdict(r) for r in reports], indent=2))
        return
    if not reports:
        click.echo("no MCP servers configured; add one with `pizzamail mcp add`")
    for r in reports:
        click.echo(f"{r.name} ({r.transport}): {r.status}" + (f" - {r.error}" if r.error else ""))
        for tool in r.tools:
            click.echo(f"  {tool['policy']:<5} {tool['exposed']}")


@mcp.command("login")
@click.argument("name")
@click.option("--no-browser", is_flag=True, help="Only print the address to open (no desktop here).")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait for the browser.")
@click.pass_obj
def mcp_login(app: App, name: str, no_browser: bool, timeout: float) -> None:
    """Log in to a server with auth = "oauth": opens the browser; the tokens go to the keyring."""
    from pizzamail.tools.mcp import log_in

    settings = _oauth_server(app, name)

    async def show(url: str) -> None:
        click.echo(f"Open this address to log in to {name} (waiting up to {timeout:g} s):\n  {url}")
        if not no_browser:
            import webbrowser

            webbrowser.open(url)

    tools = asyncio.run(log_in(name, settings, app.secrets, show=show, browser_wait=timeout))
    click.echo(f"logged in to {name}: {len(tools)} tool(s); the tokens are kept in {app.secrets.location}")


@mcp.command("logout")
@click.argument("name")
@click.pass_obj
def mcp_logout(app: App, name: str) -> None:
    """Forget a server's OAuth tokens and registration (revoke them at the server's site too)."""
    from pizzamail.tools.oauth import secret_name

    _oauth_server(app, name)
    gone = app.secrets.delete(secret_name(name))
    app.secrets.remember_name(secret_name(name), False)
    click.echo(f"logged out of {name}" if gone else f"{name} had no login")


def _oauth_server(app: App, name: str) -> McpServerSettings:
    settings = app.config.mcp.servers.get(name)
    if settings is None:
        known = ", ".join(app.config.mcp.servers) or "none"
        raise click.BadParameter(f"no MCP server {name!r} in config.toml (configured: {known})",
                                 param_hint="NAME")
    if settings.auth != "oauth" or not settings.url:
        raise click.BadParameter(f'{name} does not use OAuth: set url and auth = "oauth" in its'
                                 f" [mcp.servers.{name}] section first", param_hint="NAME")
    return settings


@mcp.command("add")
@click.argument("name", required=False)
@click.option("--command", "command", help="stdio: the program to start.")
@click.option("--arg", "args", multiple=True, help="stdio: one argument (repeat for more).")
@click.option("--env", "env", multiple=True, help="stdio: KEY=VALUE (the value may say ${VAR}).")
@click.option("--url", help="Streamable HTTP endpoint.")
@click.option("--header", "headers", multiple=True, help="HTTP: Name=VALUE (may say ${secret:NAME}).")
@click.option("--from-json", "from_json", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Import every server of a Claude-Code-style .mcp.json.")
@click.option("--enable", is_flag=True, help="Enable now (servers are added disabled otherwise).")
@click.pass_obj
def mcp_add(app: App, name: str | None, command: str | None, args: tuple[str, ...], env: tuple[str, ...],
            url: str | None, headers: tuple[str, ...], from_json: Path | None, enable: bool) -> None:
    """Add a server to config.toml (disabled unless --enable); restart serve to use it."""
    if from_json is not None:
        imported = from_mcp_json(from_json.read_text(encoding="utf-8"), enable=enable)
        for skipped, why in imported.skipped.items():
            click.echo(f"skipped {skipped}: {why}", err=True)
        sections = imported.sections
    else:
        if not name:
            raise click.UsageError("give a NAME, or --from-json PATH")
        section: dict[str, object] = {"enabled": enable}
        if command:
            section.update(command=command, args=list(args), env=_pairs(env, "--env"))
        if url:
            section.update(url=url, headers=_pairs(headers, "--header"))
        sections = {name: {k: v for k, v in section.items() if v not in ({}, [])}}
    _append(app, sections)
    for added in sections:
        state = "enabled" if enable else "disabled: set enabled = true in config.toml to use it"
        click.echo(f"added MCP server {added} ({state})")


def _pairs(items: tuple[str, ...], option: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.UsageError(f"{option} takes KEY=VALUE, not {item!r}")
        pairs[key] = value
    return pairs


def _append(app: App, sections: dict[str, dict[str, object]]) -> None:
    """Add the sections to config.toml, after checking the whole result would load. tomlkit edits
    the document in place, so the user's comments, order and spacing stay as they were."""
    import tomlkit

    path = app.home.config
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    current = parse_config(read_toml(text, path)) if text else Config()
    for name in sections:
        if name in current.mcp.servers:
            raise ConfigError(f"mcp.servers.{name}", name, "a name not configured yet",
                              hint="edit its section in config.toml instead")
    document = tomlkit.parse(text)
    mcp = document.setdefault("mcp", tomlkit.table(is_super_table=True))
    servers = mcp.setdefault("servers", tomlkit.table(is_super_table=True))
    for name, section in sections.items():
        servers[name] = _table(section)
    new_text = tomlkit.dumps(document)
    parse_config(read_toml(new_text, path))  # raises, naming the key, before anything is written
    app.home.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(path, new_text.encode())


def _table(section: dict[str, object]) -> Table:
    """One server's table; its env and headers stay inline tables, one line each."""
    import tomlkit

    table = tomlkit.table()
    for key, value in section.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            value = inline
        table[key] = value
    table.add(tomlkit.nl())  # a blank line before whatever section follows
    return table
