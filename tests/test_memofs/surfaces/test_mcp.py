"""The MCP server end to end: ``memofs mcp`` as a subprocess, driven by the SDK's own
stdio client; plus the tool layer directly (read-only, argument errors)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memofs.store.cursor import ContextCache, b64url, b64url_decode
from memofs.surfaces.mcp_server import TOOLS, MemofsTools, ToolError
from memofs.store.project import LiveStore, Store

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
MEMOFS = str(Path(sys.executable).with_name("memofs"))


def _tamper(cursor: str) -> str:
    """Flip one bit of the cursor's MAC and re-encode canonically."""
    raw = bytearray(b64url_decode(cursor))
    raw[-1] ^= 1
    return b64url(bytes(raw))


async def _session_calls(root: Path) -> dict:
    params = StdioServerParameters(command=MEMOFS, args=["--root", str(root), "mcp"],
                                   env={"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"})
    out: dict = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            out["tools"] = (await s.list_tools()).tools
            out["remember"] = [await s.call_tool("memofs.remember", {
                "content": f"Tenant database decision {i}: pool size {10 * i} on the primary",
                "kind": "decision", "confidence": 0.9, "tags": ["db"]}) for i in range(7)]
            out["recall"] = await s.call_tool("memofs.recall", {"query": "tenant database pool", "limit": 3, "explain": True})
            out["context"] = await s.call_tool("memofs.context", {"query": "tenant database", "taskType": "refactor"})
            ctx = out["context"].structured_content
            cur = next(e for e in ctx["expandable"] if e["section"] == "recall")["cursor"]
            out["expand"] = await s.call_tool("memofs.context", {"section": "recall", "expand": cur})
            out["bad"] = {
                "missing": await s.call_tool("memofs.recall", {"query": "   "}),
                "type": await s.call_tool("memofs.recall", {"query": "x", "limit": "ten"}),
                "kind": await s.call_tool("memofs.remember", {"content": "a note", "kind": "fact"}),
                "secret": await s.call_tool("memofs.remember", {"content": "key " + "AKIA" + "IOSFODNN7EXAMPLE"}),
                "anchor": await s.call_tool("memofs.remember", {"content": "a note", "anchors": ["../x"]}),
                "cursor": await s.call_tool("memofs.context", {"section": "recall", "expand": _tamper(cur)}),
                "unknown": await s.call_tool("memofs.forget", {"id": "x"}),
            }
            out["after"] = await s.call_tool("memofs.recall", {"query": "tenant", "limit": 20})
    return out


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("mcp")
    Store.init(root, clock=lambda: NOW)
    return root, anyio.run(_session_calls, root)


def test_list_tools_with_schemas(session) -> None:
    _, out = session
    tools = {t.name: t for t in out["tools"]}
    assert set(tools) == {"memofs.recall", "memofs.context", "memofs.remember", "memofs.consolidate"}
    assert tools["memofs.recall"].input_schema["required"] == ["query"]
    assert tools["memofs.remember"].input_schema["required"] == ["content"]
    assert set(tools["memofs.context"].input_schema["properties"]) >= {"query", "taskType", "maxBytes", "section", "expand"}
    assert tools["memofs.context"].input_schema["properties"]["section"]["enum"] == ["entities", "recall", "recent", "notes"]


def test_remember_recall_context_expand(session) -> None:
    root, out = session
    ids = []
    for res in out["remember"]:
        assert not res.is_error
        ids.append(res.structured_content["id"])
        assert json.loads(res.content[0].text) == res.structured_content
    stored = [json.loads(x)["id"] for x in (root / ".memofs/memory/memories.jsonl").read_text().splitlines()]
    assert stored == ids
    rec = out["recall"].structured_content
    assert len(rec["items"]) == 3 and all(i["id"] in ids for i in rec["items"]) and "explain" in rec["items"][0]
    ctx = out["context"].structured_content
    assert ctx["bytes"] <= 8192 and ctx["text"].startswith("## How to use MemoFS context")
    assert "## Relevant Recall" in ctx["text"]
    exp = out["expand"]
    assert not exp.is_error
    text = exp.structured_content["text"]
    assert "## Relevant Recall (expanded)" in text and all(f"pool size {10 * i} " in text for i in range(7))


@pytest.mark.parametrize("name, expect", [
    ("missing", "MCP_VALIDATION_ERROR: query is required."),
    ("type", "MCP_VALIDATION_ERROR: limit must be an integer in [1, 100]."),
    ("kind", "MCP_VALIDATION_ERROR: kind must be one of: decision, constraint"),
    ("secret", "MEMOFS_WRITE_BLOCKED: Write blocked: content matched 1 secret pattern(s) (aws_access_key_id)."),
    ("anchor", "MCP_VALIDATION_ERROR: anchor path must not contain '..'"),
    ("cursor", "MCP_VALIDATION_ERROR: Expansion cursor was not issued by this memofs process or was tampered with."),
    ("unknown", "MCP_NOT_FOUND: Unknown tool: memofs.forget."),
])
def test_bad_calls_are_tool_errors(session, name: str, expect: str) -> None:
    _, out = session
    res = out["bad"][name]
    assert res.is_error and res.content[0].text.startswith(expect)
    err = res.structured_content["error"]
    assert expect.startswith(err["code"] + ": ") and err["status"] in (400, 404)


def test_refused_writes_stored_nothing(session) -> None:
    _, out = session
    assert len(out["after"].structured_content["items"]) == 7


def test_tools_directly_read_only_and_defaults(tmp_path: Path) -> None:
    store = Store.init(tmp_path, clock=lambda: NOW)
    tools = MemofsTools(LiveStore(store), ContextCache(clock=lambda: 0.0), lambda: NOW, read_only=True)
    with pytest.raises(ToolError, match="read-only") as info:
        tools.call("memofs.remember", {"content": "x y z"})
    assert info.value.code == "MCP_AUTHORIZATION_ERROR"
    rw = MemofsTools(LiveStore(store), ContextCache(clock=lambda: 0.0), lambda: NOW)
    res = rw.call("memofs.remember", {"content": "  OAuth supersedes JWT  ", "ignored": 1})
    assert res["memory"]["text"] == "OAuth supersedes JWT" and res["memory"]["kind"] == "note"
    assert rw.call("memofs.recall", {"query": "oauth"})["items"][0]["id"] == res["id"]
    # a write by another process (here: the store directly) is seen on the next call
    store.remember("JWT tokens expire after 24 hours", now=NOW)
    assert len(rw.call("memofs.recall", {"query": "jwt", "limit": 5})["items"]) == 2
    for args, msg in (({"query": "x", "maxBytes": 10}, "maxBytes"), ({"query": "x", "section": "core"}, "section"),
                      ({"query": "x", "taskType": "x"}, "taskType"), (["not", "an", "object"], "object")):
        with pytest.raises(ToolError, match=msg):
            rw.call("memofs.context", args)
    assert set(TOOLS) == {"memofs.recall", "memofs.context", "memofs.remember", "memofs.consolidate"}
