"""Skills offered to runs: the catalog in the system prompt, ``activate_skill`` for a skill's
instructions and ``read_skill_file`` for the files they refer to (progressive disclosure).

The folders are scanned for every run, so a skill added while serving is there for the next task.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pizzamail.providers.types import ToolSpec
from pizzamail.skills import Catalog, Skill, scan, skill_folders
from pizzamail.tools import Offer, Offered, RunScope, SkillEntry, ToolResult

#: the most of one skill file handed to the model
MAX_FILE_CHARS = 100_000


@dataclass(kw_only=True)
class SkillSource:
    home_skills: Path
    paths: list[str]

    def catalog(self) -> Catalog:
        return scan(skill_folders(self.home_skills, self.paths))

    def offer(self, scope: RunScope) -> Offer:
        catalog = self.catalog()
        if scope.agent is not None:  # the agent's allowlist: the others are neither listed nor loadable
            catalog = replace(catalog, skills=[s for s in catalog.skills if scope.agent.offers_skill(s.name)])
        if not catalog.skills:  # no skills: no catalog and no skill tools at all
            return Offer()
        entries = [SkillEntry(name=s.name, description=s.description, location=str(s.location))
                   for s in catalog.skills]
        tools = [Offered(tool=ActivateSkill(catalog=catalog), policy="auto"),
                 Offered(tool=ReadSkillFile(catalog=catalog), policy="auto")]
        return Offer(tools=tools, skills=entries)


def _names(catalog: Catalog) -> dict[str, Any]:
    return {"type": "string", "enum": [s.name for s in catalog.skills], "description": "the skill"}


@dataclass(frozen=True, kw_only=True)
class ActivateSkill:
    catalog: Catalog

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="activate_skill", description=(
            "Load a skill's instructions (see available_skills in the system prompt)."),
            parameters={"type": "object", "properties": {"name": _names(self.catalog)}, "required": ["name"]})

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        skill = self.catalog.get(str(arguments.get("name", "")))
        if skill is None:
            known = ", ".join(s.name for s in self.catalog.skills)
            wanted = arguments.get("name")
            return ToolResult(is_error=True, text=f"no skill named {wanted!r}; skills: {known}")
        return ToolResult(text=activation_text(skill))


def activation_text(skill: Skill) -> str:
    lines = [f'<skill_content name="{skill.name}">', skill.body(), "</skill_content>",
             f"Skill folder: {skill.folder}"]
    resources = skill.resources()
    if resources:
        lines.append("Files (read them with read_skill_file when the instructions need them): "
                     + ", ".join(resources))
    if skill.allowed_tools:
        lines.append("Tools this skill expects: " + " ".join(skill.allowed_tools))
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class ReadSkillFile:
    catalog: Catalog

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="read_skill_file", description="Read a file a skill's instructions refer to.",
                        parameters={"type": "object", "properties": {
                            "name": _names(self.catalog),
                            "path": {"type": "string", "description": "relative to the skill's folder"}},
                            "required": ["name", "path"]})

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        skill = self.catalog.get(str(arguments.get("name", "")))
        if skill is None:
            return ToolResult(text=f"no skill named {arguments.get('name')!r}", is_error=True)
        root = skill.folder.resolve()
        target = (root / str(arguments.get("path", ""))).resolve()
        # resolve() follows symlinks and "..": whatever the path says, it must stay in the folder
        if not target.is_relative_to(root) or target == root:
            return ToolResult(text="the path must name a file inside the skill's folder", is_error=True)
        if not target.is_file():
            return ToolResult(text=f"the skill has no file {arguments.get('path')!r}", is_error=True)
        text = target.read_bytes().decode("utf-8", "replace")
        return ToolResult(text=text[:MAX_FILE_CHARS])
