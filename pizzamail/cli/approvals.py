"""``approvals`` (what waits for you), ``approve`` / ``deny`` (decide from the terminal) and
``rules`` (standing "approve always" rules: list, rm).

``approvals`` shows a call the way its request mail does: a built-in tool that describes its calls
(schedule_task) says what approving will do. A listing starts no MCP server, so their calls show
their arguments only.

A decision from the terminal is recorded exactly like one by mail (a decisions row, ``via`` names
the terminal) and re-queues the waiting run; a running ``serve`` picks it up at its next poll.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import textwrap
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from pizzamail.approvals.ledger import STATE_TEXT, Applied, apply_decision, pending
from pizzamail.approvals.ledger import remove_rule as remove_rule_row
from pizzamail.cli.app import App
from pizzamail.store.actions import HeldAction, action_by_id, canonical_json
from pizzamail.store.approvals import Rule
from pizzamail.store.approvals import rules as list_rules

if TYPE_CHECKING:
    from pizzamail.approvals.decide import Decision
    from pizzamail.tools.builtins import Builtins


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def approvals(app: App, as_json: bool) -> None:
    """List the actions waiting for your decision."""
    found = asyncio.run(_pending(app)) if app.has_store() else []
    if as_json:
        click.echo(json.dumps([{**_public(a), "description": said} for a, said in found], indent=2))
        return
    if not found:
        click.echo("nothing waits for your approval")
        return
    from pizzamail.approvals.shown import shown_arguments  # loaded by _pending already

    click.echo(f"{'ID':>4}  {'THREAD':>6}  {'STATE':<8} ACTION")
    for a, said in found:
        shown = canonical_json(shown_arguments(a, a.status))
        click.echo(f"{a.id:>4}  {a.thread_id:>6}  {a.status:<8} {a.label} {shown}")
        if said:
            click.echo(textwrap.indent(said, " " * 6))


@click.command()
@click.argument("action_id", type=int)
@click.option("--always", is_flag=True, help="Also run this exact call without asking from now on.")
@click.pass_obj
def approve(app: App, action_id: int, always: bool) -> None:
    """Approve a held action: it runs once and the agent continues."""
    from pizzamail.approvals.decide import Decision

    _decide(app, action_id, Decision(kind="approve_always" if always else "approve"))


@click.command()
@click.argument("action_id", type=int)
@click.argument("reason", nargs=-1)
@click.pass_obj
def deny(app: App, action_id: int, reason: tuple[str, ...]) -> None:
    """Deny a held action; the optional REASON goes to the agent."""
    from pizzamail.approvals.decide import Decision

    _decide(app, action_id, Decision(kind="deny", note=" ".join(reason)))


@click.group(invoke_without_command=True)
@click.pass_context
def rules(ctx: click.Context) -> None:
    """Standing rules made by "approve always" (list; `rules rm ID` revokes one)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(rules_list)


@rules.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def rules_list(app: App, as_json: bool = False) -> None:
    """List standing rules."""
    found = asyncio.run(_rules(app)) if app.has_store() else []
    if as_json:
        click.echo(json.dumps([asdict(r) for r in found], indent=2))
        return
    if not found:
        click.echo("no standing rules")
        return
    for r in found:
        click.echo(f"{r.id:>4}  {r.server}: {r.tool}  arguments {r.arguments}  (since {r.created_at})")


@rules.command("rm")
@click.argument("rule_id", type=int)
@click.pass_obj
def rules_rm(app: App, rule_id: int) -> None:
    """Revoke a standing rule: that call asks again."""
    if not asyncio.run(_remove(app, rule_id)):
        raise click.ClickException(f"there is no rule {rule_id}; see `pizzamail rules`")
    click.echo(f"rule {rule_id} removed")


def _decide(app: App, action_id: int, decision: Decision) -> None:
    applied = asyncio.run(_apply(app, action_id, decision))
    if applied is None:
        raise click.ClickException(f"there is no action {action_id}; see `pizzamail approvals`")
    if not applied.applied:
        raise click.ClickException(f"nothing changed: {applied.why}")
    click.echo(f"action {action_id}: {STATE_TEXT.get(applied.state, applied.state)}")


async def _apply(app: App, action_id: int, decision: Decision) -> Applied | None:
    by = f"{app.config.account.address} (terminal, user {getpass.getuser()})"
    async with app.store() as store, store.write() as db:
        action = await action_by_id(db, action_id)
        if action is None:
            return None
        return await apply_decision(db, action, decision, by=by, via=f"cli:{getpass.getuser()}")


async def _pending(app: App) -> list[tuple[HeldAction, str]]:
    """The waiting actions, each with what its tool says about the call ('' when nothing)."""
    async with app.store() as store:
        found = await pending(store)
        if not found:
            return []
        # The built-in tools and the composer take a fifth of a second to import: only when needed.
        from pizzamail.composer import Composer
        from pizzamail.tools.builtins import Builtins

        builtins = Builtins(store=store, blobs=app.blobs(store),
                            composer=Composer(config=app.config), sender=app.config.agent.address)
        return [(a, _described(app, builtins, a)) for a in found]


def _described(app: App, builtins: Builtins, action: HeldAction) -> str:
    from pizzamail.approvals.shown import explain, shown_arguments
    from pizzamail.composer import MailContext
    from pizzamail.tools import RunScope

    if action.server != "builtin":
        return ""
    mail = MailContext(thread_id=action.thread_id, run_id=action.run_id, subject="", in_reply_to=None)
    scope = RunScope(run_id=action.run_id, thread_id=action.thread_id, mail=mail,
                     workspace=app.home.root / "workspaces" / str(action.run_id))
    offered = next((o for o in builtins.offer(scope).tools if o.name == action.tool), None)
    return explain(offered, shown_arguments(action, action.status))


async def _rules(app: App) -> list[Rule]:
    async with app.store() as store:
        return await list_rules(store)


async def _remove(app: App, rule_id: int) -> bool:
    async with app.store() as store:
        return await remove_rule_row(store, rule_id)


def _public(action: HeldAction) -> dict[str, object]:
    data = asdict(action)
    data.pop("nonce")  # the nonce is the reply's proof; it is not printed
    data["arguments"] = action.parsed_arguments
    return data
