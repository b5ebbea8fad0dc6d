"""Pure parts of tools: name mapping, policy rules, config validation, skills, references, and the
MCP connection against in-memory servers (no subprocess)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool, ToolAnnotations

from pizzamail.config import McpServerSettings, McpSettings, parse_config
from pizzamail.errors import ConfigError, SecretMissing, ToolError
from pizzamail.secrets import SecretStore
from pizzamail.skills import load_skill, scan
from pizzamail.tools.expand import expand
from pizzamail.tools.hub import McpHub
from pizzamail.tools.mcp import McpConnection
from pizzamail.tools.names import NameMap, exposed_name
from pizzamail.tools.policy import effective, from_annotations, match_rule
from tests.tools.servers import notes

PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.mark.parametrize(("server", "tool"), [
    ("files", "read_file"),
    ("files", "fs.read.file"),
    ("gh", "x" * 128),
    ("a" * 40, "b" * 40),
    ("srv", "weird tool/name"),
])
def test_exposed_names_fit_providers_and_map_back(server: str, tool: str) -> None:
    names = NameMap()
    exposed = names.add(server, tool)
    assert PROVIDER_NAME.match(exposed)
    assert names.lookup(exposed) == (server, tool)
    assert exposed == exposed_name(server, tool)  # stable: checkpoints store these names


def test_a_plain_name_is_kept_and_changed_names_do_not_collide() -> None:
    assert exposed_name("files", "read_file") == "files__read_file"
    assert exposed_name("files", "read.file") != exposed_name("files", "read_file")
    long_a, long_b = exposed_name("s", "t" * 70 + "a"), exposed_name("s", "t" * 70 + "b")
    assert long_a != long_b and len(long_a) == len(long_b) == 64


def test_annotation_defaults() -> None:
    assert from_annotations(ToolAnnotations(read_only_hint=True)) == "auto"
    assert from_annotations(ToolAnnotations(destructive_hint=True)) == "ask"
    assert from_annotations(ToolAnnotations(read_only_hint=False, open_world_hint=True)) == "ask"
    assert from_annotations(None) == "ask"  # a tool that says nothing is not trusted to be harmless


def test_rules_exact_beats_glob_and_longer_glob_beats_shorter() -> None:
    rules = {"*": "ask", "read_*": "auto", "read_secrets": "deny"}
    assert match_rule(rules, "read_file") == "auto"
    assert match_rule(rules, "read_secrets") == "deny"
    assert match_rule(rules, "write_file") == "ask"
    assert match_rule({}, "x") is None


def test_server_rules_beat_global_rules_and_never_auto_stays_ask() -> None:
    assert effective("ask", rules=[({"add": "auto"}, "add"), ({"*": "deny"}, "s__add")]) == "auto"
    assert effective("ask", rules=[({}, "add"), ({"s__*": "deny"}, "s__add")]) == "deny"
    assert effective("ask", rules=[({"*": "auto"}, "draft_email")], never_auto=True) == "ask"
    assert effective("ask", rules=[({"*": "deny"}, "draft_email")], never_auto=True) == "deny"


@pytest.mark.parametrize(("data", "key", "allowed"), [
    ({"mcp": {"servers": {"x": {"enabled": True}}}}, "mcp.servers.x.command", "a command (stdio)"),
    ({"mcp": {"servers": {"x": {"command": "a", "url": "http://h/mcp"}}}}, "mcp.servers.x.url", "not both"),
    ({"mcp": {"servers": {"x": {"url": "ftp://h"}}}}, "mcp.servers.x.url", "http:// or https://"),
    ({"mcp": {"servers": {"x": {"command": "a", "args": "one"}}}}, "mcp.servers.x.args", "a list of quoted"),
    ({"mcp": {"servers": {"x": {"command": "a", "env": {"K": 1}}}}}, "mcp.servers.x.env", "a table of"),
    ({"mcp": {"servers": {"x": {"command": "a", "policy": {"*": "maybe"}}}}}, "mcp.servers.x.policy",
     "auto, ask, deny"),
    ({"mcp": {"servers": {"x": {"command": "a", "enable": True}}}}, "mcp.servers.x.enable", "one of enabled"),
    ({"mcp": {"servers": {"bad name": {"command": "a"}}}}, "mcp.servers.bad name", "a server name"),
    ({"mcp": {"startup_timeout": 0}}, "mcp.startup_timeout", "greater than 0"),
    ({"tools": {"policy": {"x": "never"}}}, "tools.policy", "auto, ask, deny"),
    ({"skills": {"paths": "~/skills"}}, "skills.paths", "a list of quoted strings"),
])
def test_tool_config_errors_name_the_key(data: dict[str, Any], key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.key == key
    assert allowed in info.value.message


def test_a_server_section_parses() -> None:
    config = parse_config({"mcp": {"servers": {"gh": {
        "enabled": True, "url": "https://example.test/mcp",
        "headers": {"Authorization": "Bearer ${secret:gh}"},
        "timeout": 5, "policy": {"get_*": "auto"}}}}, "tools": {"policy": {"post_progress": "deny"}}})
    gh = config.mcp.servers["gh"]
    assert (gh.enabled, gh.transport, gh.timeout, gh.policy) == (True, "http", 5.0, {"get_*": "auto"})
    assert config.tools.policy == {"post_progress": "deny"}
    assert McpServerSettings().enabled is False  # nothing runs unless enabled


def test_references_expand_from_environment_and_keyring(tmp_path: Path) -> None:
    secrets = SecretStore(fallback=tmp_path / "secrets.json", scope="t", use_keyring=False)
    secrets.set("gh", "tok123")
    assert expand("Bearer ${secret:gh}", key="k", secrets=secrets) == "Bearer tok123"
    assert expand("${HOME_X}/x", key="k", secrets=None, environ={"HOME_X": "/h"}) == "/h/x"
    with pytest.raises(ToolError, match=r"mcp.servers.a.env.TOKEN refers to \$\{NOPE\}"):
        expand("${NOPE}", key="mcp.servers.a.env.TOKEN", secrets=None, environ={})
    with pytest.raises(SecretMissing) as info:
        expand("${secret:missing}", key="k", secrets=secrets)
    assert info.value.hint == "run `pizzamail keys set missing`"


# -- skills ---------------------------------------------------------------------------------------


def write_skill(root: Path, folder: str, front: str, body: str = "Do it.\n") -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(f"---\n{front}---\n{body}")
    return path


@pytest.mark.parametrize(("folder", "front", "reason"), [
    ("pdf", "description: d\n", "name is missing"),
    ("pdf", "name: pdf\n", "description is missing"),
    ("Bad-Name", "name: Bad-Name\ndescription: d\n", "must be 1-64 characters"),
    ("a--b", "name: a--b\ndescription: d\n", "must be 1-64 characters"),
    ("pdf", "name: pdf-tools\ndescription: d\n", "differs from its folder's name"),
    ("x" * 65, f"name: {'x' * 65}\ndescription: d\n", "must be 1-64 characters"),
    ("pdf", f"name: pdf\ndescription: {'d' * 1025}\n", "at most 1024"),
    ("pdf", "name: pdf\ndescription: [unclosed\n", "not valid YAML"),
    ("claude-helper", "name: claude-helper\ndescription: d\n", "reserved word"),
])
def test_invalid_skills_say_why(tmp_path: Path, folder: str, front: str, reason: str) -> None:
    write_skill(tmp_path, folder, front)
    catalog = scan([tmp_path])
    assert catalog.skills == []
    [invalid] = catalog.invalid
    assert reason in invalid.reason


def test_skills_parse_leniently_and_the_first_folder_wins(tmp_path: Path) -> None:
    write_skill(tmp_path / "home", "notes", "name: notes\ndescription: Use when: taking notes\n"
                "allowed-tools: files__read_file files__write_file\n")
    write_skill(tmp_path / "extra", "notes", "name: notes\ndescription: another\n")
    catalog = scan([tmp_path / "home", tmp_path / "extra", tmp_path / "missing"])
    [skill] = catalog.skills
    assert skill.description == "Use when: taking notes"  # the unquoted colon is tolerated
    assert skill.allowed_tools == ["files__read_file", "files__write_file"]
    assert "shadowed by" in catalog.invalid[0].reason
    assert load_skill(skill.folder).body() == "Do it."


# -- MCP connection, in memory ----------------------------------------------------------------------


def paged_server(pages: int) -> Server[Any]:
    """A low-level server whose tools/list answers in pages, one tool per page."""

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        n = int(params.cursor) if params is not None and params.cursor else 0
        tool = Tool(name=f"tool{n}", description=f"tool number {n}", input_schema={"type": "object"},
                    annotations=ToolAnnotations(read_only_hint=n % 2 == 0))
        return ListToolsResult(tools=[tool], next_cursor=str(n + 1) if n + 1 < pages else None)

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=f"called {params.name}")])

    return Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def in_memory(name: str, target: object, **settings: Any) -> McpConnection:
    connection = McpConnection(name=name, settings=McpServerSettings(enabled=True, command="-", **settings),
                               target=target, startup_timeout=10)
    connection.start()
    await connection.first_outcome.wait()
    return connection


async def test_tool_lists_are_followed_page_by_page() -> None:
    connection = await in_memory("paged", paged_server(3))
    try:
        assert [t.name for t in connection.tools] == ["tool0", "tool1", "tool2"]
        result = await connection.call("tool2", {})
        assert (result.text, result.is_error) == ("called tool2", False)
    finally:
        await connection.stop()
    assert connection.status == "stopped"


async def test_a_connection_offers_tools_with_policies_from_annotations_and_rules() -> None:
    hub = McpHub(settings=McpSettings(), rules={"paged__tool1": "deny"})
    hub.connections["paged"] = await in_memory("paged", paged_server(3), policy={"tool2": "ask"})
    try:
        offered = {o.name: o.policy for o in hub.connections["paged"].offered(hub.rules)}
    finally:
        await hub.stop()
    assert offered == {"paged__tool0": "auto", "paged__tool1": "deny", "paged__tool2": "ask"}


async def test_an_in_memory_mcpserver_answers_through_the_connection() -> None:
    connection = await in_memory("notes", notes.mcp)
    try:
        assert (await connection.call("add", {"a": 1, "b": 2})).text == "3"
        refused = await connection.call("lookup", {"title": "Solaris"})
        assert refused.is_error and "no note titled 'Solaris'" in refused.text
        unknown = await connection.call("nope", {})
        assert unknown.is_error
    finally:
        await connection.stop()


def test_serve_without_mcp_servers_never_loads_the_sdk() -> None:
    # a process of its own: this one has loaded the SDK for the other tests
    script = ("import sys\n"
              "import pizzamail.cli.serve, pizzamail.service, pizzamail.worker\n"
              "from pizzamail.config import McpSettings\n"
              "from pizzamail.tools.hub import McpHub\n"
              "assert not McpHub(settings=McpSettings()).connections\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.strip() == "[]"
