"""``task`` (start work without mail) and ``threads`` (what the agent is doing)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import click

from pizzamail.cli.app import App
from pizzamail.store.threads import Thread, count_threads, list_threads
from pizzamail.store.usage import Usage, thread_usage

if TYPE_CHECKING:
    from pizzamail.config import Agent
    from pizzamail.intake.tasks import Stored


@click.command()
@click.argument("text")
@click.option("--agent", "agent_name", metavar="NAME",
              help="The agent to give it to: NAME of [agents.NAME] or its address (default: the main one).")
@click.pass_obj
def task(app: App, text: str, agent_name: str | None) -> None:
    """Give the agent a task without writing a mail; the answer arrives in INBOX."""
    if not text.strip():
        raise click.UsageError("the task is empty")
    app.initialise()
    agent = _agent(app, agent_name)
    stored = asyncio.run(_submit(app, text, agent.address))
    click.echo(f"thread {stored.thread_id}: queued for {agent.name} ({agent.address})")
    if not app.home.state_file.exists():
        click.echo("pizzamail is not running; the task starts with `pizzamail serve`.")


def _agent(app: App, name: str | None) -> Agent:
    agents = app.config.all_agents()
    if not name:
        return agents[0]
    found = next((a for a in agents if name.lower() in (a.key, a.address)), None)
    if found is None:
        known = ", ".join(a.key if a.key != "agent" else f"{a.address} (main)" for a in agents)
        raise click.BadParameter(f"no agent {name!r}; the agents are: {known} (see `pizzamail agents`)",
                                 param_hint="--agent")
    return found


async def _submit(app: App, text: str, agent: str) -> Stored:
    from pizzamail.intake.tasks import submit_text  # mail parsing: `threads` starts without it

    config = app.config
    async with app.store() as store:
        return await submit_text(
            store, app.blobs(store), text, sender=config.account.address,
            agent=agent, domain=config.domain,
        )


LISTED = 50
"""threads `pizzamail threads` lists unless told otherwise: the newest, a screenful or two"""


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--limit", type=click.IntRange(min=1),
              help=f"List only the N most recently updated threads (default {LISTED}; with --json, all).")
@click.option("--all", "every", is_flag=True, help="List every thread.")
@click.pass_obj
def threads(app: App, as_json: bool, limit: int | None, every: bool) -> None:
    """List threads, newest first, with their status."""
    # a script reading --json has no line telling it that more were left out: it gets them all
    shown = None if every or (as_json and limit is None) else limit or LISTED
    listed = asyncio.run(_threads(app, shown, as_json)) if app.has_store() else _Listed()
    if as_json:
        click.echo(json.dumps([{**asdict(t), "usage": asdict(listed.usage.get(t.id, Usage()))}
                               for t in listed.threads], indent=2))
        return
    if not listed.threads:
        click.echo("no threads yet: write to " + app.config.agent.address)
        return
    lines = [f"{'ID':>4}  {'STATUS':<8} {'MSGS':>4}  {'UPDATED':<20} SUBJECT"]
    lines += [f"{t.id:>4}  {t.status:<8} {t.messages:>4}  {t.updated_at:<20} {t.subject}"
              for t in listed.threads]
    if listed.total > len(listed.threads):
        lines.append(f"(the newest {len(listed.threads)} of {listed.total} threads;"
                     " --limit N or --all for more)")
    click.echo("\n".join(lines))  # one write (10,000 echoed one by one: 57 ms)


@dataclass(frozen=True)
class _Listed:
    threads: list[Thread] = field(default_factory=list)
    total: int = 0
    usage: dict[int, Usage] = field(default_factory=dict)


async def _threads(app: App, limit: int | None, with_usage: bool) -> _Listed:
    async with app.store() as store:
        found = await list_threads(store, limit=limit)
        total = len(found) if limit is None or len(found) < limit else await count_threads(store)
        return _Listed(threads=found, total=total, usage=await thread_usage(store) if with_usage else {})
