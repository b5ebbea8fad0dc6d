"""``agents``: the agents mail can be written to, each with its address, model and tools."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from pizzamail.cli.app import App
from pizzamail.config import Agent


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def agents(app: App, as_json: bool) -> None:
    """The agents to write to: the main one ([agent]) and each [agents.NAME]."""
    found = app.config.all_agents()
    if as_json:
        click.echo(json.dumps([{**asdict(a), "instructions": bool(a.instructions)} for a in found],
                              indent=2))
        return
    for agent in found:
        click.echo(_line(agent))


def _line(agent: Agent) -> str:
    tools = "all tools" if agent.tools is None else "tools " + " ".join(agent.tools)
    skills = "" if agent.skills is None else " · skills " + (" ".join(agent.skills) or "none")
    about = f"\n    {agent.description}" if agent.description else ""
    return f"{agent.name} <{agent.address}>  {agent.section}  {agent.model} · {tools}{skills}{about}"
