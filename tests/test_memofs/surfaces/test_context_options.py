"""``memofs.context`` detail/includeCore/includeNotes/includeRecent/includeGraph (facts
section 9: compact and full modes, which sections each holds), through the MCP tool and
the CLI ``context``, checked against the briefing's sections."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memofs.files.records import GraphEdge, GraphNode
from memofs.store.cursor import ContextCache
from memofs.store.project import LiveStore, Store
from memofs.surfaces.cli import app
from memofs.surfaces.mcp_server import MemofsTools, ToolError

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
CORE = "# Core Memory\n\n## Stable Facts\n\n- The billing service is written in Go.\n"
FILLER = " ".join(["Billing invoices are reconciled nightly against the ledger export"] * 14)  # ~900 bytes
ALL = ["directive", "core", "entities", "recall", "recent", "notes"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store.init(tmp_path, clock=lambda: NOW)
    store.write_core(CORE)
    for i in range(12):
        store.remember(f"Billing note {i}: {FILLER} (variant {i})", kind="note", now=NOW)
    graph = store.load_graph()
    graph.upsert_node(GraphNode("billing", "billing", "concept"))
    graph.upsert_node(GraphNode("stripe", "stripe", "tool"))
    graph.upsert_edge(GraphEdge("billing", "stripe", "uses"))
    graph.save(store.paths.graph)
    return store


def tools(store: Store) -> MemofsTools:
    return MemofsTools(LiveStore(store), ContextCache(clock=lambda: 0.0), lambda: NOW)


def names(briefing: dict) -> list[str]:
    return [s["name"] for s in briefing["sections"]]


def test_compact_default_holds_every_section(store: Store) -> None:
    b = tools(store).call("memofs.context", {"query": "billing invoices"})
    assert names(b) == ALL and b["bytes"] <= 8192 and len(b["items"]) == 3 and b["expandable"]
    assert "The billing service is written in Go." in b["text"]


@pytest.mark.parametrize(("flag", "dropped"), [("includeCore", "core"), ("includeRecent", "recent"),
                                               ("includeNotes", "notes"), ("includeGraph", "entities")])
def test_each_include_flag_drops_its_section(store: Store, flag: str, dropped: str) -> None:
    t = tools(store)
    off = t.call("memofs.context", {"query": "billing invoices", flag: False})
    assert names(off) == [n for n in ALL if n != dropped]
    on = t.call("memofs.context", {"query": "billing invoices", flag: True})
    assert names(on) == ALL
    if dropped == "core":
        assert "written in Go" not in off["text"]
    if dropped == "entities":
        assert "## Entities" not in off["text"] and "## Entities" in on["text"]


def test_full_detail_is_every_result_without_cursors(store: Store) -> None:
    t = tools(store)
    full = t.call("memofs.context", {"query": "billing invoices", "detail": "full"})
    # upstream's full mode: recall fetch = limit (default 10), all rendered; no notes unless asked; no cursors
    assert names(full) == ["directive", "core", "entities", "recall", "recent"]
    assert len(full["items"]) == 10 and full["expandable"] == [] and "expand=" not in full["text"]
    assert full["budget"] == 64000 and 8192 < full["bytes"] <= 64000
    recall = next(s for s in full["sections"] if s["name"] == "recall")
    assert recall["shown"] == 10 and recall["omitted"] == 0
    recent = next(s for s in full["sections"] if s["name"] == "recent")
    assert recent["shown"] == 5  # min(limit or 5, 20)
    assert names(t.call("memofs.context", {"query": "billing invoices", "detail": "full", "includeNotes": True})) == ALL
    some = t.call("memofs.context", {"query": "billing invoices", "detail": "full", "limit": 4, "maxBytes": 20000})
    assert len(some["items"]) == 4 and some["budget"] == 20000


@pytest.mark.parametrize(("args", "message"), [
    ({"detail": "verbose"}, "detail must be one of"),
    ({"includeCore": "no"}, "includeCore must be a boolean."),
    ({"includeGraph": 0}, "includeGraph must be a boolean."),
])
def test_bad_options_are_refused(store: Store, args: dict, message: str) -> None:
    with pytest.raises(ToolError) as err:
        tools(store).call("memofs.context", {"query": "billing", **args})
    assert err.value.code == "MCP_VALIDATION_ERROR" and message in str(err.value)


def cli(root: Path, *args: str, code: int = 0):
    res = CliRunner().invoke(app, ["--root", str(root), *args], env={"MEMOFS_EMBEDDER": "none"})
    assert res.exit_code == code, (args, res.output, res.exception)
    return res


def test_cli_context_options(store: Store) -> None:
    root = store.root
    q = ["context", "-q", "billing invoices", "--json"]
    assert names(json.loads(cli(root, *q).stdout)) == ALL
    off = json.loads(cli(root, *q, "--no-include-core", "--no-include-recent", "--no-include-graph",
                         "--no-include-notes").stdout)
    assert names(off) == ["directive", "recall"]
    full = json.loads(cli(root, *q, "--detail", "full", "--include-notes").stdout)
    assert names(full) == ALL and len(full["items"]) == 10 and full["expandable"] == []
    # upstream's --max-chars is the full briefing at that size
    mc = json.loads(cli(root, *q, "--max-chars", "12000").stdout)
    assert mc["budget"] == 12000 and len(mc["items"]) == 10 and mc["bytes"] <= 12000 and mc["expandable"] == []
    assert next(s for s in mc["sections"] if s["name"] == "recall")["shown"] > 3  # compact shows at most 3
    assert json.loads(cli(root, *q, "--max-chars", "4096", "--detail", "compact").stdout)["budget"] == 4096
    res = cli(root, "context", "-q", "x", "--detail", "huge", code=1)
    assert res.stderr.strip() == "memofs: error: --detail must be one of compact, full; got 'huge'"
