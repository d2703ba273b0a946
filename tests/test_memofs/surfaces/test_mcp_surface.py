"""The whole MCP surface (issue 20): tools, resources and prompts, through the official SDK
client over stdio and over Streamable HTTP, and through the official MCP Inspector CLI as an
external client; plus upstream's notes.md format the notes resource is written in."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from memofs.files.notes_md import Note, format_note, format_notes, parse_notes
from memofs.files.records import GraphEdge, GraphNode, InvalidInputError
from memofs.graph.entity_graph import EntityGraph
from memofs.store.cursor import ContextCache
from memofs.store.project import LiveStore, Store
from memofs.surfaces.mcp_server import PROMPTS, RESOURCES, TOOLS, MemofsTools, ToolError
from support import REPO_ROOT

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
MEMOFS = str(Path(sys.executable).with_name("memofs"))
ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1", "PATH": os.environ.get("PATH", ""),
       # the server process imports the code under test, wherever PYTHONPATH puts it
       **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
REPO = REPO_ROOT
TEXTS = ["We chose Cloudflare D1 for tenant metadata", "JWT tokens expire after 24 hours",
         "OAuth replaced JWT for the admin console"]


REMEMBER = {"content": "Staging deploys freeze on Friday afternoons", "kind": "constraint", "title": "Deploy freeze",
            "source": "ops-handbook", "sourceRefs": [{"sourceType": "document", "path": "docs/ops.md"}],
            "metadata": {"team": "platform", "ticket": 42}}


def _store(root: Path) -> Store:
    store = Store.init(root, clock=lambda: NOW)
    for i, text in enumerate(TEXTS):
        store.remember(text, kind="decision", tags=[f"t{i}"], confidence=0.9, now=NOW)
    graph = store.load_graph()
    graph.upsert_node(GraphNode("oauth", "OAuth", "tool"))
    graph.upsert_node(GraphNode("jwt", "JWT", "tool"))
    graph.upsert_node(GraphNode("console", "admin console", "component"))
    graph.upsert_edge(GraphEdge("oauth", "jwt", "supersedes"))
    graph.upsert_edge(GraphEdge("console", "jwt", "uses"))
    graph.save(store.paths.graph)
    return store


async def _exercise(session: ClientSession) -> dict:
    await session.initialize()
    out: dict = {"tools": sorted(t.name for t in (await session.list_tools()).tools)}
    out["resources"] = sorted(str(r.uri) for r in (await session.list_resources()).resources)
    out["read"] = {u: (await session.read_resource(u)).contents[0].text for u in out["resources"]}
    out["prompts"] = sorted(p.name for p in (await session.list_prompts()).prompts)
    out["prompt"] = (await session.get_prompt("memofs-recall-context", {"query": "tenant metadata"})).messages[0].content.text
    out["review"] = (await session.get_prompt("memofs-memory-review", {"content": "Use pnpm"})).messages[0].content.text
    try:
        await session.get_prompt("memofs-recall-context", {})
        out["prompt_error"] = None
    except MCPError as exc:
        out["prompt_error"] = exc.error.message
    out["preview"] = (await session.call_tool("memofs.consolidate", {})).structured_content
    out["apply"] = (await session.call_tool("memofs.consolidate", {"apply": True, "now": "2026-03-02T00:00:00Z"})).structured_content
    out["recall"] = (await session.call_tool("memofs.recall", {"query": "tenant metadata"})).structured_content
    out["remember"] = (await session.call_tool("memofs.remember", REMEMBER)).structured_content
    out["recalled"] = (await session.call_tool("memofs.recall", {"query": "staging deploys freeze"})).structured_content
    out["notes"] = (await session.read_resource("memofs://memory/notes")).contents[0].text
    out["bad_ref"] = (await session.call_tool("memofs.remember", {"content": "Staging deploys are frozen on Fridays",
                                                                  "sourceRefs": [{"path": "../secrets"}]}))
    return out


async def _stdio(root: Path) -> dict:
    params = StdioServerParameters(command=MEMOFS, args=["--root", str(root), "mcp"], env=ENV)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            return await _exercise(s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_server(root: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([MEMOFS, "--root", str(root), "mcp", "--http", f"127.0.0.1:{port}"], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait for the port, not for a fixed time
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode())
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the HTTP server never listened")


async def _http(url: str) -> dict:
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            return await _exercise(s)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    out = {}
    root = tmp_path_factory.mktemp("stdio")
    _store(root)
    out["stdio"] = (root, anyio.run(_stdio, root))
    root = tmp_path_factory.mktemp("http")
    _store(root)
    proc, url = _http_server(root)
    try:
        out["http"] = (root, anyio.run(_http, url))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_same_surface_over_both_transports(both, transport: str) -> None:
    root, out = both[transport]
    assert out["tools"] == sorted(TOOLS) == ["memofs.consolidate", "memofs.context", "memofs.recall", "memofs.remember"]
    assert out["resources"] == sorted(RESOURCES)
    assert out["prompts"] == sorted(PROMPTS)
    read = out["read"]
    assert read["memofs://memory/core"] == (root / ".memofs/memory/core.md").read_text()
    # the notes resource is upstream's notes.md: parsed back, it is every stored memory
    stored = [json.loads(line) for line in (root / ".memofs/memory/memories.jsonl").read_text().splitlines()]
    stored = stored[:len(TEXTS)]  # read before the exercise's own remember call
    notes = parse_notes(read["memofs://memory/notes"])
    assert [(n.metadata["id"], n.content, n.kind, n.tags, n.confidence) for n in notes] == \
        [(r["id"], r["text"], "decision", tuple(r["tags"]), 0.9) for r in stored]
    assert [e["metadata"]["id"] for e in json.loads(read["memofs://memory/recent"])] == [r["id"] for r in stored][::-1]
    assert {n["id"] for n in json.loads(read["memofs://graph/nodes"])} >= {"oauth", "jwt", "console"}
    health = json.loads(read["memofs://health"])
    assert health == {"ok": True, "healthy": True, "memories": 3, "warnings": [], "problems": []}
    assert read["memofs://context"].startswith("## How to use MemoFS context")
    first = out["recall"]["items"][0]
    assert first["text"] == TEXTS[0] and first["created_at"] == "2026-03-01T00:00:00Z"
    assert f"[{first['id']}]" in out["prompt"] and TEXTS[0] in out["prompt"]
    assert "Use pnpm" in out["review"] and "secrets" in out["review"]
    assert out["prompt_error"] == "MCP_VALIDATION_ERROR: query is required."


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_consolidate_previews_then_applies(both, transport: str) -> None:
    root, out = both[transport]
    plan = {"retiredNodes": ["jwt"], "retiredEdges": [{"from": "console", "type": "uses", "to": "jwt"}], "changed": True}
    assert {k: out["preview"]["plan"][k] for k in plan} == plan and out["preview"]["applied"] is False
    assert out["apply"]["applied"] is True and out["apply"]["retirementsApplied"] == 2
    assert out["apply"]["plan"]["now"] == "2026-03-02T00:00:00Z"
    graph = EntityGraph.load(root / ".memofs/graph")
    assert graph.node("jwt").status == "retired" and graph.node("oauth").status == "active"
    assert {(e.source, e.type, e.target): e.status for e in graph.edges} == {
        ("oauth", "supersedes", "jwt"): "active", ("console", "uses", "jwt"): "retired"}


def test_read_only_allows_a_preview_and_refuses_apply(tmp_path: Path) -> None:
    store = _store(tmp_path)
    before = (tmp_path / ".memofs/graph/nodes.jsonl").read_bytes()
    tools = MemofsTools(LiveStore(store), ContextCache(clock=lambda: 0.0), lambda: NOW, read_only=True)
    assert tools.call("memofs.consolidate", {"apply": False})["plan"]["retiredNodes"] == ["jwt"]
    with pytest.raises(ToolError, match="read-only"):
        tools.call("memofs.consolidate", {"apply": True})
    for args, msg in (({"apply": "yes"}, "apply must be a boolean"), ({"now": "yesterday"}, "now must be an ISO")):
        with pytest.raises(ToolError, match=msg):
            tools.call("memofs.consolidate", args)
    with pytest.raises(ToolError, match="Unknown resource"):
        tools.read_resource("memofs://nope")
    assert (tmp_path / ".memofs/graph/nodes.jsonl").read_bytes() == before


def test_http_address_is_checked(tmp_path: Path) -> None:
    Store.init(tmp_path, clock=lambda: NOW)
    res = subprocess.run([MEMOFS, "--root", str(tmp_path), "mcp", "--http", "localhost"], env=ENV,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip() == "memofs: error: --http wants HOST:PORT (e.g. 127.0.0.1:8765); got 'localhost'"


# ---------------------------------------------------------------------- the Inspector CLI
def _inspector() -> str | None:
    """The official MCP Inspector (npm ``@modelcontextprotocol/inspector``): $MEMOFS_MCP_INSPECTOR,
    or the copy ``make inspector`` installs under .cache/node."""
    found = os.environ.get("MEMOFS_MCP_INSPECTOR") or str(REPO / ".cache/node/node_modules/.bin/mcp-inspector")
    return found if Path(found).is_file() and shutil.which("node") else None


@pytest.mark.slow  # an external client: node and the Inspector, which `make test` installs and test-fast does not
@pytest.mark.skipif(_inspector() is None, reason="MCP Inspector not installed (needs node; `make inspector` installs it)")
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_cli_as_an_external_client(tmp_path: Path, transport: str) -> None:
    _store(tmp_path)
    proc = None
    if transport == "stdio":
        target = [MEMOFS, "--root", str(tmp_path), "mcp"]
    else:
        proc, url = _http_server(tmp_path)
        target = [url, "--transport", "http"]

    def call(*args: str) -> dict:
        res = subprocess.run([_inspector(), "--cli", *target, *args], env=ENV, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout[res.stdout.index("{"):])

    try:
        assert sorted(t["name"] for t in call("--method", "tools/list")["tools"]) == sorted(TOOLS)
        assert sorted(r["uri"] for r in call("--method", "resources/list")["resources"]) == sorted(RESOURCES)
        notes = call("--method", "resources/read", "--uri", "memofs://memory/notes")["contents"][0]["text"]
        assert [n.content for n in parse_notes(notes)] == TEXTS
        got = call("--method", "tools/call", "--tool-name", "memofs.recall", "--tool-arg", "query=tenant metadata")
        assert json.loads(got["content"][0]["text"])["items"][0]["text"] == TEXTS[0]
        prompt = call("--method", "prompts/get", "--prompt-name", "memofs-recall-context", "--prompt-args", "query=tenant")
        assert TEXTS[0] in prompt["messages"][0]["content"]["text"]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)


# ---------------------------------------------------------------------- notes.md
def test_notes_format_matches_upstream_by_hand() -> None:
    note = Note("2026-03-01T00:00:00.000Z", "  Use pnpm, not npm.  ", kind="preference", title="Package\nmanager",
                tags=("tooling", "js"), confidence=0.8, source="memofs", metadata={"id": "mem_1"})
    assert format_note(note) == (
        "## 2026-03-01T00:00:00.000Z — Package manager\n- kind: preference\n- tags: tooling, js\n"
        "- confidence: 0.8\n- source: memofs\n- metadata: {\"id\": \"mem_1\"}\n\nUse pnpm, not npm.\n")
    doc = format_notes([note, Note("2026-03-02T00:00:00Z", "Second")])
    assert doc.startswith("# Notes\n\n") and doc.endswith("\n\nSecond\n")
    back = parse_notes(doc)
    assert [(n.timestamp, n.title, n.kind, n.tags, n.confidence, n.content, n.line) for n in back] == [
        ("2026-03-01T00:00:00.000Z", "Package manager", "preference", ("tooling", "js"), 0.8, "Use pnpm, not npm.", 5),
        ("2026-03-02T00:00:00Z", None, "note", (), 1.0, "Second", 14)]


@pytest.mark.parametrize("text, message", [
    ("## yesterday\n- kind: note\n\nx\n", "n.md:1: heading timestamp 'yesterday' is not an ISO timestamp"),
    ("# Notes\n\n## 2026-03-01T00:00:00Z\n- confidence: high\n\nx\n", "n.md:4: field 'confidence' must be a number; got 'high'"),
    ("## 2026-03-01T00:00:00Z\n- metadata: [1]\n\nx\n", "n.md:2: field 'metadata' must be a JSON object"),
    ("## 2026-03-01T00:00:00Z\n- kind: note\n\n", "n.md:1: note has no content"),
])
def test_malformed_notes_name_file_line_and_field(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_notes(text, "n.md")
    assert str(info.value) == message


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_remember_keeps_and_returns_upstream_fields(both, transport: str) -> None:
    root, out = both[transport]
    r = out["remember"]
    assert r["created"] is True and r["sourceRefs"] == REMEMBER["sourceRefs"]
    m = r["memory"]
    assert (m["title"], m["source"], m["sourceRefs"], m["metadata"]) == (
        "Deploy freeze", "ops-handbook", REMEMBER["sourceRefs"], {"team": "platform", "ticket": 42})
    z_format = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")  # one format: UTC, Z suffix
    assert z_format.fullmatch(m["created_at"])
    hit = out["recalled"]["items"][0]
    assert hit["id"] == r["id"] and hit["title"] == "Deploy freeze" and hit["metadata"]["ticket"] == 42
    assert hit["created_at"] == m["created_at"]
    # the notes resource renders the memory as upstream writes it: user metadata spread last
    entry = next(n for n in parse_notes(out["notes"]) if n.metadata.get("id") == r["id"])
    assert entry.title == "Deploy freeze" and entry.source == "ops-handbook"
    assert entry.metadata == {"id": r["id"], "sourceRefs": REMEMBER["sourceRefs"], "team": "platform", "ticket": 42}
    # kept on disk: a fresh load of the store returns the same fields
    stored = next(m for m in Store.open(root).load().memories if m.id == r["id"])
    assert stored.metadata["metadata"] == {"team": "platform", "ticket": 42}
    bad = out["bad_ref"]
    assert bad.is_error and "sourceRefs[0]" in bad.content[0].text and "MCP_VALIDATION_ERROR" in bad.content[0].text
