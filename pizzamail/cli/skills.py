"""``skills``: the Agent Skills the agent is offered, and those that are not, with the reason."""

from __future__ import annotations

import json

import click

from pizzamail.cli.app import App
from pizzamail.skills import Catalog, scan, skill_folders


def catalog(app: App) -> Catalog:
    return scan(skill_folders(app.home.skills, app.config.skills.paths))


@click.group()
def skills() -> None:
    """Agent Skills: folders with a SKILL.md in skills/ and in [skills] paths."""


@skills.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def skills_list(app: App, as_json: bool) -> None:
    """Valid skills with their description; invalid ones with what is wrong."""
    found = catalog(app)
    if as_json:
        click.echo(json.dumps({
            "skills": [{"name": s.name, "description": s.description, "location": str(s.location),
                        "allowed_tools": s.allowed_tools} for s in found.skills],
            "invalid": [{"folder": str(i.folder), "reason": i.reason} for i in found.invalid],
        }, indent=2))
        return
    if not found.skills and not found.invalid:
        click.echo(f"no skills; put skill folders (each with a SKILL.md) in {app.home.skills}")
    for s in found.skills:
        click.echo(f"{s.name}: {s.description}")
    for i in found.invalid:
        click.echo(f"INVALID {i.folder}: {i.reason}")
