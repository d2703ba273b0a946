"""An upstream (TypeScript) MemoFS store, written by these tests in the layout
upstream-facts.md records (section 10: notes.md entries, MemoryEvent lines, graph rows with
``from``/``to``, FsRecallStore embedding lines, config.json ``recall`` keys), made a memofs
store by ``memofs import`` and recalled from through the CLI."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memofs.files.records import Memory
from memofs.graph.entity_graph import EntityGraph
from memofs.signals.embedders.local import DEFAULT_NAME as MINILM
from memofs.signals.embeddings_file import EmbeddingsFile
from memofs.store.project import Store
from memofs.store.upstream import upstream_id
from memofs.surfaces.cli import app

ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}
runner = CliRunner()

PG_ID = "mem_8c1f2e3d4a5b6c7d"
PG_TEXT = "We use Postgres 16 for tenant metadata; pgBouncer runs in transaction mode."
CLI_TS = "2026-07-03T08:30:00.000Z"
CLI_TEXT = "Deploys go out through GitHub Actions on every tag."
# facts section 10, formatTimestampedNote: heading, field lines, blank, content, blank
NOTES = f"""# Notes

Timestamped notes written by MemoFS.

## 2026-07-01T10:00:00.000Z — Tenant database
- kind: decision
- tags: db, tenancy
- confidence: 0.9
- source: memofs
- metadata: {{"id":"{PG_ID}","projectId":"demo","sourceRefs":[{{"sourceType":"document","path":"docs/adr/0003.md"}}],"ticket":"OPS-12"}}

{PG_TEXT}

## {CLI_TS}
- kind: note
- tags: none
- confidence: 1
- writer: alice

{CLI_TEXT}
"""
VEC = [round(float(x), 6) for x in np.random.default_rng(7).standard_normal(384)]


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write_upstream(root: Path, notes: str = NOTES) -> Path:
    """An upstream store as upstream's bootstrap and writeMemory leave it."""
    d = root / ".memofs"
    for sub in ("memory", "events", "graph", "indexes", "snapshots", "tmp"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps({
        "version": "1", "projectId": "demo", "createdAt": "2026-07-01T09:00:00.000Z",
        "updatedAt": "2026-07-01T09:00:00.000Z",
        "memory": {"core": ".memofs/memory/core.md", "notes": ".memofs/memory/notes.md"},
        "events": {"memoryEvents": ".memofs/events/memory-events.jsonl", "conversations": ".memofs/events/conversations.jsonl"},
        "indexes": {"chunks": ".memofs/indexes/chunks.jsonl"},
        "graph": {"nodes": ".memofs/graph/nodes.jsonl", "edges": ".memofs/graph/edges.jsonl"},
        "snapshots": {"index": ".memofs/snapshots/snapshots.jsonl"}}, indent=2))
    (d / "config.json").write_text(json.dumps({
        "runtime": "local", "root": ".", "projectId": "demo", "cloud": {},
        "recall": {"engine": "hybrid", "localEmbeddings": True, "embeddingModel": "Xenova/all-MiniLM-L6-v2"}}))
    (d / "memory" / "core.md").write_text("# Core Memory\n\n## Identity\n\n## Stable Facts\n\n## Preferences\n\n## Constraints\n")
    (d / "memory" / "notes.md").write_text(notes)
    (d / "events" / "memory-events.jsonl").write_text(_jsonl([{
        "id": "evt_1a2b3c4d", "type": "memory.created", "timestamp": "2026-07-01T10:00:00.000Z",
        "sourcePath": ".memofs/memory/notes.md", "actor": {"type": "agent", "id": "memofs"},
        "summary": "Tenant database", "metadata": {"id": PG_ID, "kind": "decision", "tags": ["db", "tenancy"]}}]))
    (d / "events" / "conversations.jsonl").write_text("")
    (d / "graph" / "nodes.jsonl").write_text(_jsonl([
        {"id": "concept:api", "type": "concept", "label": "api", "aliases": [], "confidence": 0.6, "importance": 0.5,
         "status": "active", "metadata": {"extractor": "rule-based"},
         "sourceRefs": [{"sourceType": "note", "sourceId": PG_ID}], "createdAt": "2026-07-01T10:00:00.000Z"},
        {"id": "concept:postgres", "type": "concept", "label": "postgres", "aliases": ["pg"], "confidence": 0.8,
         "importance": 0.9, "status": "active", "createdAt": "2026-07-01T10:00:00.000Z"}]))
    (d / "graph" / "edges.jsonl").write_text(_jsonl([
        {"id": "edge:5f3a9c10", "from": "concept:api", "to": "concept:postgres", "type": "uses", "weight": 0.6,
         "confidence": 0.6, "directed": True, "status": "active", "metadata": {"extractor": "rule-based"}}]))
    (d / "indexes" / "chunks.jsonl").write_text("")
    (d / "indexes" / "embeddings.jsonl").write_text(_jsonl([
        {"id": "_:demo:note:2026-07-01T10_00_00.000Z:0:abcd1234", "text": PG_TEXT, "embedding": VEC,
         "metadata": {"projectId": "demo", "sourceType": "note", "sourceId": "2026-07-01T10:00:00.000Z",
                      "memoryType": "notes", "kind": "decision"},
         "namespace": "default", "updatedAt": "2026-07-01T10:00:01.000Z"},
        {"id": "_:demo:document:core:0:0badf00d", "text": "# Core Memory", "embedding": VEC,
         "metadata": {"projectId": "demo", "sourceType": "document", "sourceId": "core", "memoryType": "core"},
         "namespace": "default", "updatedAt": "2026-07-01T10:00:01.000Z"}]))
    (d / "snapshots" / "snapshots.jsonl").write_text("")
    (d / "connectors.json").write_text('{"connectors": []}')
    return root


def cli(root: Path, *args: str, code: int = 0):
    res = runner.invoke(app, ["--root", str(root), *args], env=ENV)
    assert res.exit_code == code, (args, res.exit_code, res.output, res.exception)
    return res


SIDECAR_CACHES = re.compile(r"\.memofs/indexes/(memories\.|embeddings\.\w+\.|.*sidecar\.json$|derived\.json$)")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every store file but the start-up caches a read may (re)write (memofs.files.sidecar)."""
    return {rel: p.read_bytes() for p in sorted((root / ".memofs").rglob("*"))
            if p.is_file() and not SIDECAR_CACHES.match(rel := str(p.relative_to(root)))}


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    return write_upstream(tmp_path)


def test_import_then_recall_sees_the_same_memories(upstream: Path) -> None:
    res = runner.invoke(app, ["--root", str(upstream), "status"], env=ENV)
    assert "holds 2 upstream MemoFS note(s) not imported; run `memofs import`" in res.output
    out = json.loads(cli(upstream, "import", "--json").stdout)
    cli_id = upstream_id(CLI_TS, CLI_TEXT)
    assert out["memories"] == [PG_ID, cli_id] and out["already_imported"] == 0 and out["embeddings_reused"] == 1
    assert len(out["embeddings_not_reused"]) == 1 and "not a whole memory" in out["embeddings_not_reused"][0]

    hits = json.loads(cli(upstream, "recall", "-q", "postgres tenant metadata", "--json").stdout)["results"]
    top = hits[0]
    assert top["id"] == PG_ID and top["text"] == PG_TEXT and top["kind"] == "decision"
    assert top["created_at"] == "2026-07-01T10:00:00Z" and top["confidence"] == 0.9 and top["tags"] == ["db", "tenancy"]
    assert top["title"] == "Tenant database" and top["source"] == "memofs"
    assert top["sourceRefs"] == [{"sourceType": "document", "path": "docs/adr/0003.md"}]
    assert top["metadata"] == {"projectId": "demo", "ticket": "OPS-12"}
    deploy = json.loads(cli(upstream, "recall", "-q", "deploys github actions", "--json").stdout)["results"][0]
    assert deploy["id"] == cli_id and deploy["writer"] == "alice" and deploy["created_at"] == "2026-07-03T08:30:00Z"
    # the store is healthy: manifest paths added, no warnings about upstream config keys
    res = runner.invoke(app, ["--root", str(upstream), "status", "--json"], env=ENV)
    info = json.loads(res.stdout)
    assert res.exit_code == 0, info["problems"]
    assert info["memories"] == 2 and info["warnings"] == []
    assert info["graph"]["nodes"] >= 2
    # upstream's memory.created event is kept, not repeated; the CLI-written note gets one
    events = [json.loads(x) for x in (upstream / ".memofs/events/memory-events.jsonl").read_text().splitlines()]
    created = [e["metadata"]["id"] for e in events if e["type"] == "memory.created"]
    assert created == [PG_ID, cli_id] and events[0]["id"] == "evt_1a2b3c4d"
    # nothing derived is missing: doctor (events and graph facts of every memory) is clean
    res = runner.invoke(app, ["--root", str(upstream), "doctor"], env=ENV)
    assert res.exit_code == 0, res.output


def test_dry_run_writes_nothing_and_second_import_is_idempotent(upstream: Path) -> None:
    before = snapshot(upstream)
    out = json.loads(cli(upstream, "import", "--dry-run", "--json").stdout)
    assert out["dry_run"] and len(out["memories"]) == 2 and out["changes"]
    assert snapshot(upstream) == before
    cli(upstream, "import")
    after = snapshot(upstream)
    again = json.loads(cli(upstream, "import", "--json").stdout)
    assert again["memories"] == [] and again["already_imported"] == 2 and not again["changes"]
    assert snapshot(upstream) == after
    assert "nothing to do" in cli(upstream, "import").stdout


def test_rewritten_files_are_backed_up_byte_for_byte(upstream: Path) -> None:
    d = upstream / ".memofs"
    originals = {n: (d / n).read_bytes() for n in ("config.json", "manifest.json", "indexes/embeddings.jsonl")}
    cli(upstream, "import")
    for name, data in originals.items():
        assert (d / "upstream" / name).read_bytes() == data, name
    config = json.loads((d / "config.json").read_text())
    assert config["runtime"] == "local" and config["cloud"] == {}  # upstream's other keys kept
    assert config["recall"] == {"engine": "hybrid", "upstream": {"localEmbeddings": True,
                                                                  "embeddingModel": "Xenova/all-MiniLM-L6-v2"}}


def test_upstream_vector_reused_under_the_same_model(upstream: Path) -> None:
    cli(upstream, "import")
    records, skipped = EmbeddingsFile(upstream / ".memofs" / "indexes" / "embeddings.jsonl").load(MINILM, 384)
    assert [r.id for r in records] == [PG_ID] and skipped == []
    np.testing.assert_array_equal(records[0].vector, np.asarray(VEC, dtype=np.float32))


def test_another_model_is_not_reused(tmp_path: Path) -> None:
    root = write_upstream(tmp_path)
    cfg = root / ".memofs" / "config.json"
    cfg.write_text(json.dumps({"recall": {"embeddingModel": "Xenova/bge-small-en-v1.5"}}))
    out = json.loads(cli(root, "import", "--json").stdout)
    assert out["embeddings_reused"] == 0 and all("is not one memofs runs" in s for s in out["embeddings_not_reused"])


def test_upstream_graph_rows_read_as_they_are(upstream: Path) -> None:
    g = EntityGraph.load(upstream / ".memofs" / "graph")
    pg = g.node("concept:postgres")
    assert (pg.confidence, pg.importance, pg.aliases) == (0.8, 0.9, ("pg",))
    assert g.node("concept:api").extra["sourceRefs"] == [{"sourceType": "note", "sourceId": PG_ID}]
    (edge,) = g.edges
    assert (edge.source, edge.type, edge.target) == ("concept:api", "uses", "concept:postgres")
    assert g.entity_state("concept:api") == "uses postgres"
    out = upstream / "saved"
    g.save(out)
    row = json.loads((out / "edges.jsonl").read_text())
    assert row == {"from": "concept:api", "to": "concept:postgres", "type": "uses", "status": "active",
                   "id": "edge:5f3a9c10", "weight": 0.6, "confidence": 0.6, "directed": True,
                   "metadata": {"extractor": "rule-based"}}
    again = EntityGraph.load(out)
    assert again.node("concept:postgres").importance == 0.9 and again.edges[0].extra == edge.extra


def test_upstream_config_keys_mapped_or_reported(tmp_path: Path) -> None:
    Store.init(tmp_path, now=__import__("datetime").datetime(2026, 7, 1, tzinfo=__import__("datetime").timezone.utc))
    cfg = tmp_path / ".memofs" / "config.json"
    cfg.write_text(json.dumps({"recall": {"engine": "lexical", "embeddingModel": "Xenova/all-MiniLM-L6-v2"}}))
    config, notes = Store.open(tmp_path).recall_config_notes()
    assert config.use_vector is False and config.use_bm25 is True
    assert notes == [f"{cfg}: key 'recall.embeddingModel' is upstream MemoFS's embedder setting; memofs ignores it "
                     "(choose the embedder with MEMOFS_EMBEDDER; `memofs import` moves it aside)"]
    cfg.write_text(json.dumps({"recall": {"engine": "vector", "use_bm25": True}}))
    config, _ = Store.open(tmp_path).recall_config_notes()
    assert (config.use_bm25, config.use_fuzzy) == (True, False)  # our own switch wins over the mapping
    cli(tmp_path, "remember", "Redis caches sessions")
    res = runner.invoke(app, ["--root", str(tmp_path), "recall", "-q", "redis"], env=ENV)
    assert res.exit_code == 0 and "redis caches sessions" in res.stdout.lower()
    cfg.write_text(json.dumps({"recall": {"engine": "turbo"}}))
    res = runner.invoke(app, ["--root", str(tmp_path), "recall", "-q", "redis"], env=ENV)
    assert res.exit_code == 1
    assert res.stderr.strip() == (f"memofs: error: {cfg}: key 'recall.engine' must be one of lexical, vector, "
                                  "hybrid, auto; got 'turbo'")


BAD = [
    ("notes", lambda t: t.replace("- confidence: 0.9", "- confidence: high"),
     "notes.md:8: field 'confidence' must be a number; got 'high'"),
    ("notes", lambda t: t.replace("- kind: decision", "- kind: opinion"),
     "notes.md:5: field 'kind' must be one of"),
    ("notes", lambda t: t.replace('"ticket":"OPS-12"}', '"ticket":'),
     "notes.md:10: field 'metadata' is not JSON"),
    ("notes", lambda t: t.replace('"path":"docs/adr/0003.md"', '"path":"/etc/passwd"'),
     "notes.md:5: field 'sourceRefs[0]': 'path' must be relative to the workspace"),
]


@pytest.mark.parametrize(("what", "edit", "message"), BAD)
def test_malformed_notes_give_one_line(tmp_path: Path, what: str, edit, message: str) -> None:
    root = write_upstream(tmp_path, notes=edit(NOTES))
    before = snapshot(root)
    res = runner.invoke(app, ["--root", str(root), "import"], env=ENV)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1, res.output
    assert message in res.stderr and res.stderr.startswith("memofs: error: ")
    assert snapshot(root) == before  # nothing written


def test_malformed_embedding_and_graph_lines_give_one_line(upstream: Path) -> None:
    d = upstream / ".memofs"
    emb = d / "indexes" / "embeddings.jsonl"
    good = emb.read_text()
    emb.write_text('{"id": "x", "text": "t", "embedding": "nope"}\n' + good)
    res = runner.invoke(app, ["--root", str(upstream), "import"], env=ENV)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert f"{emb}:1: field 'embedding' is missing or not a list" in res.stderr
    emb.write_text(good)
    edges = d / "graph" / "edges.jsonl"
    edges.write_text(json.dumps({"from": "concept:api", "to": "concept:nowhere", "type": "uses"}) + "\n"
                     + json.dumps({"from": "concept:api", "to": "concept:postgres", "type": "uses"}) + "\n")
    res = runner.invoke(app, ["--root", str(upstream), "import"], env=ENV)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert f"{edges}:1: field 'target'" in res.stderr
    edges.write_text(json.dumps({"from": "concept:api", "source": "concept:api", "to": "concept:postgres", "type": "uses"}) + "\n")
    res = runner.invoke(app, ["--root", str(upstream), "recall", "-q", "x"], env=ENV)
    assert res.exit_code == 1 and f"{edges}:1: fields 'source' and 'from' both given" in res.stderr
    nodes = d / "graph" / "nodes.jsonl"
    nodes.write_text(json.dumps({"id": "concept:api", "label": "api", "importance": 2}) + "\n")
    edges.write_text("")
    res = runner.invoke(app, ["--root", str(upstream), "import"], env=ENV)
    assert res.exit_code == 1 and f"{nodes}:1: field 'importance' must be a number in [0, 1]; got 2" in res.stderr


def test_note_without_id_gets_a_stable_one() -> None:
    from memofs.files.notes_md import parse_notes
    from memofs.store.upstream import note_to_memory

    (_, note) = parse_notes(NOTES)
    m = note_to_memory(note, "notes.md")
    assert isinstance(m, Memory) and m.id == upstream_id(CLI_TS, CLI_TEXT)
    assert m.confidence == 1.0 and m.tags == () and m.metadata == {"writer": "alice"}


class _SameModel:
    """Stands for our MiniLM (its name and dimension) and counts what it is asked to encode."""

    name, dim = MINILM, 384

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts):
        self.encoded += list(texts)
        return np.ones((len(texts), self.dim), dtype=np.float32) / np.sqrt(self.dim)


def test_rehydration_reuses_the_imported_vector(upstream: Path) -> None:
    from memofs.store.project import rehydrate

    cli(upstream, "import")
    emb = _SameModel()
    state = rehydrate(Store.open(upstream), embedder=emb)
    assert state.loaded_vectors == 1 and emb.encoded == [CLI_TEXT]  # upstream's vector, not re-embedded
    hits = state.recaller.recall("tenant metadata postgres", 2, now=datetime(2026, 7, 4, tzinfo=timezone.utc))
    assert hits[0].id == PG_ID


def test_recall_before_import_says_so(upstream: Path) -> None:
    res = runner.invoke(app, ["--root", str(upstream), "recall", "-q", "postgres"], env=ENV)
    # upstream reaches un-indexed notes only by the phrase scan of notes.md: so does memofs
    assert res.exit_code == 0 and res.stdout.startswith("1. [notes]") and "Postgres 16" in res.stdout
    assert "notes.md holds 2 upstream MemoFS note(s) not imported; run `memofs import`" in res.stderr
    assert "key 'recall.embeddingModel' is upstream MemoFS's embedder setting" in res.stderr


def test_markdown_heading_inside_a_note_is_content() -> None:
    from memofs.files.notes_md import parse_notes

    doc = "# Notes\n\n## 2026-07-01T10:00:00Z\n- kind: reference\n\nRunbook\n\n## Steps\n\n1. drain\n\n## 2026-07-02T10:00:00Z\n- kind: note\n\nNext\n"
    first, second = parse_notes(doc)
    assert first.content == "Runbook\n\n## Steps\n\n1. drain" and second.content == "Next"


def test_index_text_vector_is_named_not_reused(tmp_path: Path) -> None:
    root = write_upstream(tmp_path)
    emb = root / ".memofs" / "indexes" / "embeddings.jsonl"
    row = json.loads(emb.read_text().splitlines()[0])
    row["text"] = "Tenant database\n" + PG_TEXT  # upstream's (title ?? first 80 chars) + "\n" + content
    emb.write_text(json.dumps(row) + "\n")
    out = json.loads(cli(root, "import", "--json").stdout)
    assert out["embeddings_reused"] == 0
    assert out["embeddings_not_reused"] == [f"{emb}:1: {row['id']}: embeds title and text of {PG_ID}; "
                                            "memofs embeds the text alone"]
