"""``memofs generate agent TARGET``: agent instructions, MCP client configuration and
hooks for each agent upstream supports (facts section 11, ``generate agent``).

| target | instructions | MCP configuration | hooks |
|---|---|---|---|
| claude | ``CLAUDE.md`` | ``.mcp.json`` (``mcpServers``) | ``.claude/settings.json`` |
| codex | ``AGENTS.md`` | ``.codex/config.toml`` (``[mcp_servers.memofs]``) | |
| gemini | ``GEMINI.md`` | ``.gemini/settings.json`` (``mcpServers``) | |
| copilot | ``.github/copilot-instructions.md`` | ``.vscode/mcp.json`` (``servers``) | |
| cursor | ``.cursor/rules/memofs.mdc`` | ``.cursor/mcp.json`` (``mcpServers``) | |
| opencode | ``AGENTS.md`` | ``opencode.json`` (``mcp``) | |

Instructions go between ``<!-- memofs:begin -->`` and ``<!-- memofs:end -->``; everything
outside the block is kept and a second run replaces the block only. A file written by
upstream MemoFS has no markers: its MemoFS section (a heading that names MemoFS, up to the
next heading of the same level) counts as the block, so it is replaced rather than
doubled. Configuration files are merged (other servers and settings are kept). An
existing ``memofs`` entry is kept unless ``force``, except one that starts upstream's
``memofs-mcp-server``, which this project replaces (that binary does not exist here).
Hooks (Claude Code): the session-start hook runs ``memofs context --mark-session-start``
and ``memofs status --hook`` (both exit 0 on a healthy store).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

BEGIN = "<!-- memofs:begin -->"
END = "<!-- memofs:end -->"
SERVER_NAME = "memofs"
UPSTREAM_SERVER = "memofs-mcp-server"
COMMAND = ["memofs", "--root", ".", "mcp"]
HOOK_COMMANDS = ("memofs context --mark-session-start", "memofs status --hook")


@dataclass(frozen=True)
class Written:
    path: Path
    action: str  # "created" | "updated" | "kept"


@dataclass(frozen=True)
class Target:
    """Where one agent reads instructions and MCP servers; ``servers`` reads the server
    table of a parsed config and ``entry`` is memofs' entry in it."""

    rules: str
    config: str
    config_format: str  # "json" | "toml"
    servers: tuple[str, ...]  # key path of the server table
    entry: Callable[[], dict[str, Any]]
    hooks: str | None = None
    mdc: bool = False  # Cursor rule file: front matter, whole file ours


def _stdio() -> dict[str, Any]:
    return {"command": COMMAND[0], "args": COMMAND[1:]}


TARGETS: dict[str, Target] = {
    "claude": Target("CLAUDE.md", ".mcp.json", "json", ("mcpServers",), _stdio, hooks=".claude/settings.json"),
    "codex": Target("AGENTS.md", ".codex/config.toml", "toml", ("mcp_servers",), _stdio),
    "gemini": Target("GEMINI.md", ".gemini/settings.json", "json", ("mcpServers",), _stdio),
    "copilot": Target(".github/copilot-instructions.md", ".vscode/mcp.json", "json", ("servers",),
                      lambda: {"type": "stdio", **_stdio()}),
    "cursor": Target(".cursor/rules/memofs.mdc", ".cursor/mcp.json", "json", ("mcpServers",), _stdio, mdc=True),
    "opencode": Target("AGENTS.md", "opencode.json", "json", ("mcp",),
                       lambda: {"type": "local", "command": list(COMMAND), "enabled": True}),
}


def instructions_block(project_name: str) -> str:
    name = " ".join(project_name.split()) or "this project"
    return f"""{BEGIN}
# {name}: project memory (MemoFS)

This project keeps a durable memory in `.memofs/`, served by the `memofs` MCP server
(tools `memofs.context`, `memofs.recall`, `memofs.remember`, `memofs.consolidate`).

1. At the start of a task, call `memofs.context` with a query that names the task and
   a `taskType` (coding, debug, refactor, docs or general). Treat the briefing as the
   project's source of truth.
2. Before answering a question about earlier decisions, call `memofs.recall` with
   specific terms (identifiers, file names, error text).
3. When a section ends with `↳ expand (...)`, call `memofs.context` with that `section`
   and `expand` cursor to read the full list (cursors live 10 minutes).
4. After deciding or discovering something durable, call `memofs.remember` with a
   `kind` (decision, constraint, goal, preference, reference, summary, note), a
   `confidence` in [0, 1], and `anchors` naming the files it is about, so the memory is
   flagged stale when they change. Pass `supersedes` with the ids a new decision replaces.
5. Never store secrets: keys, tokens, passwords and connection strings are refused.

Without MCP, the same from a shell:
`memofs context --query "<task>" --task-type coding`,
`memofs recall --query "<terms>" --explain`,
`memofs remember "<text>" --kind decision --confidence 0.9 --anchor <path>`.
{END}
"""


_HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.M)


def _upstream_section(text: str) -> tuple[int, int] | None:
    """(start, end) of an unmarked MemoFS section: a heading naming MemoFS up to the next
    heading of the same or a higher level."""
    heads = list(_HEADING.finditer(text))
    for i, h in enumerate(heads):
        if "memofs" in h.group(2).lower():
            level = len(h.group(1))
            end = next((n.start() for n in heads[i + 1:] if len(n.group(1)) <= level), len(text))
            return h.start(), end
    return None


def write_instructions(root: Path, target: Target, project_name: str, force: bool = False) -> Written:
    path = root / target.rules
    block = instructions_block(project_name)
    if target.mdc:
        block = "---\ndescription: Project memory (MemoFS)\nalwaysApply: true\n---\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(block, encoding="utf-8")
        return Written(path, "created")
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start >= 0 and end > start:
        span = (start, end + len(END))
    else:
        span = _upstream_section(text)
    if span is not None:
        if not force:
            return Written(path, "kept")
        if target.mdc:
            new = block
        else:
            new = text[: span[0]] + block.rstrip("\n") + ("\n" if span[1] < len(text) else "") + text[span[1]:].lstrip("\n")
            if not new.endswith("\n"):
                new += "\n"
    else:
        new = text.rstrip("\n") + ("\n\n" if text.strip() else "") + block
    path.write_text(new, encoding="utf-8")
    return Written(path, "updated")


def _is_upstream(entry: Any) -> bool:
    return isinstance(entry, dict) and any(UPSTREAM_SERVER in str(v) for v in (entry.get("command"), entry.get("args")))


def _load(path: Path, fmt: str) -> dict[str, Any]:
    if not path.exists():
        return {}
    raw = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(raw) if fmt == "toml" else json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg}); fix or remove it") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML ({exc}); fix or remove it") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level must be an object")
    return data


def write_mcp_config(root: Path, target: Target, force: bool = False) -> Written:
    path = root / target.config
    data = _load(path, target.config_format)
    table: Any = data
    for key in target.servers:
        table = table.setdefault(key, {})
        if not isinstance(table, dict):
            raise ValueError(f"{path}: field {'.'.join(target.servers)!r} must be an object")
    existed = SERVER_NAME in table
    if existed and not force and not _is_upstream(table[SERVER_NAME]):
        return Written(path, "kept")
    table[SERVER_NAME] = target.entry()
    path.parent.mkdir(parents=True, exist_ok=True)
    if target.config_format == "toml":
        _write_codex_toml(path, data)
    else:
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return Written(path, "updated" if existed or len(table) > 1 or len(data) > 1 else "created")


def _write_codex_toml(path: Path, data: dict[str, Any]) -> None:
    """Replace only ``[mcp_servers.memofs]`` in the file's text (other tables stay as written)."""
    entry = data["mcp_servers"][SERVER_NAME]
    table = (f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(entry['command'])}\n"
             f"args = [{', '.join(json.dumps(a) for a in entry['args'])}]\n")
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(rf"^\[mcp_servers\.{SERVER_NAME}\]\n(?:(?!\[).*\n?)*", re.M)
    text = pattern.sub(lambda _: table, text, count=1) if pattern.search(text) else \
        text.rstrip("\n") + ("\n\n" if text.strip() else "") + table
    tomllib.loads(text)  # never leave a file the agent cannot read
    path.write_text(text, encoding="utf-8")


def write_hooks(root: Path, target: Target, force: bool = False) -> Written:
    """Claude Code's SessionStart hook: ``memofs context --mark-session-start`` and ``memofs status --hook``."""
    assert target.hooks is not None
    path = root / target.hooks
    data = _load(path, "json")
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{path}: field 'hooks' must be an object")
    session = hooks.setdefault("SessionStart", [])
    if not isinstance(session, list):
        raise ValueError(f"{path}: field 'hooks.SessionStart' must be a list")
    ours = {"hooks": [{"type": "command", "command": c} for c in HOOK_COMMANDS]}

    def is_ours(group: Any) -> bool:
        return isinstance(group, dict) and any(isinstance(h, dict) and str(h.get("command", "")).startswith("memofs ")
                                               for h in group.get("hooks", []))

    present = [g for g in session if is_ours(g)]
    if present and not force:
        return Written(path, "kept")
    session[:] = [g for g in session if not is_ours(g)] + [ours]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return Written(path, "updated" if present or len(session) > 1 else "created")


def generate(root: Path, target: str, project_name: str, *, force: bool = False, mcp: bool = True,
             hooks: bool = True) -> list[Written]:
    """Write ``target``'s instructions, MCP configuration (unless ``mcp`` is False) and
    hooks (where the agent has them, unless ``hooks`` is False) under ``root``."""
    if target not in TARGETS:
        raise ValueError(f"unknown agent {target!r}; one of: {', '.join(TARGETS)}")
    if not project_name or not project_name.strip():
        raise ValueError("--project-name must not be empty")
    t = TARGETS[target]
    out = [write_instructions(root, t, project_name, force)]
    if mcp:
        out.append(write_mcp_config(root, t, force))
    if hooks and t.hooks is not None:
        out.append(write_hooks(root, t, force))
    return out
