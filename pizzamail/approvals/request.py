"""The approval request mail, and the ``Action`` folder as the queue of requests still waiting.

The request goes into the thread (INBOX) like every bot mail; a copy of the same bytes is put into
``Action`` and taken out once the action is decided. A copy that vanished while the action still
waits was deleted by the user: that is "ignore" (the agent is told). The pass that notices this,
:func:`sync_action_folder`, runs after filing and on the sweep's timer — the Maildir index in
the store is the truth about what the user's client deleted.

A tool that describes its calls (:class:`~pizzamail.tools.Explained`) has that description shown
above the arguments (:mod:`pizzamail.approvals.shown`). It is not stored: it is worked out from the
stored arguments whenever a request is written (and by ``pizzamail approvals``), so it needs nothing a
restart loses, and it follows the arguments that the request shows. The request mail keeps what the
user was shown.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from pizzamail.approvals.decide import Decision, approval_header
from pizzamail.approvals.ledger import apply_decision
from pizzamail.approvals.release import Waiting
from pizzamail.approvals.shown import explain, shown_arguments
from pizzamail.composer import Composed, Composer, MailContext
from pizzamail.mailbox.writing import MailFolders
from pizzamail.store import Store
from pizzamail.store.actions import HeldAction, forget_copies, record_copy, waiting_actions
from pizzamail.store.blobs import BlobStore
from pizzamail.store.threads import find_message
from pizzamail.tools import Toolbox
from pizzamail.transcript import HeldStep, ToolStep, Transcript

log = logging.getLogger("pizzamail.approvals")

ACTION_FOLDER = "Action"
_LONGEST_VALUE = 300
#: how much of the main argument the subject shows
_LONGEST_TARGET = 40


def reply_address(bot: str, nonce: str) -> str:
    local, _, domain = bot.partition("@")
    return f"{local}+{nonce}@{domain}"


def request_mail(composer: Composer, ctx: MailContext, *, waiting: Waiting, toolbox: Toolbox,
                 transcript: Transcript, bot: str, expires: str = "") -> Composed:
    action = waiting.action
    offered = toolbox.get(action.tool)
    arguments = shown_arguments(action, waiting.why)
    evidence = gather_evidence(transcript, action.call_id)
    view: dict[str, Any] = {
        "label": action.label, "reason": action.reason, "tool": action.original,
        "server_text": "pizzamail itself (built-in)" if action.server == "builtin"
        else f"the MCP server {action.server!r}",
        "description": offered.tool.spec.description if offered else "(the tool is not available now)",
        "explained": explain(offered, arguments),
        "annotations": (offered.annotations if offered and offered.annotations else
                        "built-in" if action.server == "builtin" else "no annotations"),
        "readable": [(k, _readable(v)) for k, v in arguments.items()],
        "arguments": json.dumps(arguments, indent=2, ensure_ascii=False),
        "problem": waiting.problem if waiting.why == "invalid" else "",
        "relay": waiting.problem if waiting.why == "relay" else "", "unknown": waiting.why == "unknown",
        "evidence": [name for name, _ in evidence], "action_id": action.id,
        "draft": action.is_draft, "expires": expires,
    }
    headers = [("Reply-To", reply_address(bot, action.nonce)),
               ("X-Pizzamail-Approval", approval_header(action.id, action.nonce))]
    tag = request_tag(action.label, arguments, offered.tool.spec.parameters if offered else None,
                      retry=waiting.why == "unknown")
    return composer.approval(ctx, view=view, headers=headers, tag=tag, evidence=evidence)


def request_tag(label: str, arguments: dict[str, Any], schema: dict[str, Any] | None, *,
                retry: bool = False) -> str:
    """What the request's subject says will happen: ``Approve? delete_note "a"``. The main target is
    the first required text argument the tool's schema names, else the call's first text argument."""
    verb = "Retry?" if retry else "Approve?"
    target = _main_target(arguments, schema)
    if not target:
        return f"{verb} {label}"
    # square brackets would end the subject's [tag] early
    shown = " ".join(target.translate(_NO_BRACKETS).split())
    if len(shown) > _LONGEST_TARGET:
        shown = shown[:_LONGEST_TARGET - 1].rstrip() + "…"
    return f'{verb} {label} "{shown}"'


_NO_BRACKETS = str.maketrans("[]", "()")


def _main_target(arguments: dict[str, Any], schema: dict[str, Any] | None) -> str:
    required = schema.get("required", []) if isinstance(schema, dict) else []
    names = [n for n in required if isinstance(n, str)] + list(arguments)
    return next((str(arguments[n]).strip() for n in names
                 if isinstance(arguments.get(n), str) and str(arguments[n]).strip()), "")


def gather_evidence(transcript: Transcript, call_id: str) -> list[tuple[str, str]]:
    """The results of the tool calls that came before the held one in this run."""
    files: list[tuple[str, str]] = []
    for step in transcript.steps:
        if isinstance(step, HeldStep) and step.call_id == call_id:
            break
        if isinstance(step, ToolStep) and step.result.text.strip():
            files.append((f"evidence-{len(files) + 1}-{step.name}.txt", step.result.text))
    return files


def _readable(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= _LONGEST_VALUE else text[:_LONGEST_VALUE] + " …"


def copy_name(action: HeldAction) -> str:
    digest = hashlib.sha256((action.request_message_id or "").encode()).hexdigest()[:12]
    return f"approval.{action.id}.{digest}.pizzamail"


async def sync_action_folder(store: Store, mailbox: MailFolders, blobs: BlobStore, *, owner: str) -> bool:
    """Make ``Action`` hold exactly the waiting requests; returns True if an action was ignored
    (its run is queued again)."""
    folder = await mailbox.folder(ACTION_FOLDER) or await mailbox.create_folder(ACTION_FOLDER)
    present = {row.name: row.uid for row in await mailbox.messages(folder)}
    actions = await waiting_actions(store, requested=True)
    wanted = {copy_name(a) for a in actions}
    stale = {name: uid for name, uid in present.items()
             if name.startswith("approval.") and name not in wanted}
    if stale:
        await _forget_copies(store, list(stale))
        await mailbox.expunge(folder, list(stale.values()))
    ignored = False
    for action in actions:
        name = copy_name(action)
        if name in present:
            if action.action_copy != name:  # delivered, then a crash came before it was recorded
                await _record_copy(store, action, name)
            continue
        if action.action_copy == name and action.status == "held":
            ignored = await _ignore(store, action, owner) or ignored
            continue
        await _deliver_copy(store, mailbox, blobs, folder_name=ACTION_FOLDER, action=action, name=name)
    return ignored


async def _forget_copies(store: Store, names: list[str]) -> None:
    """We take these copies out ourselves (their action was decided): recorded first, so an action
    that goes back to held (no relay, invalid edits) is shown again, never taken for ignored."""
    async with store.write() as db:
        await forget_copies(db, names)


async def _ignore(store: Store, action: HeldAction, owner: str) -> bool:
    log.info("the request for action %d was deleted from Action: ignored", action.id)
    async with store.write() as db:
        applied = await apply_decision(db, action, Decision(kind="ignore"), by=owner,
                                       via=action.request_message_id or "")
    return applied.applied


async def _deliver_copy(store: Store, mailbox: MailFolders, blobs: BlobStore, *, folder_name: str,
                        action: HeldAction, name: str) -> None:
    request = await find_message(store, action.request_message_id or "")
    if request is None:
        return
    folder = await mailbox.folder(folder_name)
    assert folder is not None
    await mailbox.deliver(folder, await blobs.load(request.blob), base=name)
    await _record_copy(store, action, name)


async def _record_copy(store: Store, action: HeldAction, name: str) -> None:
    """From now on, a copy missing from ``Action`` was deleted by the user."""
    async with store.write() as db:
        await record_copy(db, action.id, name)
