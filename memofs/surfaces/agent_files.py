"""``memofs generate agent claude``: agent instructions and the MCP client configuration.

Writes two files in the project root (spec "Start retrieving"; facts section 11,
``generate agent``):

* ``CLAUDE.md``: a block of instructions between ``<!-- memofs:begin -->`` and
  ``<!-- memofs:end -->``. An existing file keeps everything outside the block; running
  the command again replaces the block only (idempotent).
* ``.mcp.json``: ``{"mcpServers": {"memofs": {"command": "memofs", "args": ["--root", ".", "mcp"]}}}``
  merged into an existing file (other servers are kept). ``--no-mcp`` skips it.

An existing ``memofs`` entry or block is replaced only with ``force``; otherwise the
command reports it as kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

BEGIN = "<!-- memofs:begin -->"
END = "<!-- memofs:end -->"
SERVER_NAME = "memofs"


def claude_block(project_name: str) -> str:
    name = " ".join(project_name.split()) or "this project"
    return f"""{BEGIN}
# {name}: project memory (MemoFS)

This project keeps a durable memory in `.memofs/`, served by the `memofs` MCP server
(tools `memofs.context`, `memofs.recall`, `memofs.remember`).

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
   flagged stale when they change.
5. Never store secrets: keys, tokens, passwords and connection strings are refused.

Without MCP, the same from a shell:
`memofs context --query "<task>" --task-type coding`,
`memofs recall --query "<terms>" --explain`,
`memofs remember "<text>" --kind decision --confidence 0.9 --anchor <path>`.
{END}
"""


@dataclass(frozen=True)
class Written:
    path: Path
    action: str  # "created" | "updated" | "kept"


def write_claude_md(root: Path, project_name: str, force: bool = False) -> Written:
    path = root / "CLAUDE.md"
    block = claude_block(project_name)
    if not path.exists():
        path.write_text(block, encoding="utf-8")
        return Written(path, "created")
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start >= 0 and end > start:
        if not force:
            return Written(path, "kept")
        new = text[:start] + block.rstrip("\n") + text[end + len(END):]
    else:
        new = text.rstrip("\n") + ("\n\n" if text.strip() else "") + block
    path.write_text(new, encoding="utf-8")
    return Written(path, "updated")


def mcp_server_entry() -> dict:
    return {"command": "memofs", "args": ["--root", ".", "mcp"]}


def write_mcp_json(root: Path, force: bool = False) -> Written:
    path = root / ".mcp.json"
    data: dict = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg}); fix or remove it") from None
        if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
            raise ValueError(f"{path}: field 'mcpServers' must be an object")
    servers = data.setdefault("mcpServers", {})
    existed = SERVER_NAME in servers
    if existed and not force:
        return Written(path, "kept")
    servers[SERVER_NAME] = mcp_server_entry()
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return Written(path, "updated" if existed or len(servers) > 1 else "created")


def generate_claude(root: Path, project_name: str, *, force: bool = False, mcp: bool = True) -> list[Written]:
    """Write CLAUDE.md and (unless ``mcp`` is False) .mcp.json under ``root``."""
    if not project_name or not project_name.strip():
        raise ValueError("--project-name must not be empty")
    out = [write_claude_md(root, project_name, force)]
    if mcp:
        out.append(write_mcp_json(root, force))
    return out
