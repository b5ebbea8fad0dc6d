"""``models``: the model providers pizzamail knows, which one runs the agent, where each key is.

Keys are never printed, only where they were found. ``--check`` sends one cheap request per provider.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass

import click

from pizzamail.cli.app import App
from pizzamail.config import BUILTIN_PROVIDERS, Config, ProviderSettings
from pizzamail.providers import bedrock
from pizzamail.providers.probe import Probe, client, probe
from pizzamail.providers.registry import Answering, answering, check_kinds, find_key
from pizzamail.secrets import SecretStore


@dataclass(frozen=True, kw_only=True)
class Row:
    name: str
    kind: str
    base_url: str
    selected: bool
    key: str
    """where the key was found: keyring, file, env $VAR, missing or not needed"""
    reachable: bool | None = None
    detail: str = ""


def provider_names(config: Config) -> list[str]:
    """The built-in providers, then every ``[providers.NAME]``, each once."""
    return list(dict.fromkeys([*BUILTIN_PROVIDERS, *config.providers]))


def selected_name(config: Config) -> str:
    return config.agent.model.partition(":")[0]


def settings_of(config: Config) -> dict[str, ProviderSettings]:
    found = {name: config.provider(name) for name in provider_names(config)}
    return {name: s for name, s in found.items() if s is not None}


def endpoint_of(settings: ProviderSettings) -> str:
    """The base URL, Bedrock's derived from its region when not set."""
    if settings.kind == "bedrock" and not settings.base_url:
        return bedrock.base_url_for(bedrock.region_of(settings.region))
    return settings.base_url


async def rows(config: Config, secrets: SecretStore, *, check: bool) -> list[Row]:
    found = settings_of(config)
    keys = {name: find_key(name, s, secrets) for name, s in found.items()}
    probes: dict[str, Probe] = {}
    if check:
        async with client() as http:
            results = await asyncio.gather(*(probe(http, s, keys[n][0]) for n, s in found.items()))
        probes = dict(zip(found, results, strict=True))
    selected = selected_name(config)
    return [Row(name=n, kind=s.kind, base_url=endpoint_of(s), selected=n == selected, key=keys[n][1],
                reachable=probes[n].ok if n in probes else None,
                detail=probes[n].detail if n in probes else "") for n, s in found.items()]


def line(row: Row) -> str:
    mark = "*" if row.selected else " "
    where = f" {row.base_url}" if row.base_url else ""
    text = f"{mark} {row.name} ({row.kind}{where}) key: {row.key}"
    if row.reachable is not None:
        text += f"; {'ok' if row.reachable else 'FAIL'}: {row.detail}"
    return text


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--check", is_flag=True, help="Send one cheap request to each provider (5 s timeout).")
@click.pass_obj
def models(app: App, as_json: bool, check: bool) -> None:
    """Model providers, the one `[agent] model` selects (*), and where each key is found.

    With --check, exits 1 when the selected provider, or one you configured in config.toml,
    cannot be reached (the built-in ones you do not use are only reported)."""
    check_kinds(app.config)
    found = asyncio.run(rows(app.config, app.secrets, check=check))
    answers = answering(app.config, app.secrets)
    if as_json:
        click.echo(json.dumps({"model": app.config.agent.model, "selected": selected_name(app.config),
                               "answering": asdict(answers), "providers": [asdict(r) for r in found]},
                              indent=2))
    else:
        show(app.config, found, answers)
    fix = check_failure(app.config, found, answers) if check else ""
    if fix:
        if not as_json:
            click.echo(f"fix: {fix}", err=True)
        click.get_current_context().exit(1)


def check_failure(config: Config, found: list[Row], answers: Answering) -> str:
    """What fixes the selected provider, or the first one configured in config.toml, when it failed
    --check ("" when none did). A selected provider without its key fails even if its endpoint answers."""
    if answers.problem:
        return answers.fix or answers.problem
    failed = [r for r in found if r.reachable is False and (r.selected or r.name in config.providers)]
    if not failed:
        return ""
    if failed[0].kind == "local":
        return failed[0].detail.partition(": ")[2] or failed[0].detail
    return (f"check `[providers.{failed[0].name}] base_url` in config.toml and the key (`pizzamail keys"
            f" set {failed[0].name}`), then run `pizzamail models --check` again")


def show(config: Config, found: list[Row], answers: Answering) -> None:
    click.echo(f"[agent] model = \"{config.agent.model}\"")
    click.echo(f"answers: {answers.summary}")
    for row in found:
        click.echo(line(row))
