"""``memofs generate agent TARGET`` for every agent upstream supports, run through the CLI:
files where each agent reads them, merged not clobbered, idempotent, upstream files
upgraded in place, and the generated hooks run without error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from memofs.surfaces.agent_files import BEGIN, END, HOOK_COMMANDS, TARGETS

BIN = Path(sys.executable).parent
ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
STDIO = {"command": "memofs", "args": ["--root", ".", "mcp"]}
# independent statement of where each agent looks (its documentation), not read from the module
EXPECTED = {
    "claude": ("CLAUDE.md", ".mcp.json", ["mcpServers"], STDIO),
    "codex": ("AGENTS.md", ".codex/config.toml", ["mcp_servers"], STDIO),
    "gemini": ("GEMINI.md", ".gemini/settings.json", ["mcpServers"], STDIO),
    "copilot": (".github/copilot-instructions.md", ".vscode/mcp.json", ["servers"], {"type": "stdio", **STDIO}),
    "cursor": (".cursor/rules/memofs.mdc", ".cursor/mcp.json", ["mcpServers"], STDIO),
    "opencode": ("AGENTS.md", "opencode.json", ["mcp"], {"type": "local", "command": ["memofs", "--root", ".", "mcp"], "enabled": True}),
}


def memofs(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "memofs"), "--root", str(root), *args], env=ENV, capture_output=True, text=True, timeout=120)


def generate(root: Path, target: str, *extra: str) -> dict[str, str]:
    res = memofs(root, "--json", "generate", "agent", target, "--project-name", "My API", *extra)
    assert res.returncode == 0, res.stderr
    return {str(Path(w["path"]).relative_to(root)): w["action"] for w in json.loads(res.stdout)}


def _servers(path: Path, keys: list[str]) -> dict:
    data = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    for k in keys:
        data = data[k]
    return data


def test_every_upstream_target_is_served() -> None:
    assert sorted(TARGETS) == sorted(EXPECTED)


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_generate_writes_where_the_agent_reads(tmp_path: Path, target: str) -> None:
    rules, config, keys, entry = EXPECTED[target]
    written = generate(tmp_path, target)
    assert written[rules] == "created" and written[config] == "created"
    text = (tmp_path / rules).read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1 and "# My API: project memory (MemoFS)" in text
    assert _servers(tmp_path / config, keys) == {"memofs": entry}
    assert set(generate(tmp_path, target).values()) == {"kept"}  # idempotent
    assert (tmp_path / rules).read_text() == text


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_existing_config_is_merged(tmp_path: Path, target: str) -> None:
    _, config, keys, entry = EXPECTED[target]
    path = tmp_path / config
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".toml":
        path.write_text('model = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n')
    else:
        nested: dict = {"other": {"command": "x"}}
        for k in reversed(keys):
            nested = {k: nested}
        path.write_text(json.dumps({"theme": "dark", **nested}))
    assert generate(tmp_path, target)[config] == "updated"
    assert _servers(path, keys) == {"other": {"command": "x"}, "memofs": entry}
    top = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    assert top.get("model", top.get("theme")) in ("o3", "dark")


def test_upstream_claude_md_without_markers_is_upgraded_not_doubled(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("# House rules\n\nBe nice.\n\n## MemoFS memory\n\nOld upstream text.\n\n## Testing\n\nRun pytest.\n")
    assert generate(tmp_path, "claude", "--no-mcp", "--no-hooks") == {"CLAUDE.md": "kept"}
    assert generate(tmp_path, "claude", "--no-mcp", "--no-hooks", "--force") == {"CLAUDE.md": "updated"}
    text = (tmp_path / "CLAUDE.md").read_text()
    assert text.startswith("# House rules\n\nBe nice.\n\n" + BEGIN) and text.endswith(END + "\n## Testing\n\nRun pytest.\n")
    assert "Old upstream text" not in text and text.count(BEGIN) == 1
    generate(tmp_path, "claude", "--no-mcp", "--no-hooks", "--force")
    assert (tmp_path / "CLAUDE.md").read_text() == text


def test_upstream_server_entry_is_replaced_a_custom_one_kept(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"memofs": {"command": "npx", "args": ["memofs-mcp-server", "--root", "."]}}}))
    assert generate(tmp_path, "claude", "--no-hooks")[".mcp.json"] == "updated"
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["memofs"] == STDIO
    custom = {"command": "/opt/memofs", "args": ["mcp", "--read-only"]}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"memofs": custom}}))
    assert generate(tmp_path, "claude", "--no-hooks")[".mcp.json"] == "kept"
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["memofs"] == custom


def test_bad_config_is_one_line_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{not json")
    res = memofs(tmp_path, "generate", "agent", "claude", "--project-name", "X")
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith(f"memofs: error: {tmp_path / '.mcp.json'}:1: invalid JSON")


def test_generated_hooks_run_without_error(tmp_path: Path) -> None:
    assert memofs(tmp_path, "init").returncode == 0
    assert memofs(tmp_path, "remember", "We deploy on Fridays", "--kind", "decision").returncode == 0
    generate(tmp_path, "claude")
    settings = json.loads((tmp_path / ".claude/settings.json").read_text())
    commands = [h["command"] for g in settings["hooks"]["SessionStart"] for h in g["hooks"]]
    assert commands == list(HOOK_COMMANDS)
    for command in commands:  # as the agent runs them: a shell in the project root
        res = subprocess.run(command, shell=True, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, (command, res.stderr)
    events = [json.loads(x) for x in (tmp_path / ".memofs/events/memory-events.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "memory.indexed" and events[-1]["metadata"] == {"hook": "session-start"}
    assert generate(tmp_path, "claude")[".claude/settings.json"] == "kept"
