"""Records brought into a store whole (``Store.import_memories``) and a curated entity graph
(``Store.write_graph``, config.json ``autoExtractGraph``): issue 46, item 5, the served store
that holds what the library ranks with."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from memofs.files.memory_lines import memory_to_json
from memofs.files.records import Anchor, GraphEdge, GraphNode, InvalidInputError, Memory
from memofs.graph.entity_graph import EntityGraph
from memofs.graph.extract import RuleBasedExtractor
from memofs.ranking.recall import Recaller
from memofs.signals.embeddings_file import EmbeddingsFile
from memofs.store.project import Store, StoreError, rehydrate

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)
NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
# a sentence the rule-based extractor turns into facts (a "uses" relation)
FACTUAL = "The billing service uses PostgreSQL for the ledger."


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def records(tmp: Path) -> list[Memory]:
    (tmp / "src").mkdir()
    (tmp / "src" / "db.py").write_text("POOL = 20\n")  # changed since the memory was written
    (tmp / "src" / "same.py").write_text("X = 1\n")    # unchanged
    return [
        Memory("ext-1", "Use a pool of 10 connections in src/db.py.", "decision", T0, 0.9, "billing", ("db",),
               (Anchor("src/db.py", sha("POOL = 10\n")),), (), {"entities": ["billing:postgres"]}),
        Memory("ext-2", "The pool size is 20 connections now.", "decision", T0.replace(month=2), 0.95, "billing",
               (), (Anchor("src/same.py", sha("X = 1\n"), (1, 1)),), ("ext-1",)),
        Memory("ext-3", "Deleted module notes.", "note", T0, None, "billing", (),
               (Anchor("src/gone.py", sha("old\n")),)),
    ]


def test_import_keeps_every_record_as_given(tmp_path: Path) -> None:
    mems = records(tmp_path)
    store = Store.init(tmp_path, now=T0)
    store.import_memories(mems)
    loaded = store.load().memories
    assert [memory_to_json(m) for m in loaded] == [memory_to_json(m) for m in mems]
    events = lines(store.paths.events)
    assert [e["metadata"]["id"] for e in events if e["type"] == "memory.created"] == ["ext-1", "ext-2", "ext-3"]
    assert store.missing_derived(loaded) == ([], [])  # nothing for doctor to repair


def test_recorded_anchors_drift_as_the_library_computes_them(tmp_path: Path) -> None:
    """The truth is a Recaller built by hand over the same records and project folder: the
    store's rehydrated ranking (and its stale-anchor penalties) is the same."""
    mems = records(tmp_path)
    store = Store.init(tmp_path, now=T0)
    store.import_memories(mems)
    served = rehydrate(store).recaller.recall("pool connections module", 3, now=NOW, explain=True)
    lib = Recaller(store.recall_config(), anchor_root=tmp_path)
    lib.add(mems)
    truth = lib.recall("pool connections module", 3, now=NOW, explain=True)
    assert [(r.id, r.score) for r in served] == [(r.id, r.score) for r in truth]
    stale = {r.id: [p["reason"] for p in r.explain["penalties"] if p["name"] == "stale_anchor"] for r in served}
    assert stale["ext-1"] and stale["ext-3"] and not stale["ext-2"]  # changed, deleted; unchanged


def test_import_refuses_bad_records_before_writing_anything(tmp_path: Path) -> None:
    mems = records(tmp_path)
    store = Store.init(tmp_path, now=T0)
    store.import_memories(mems[:1])
    before = store.paths.memories.read_bytes()
    bad = {
        "already holds": [mems[0]],
        "given twice": None,
        "project root": [Memory("x1", "t", anchors=(Anchor("../outside.py", sha("a")),))],
        "64 lowercase hex": [Memory("x2", "t", anchors=(Anchor("src/db.py", "ABC"),))],
        "secret": [Memory("x3", "key AKIAIOSFODNN7EXAMPLE here")],
        "kind": [Memory("x4", "t", kind="wish")],
    }
    for why, batch in bad.items():
        if batch is None:  # an id given twice in one batch: the first is not written either
            batch = [Memory("dup", "a"), Memory("dup", "b")]
            why = "already holds"
        with pytest.raises((InvalidInputError, StoreError)) as exc:
            store.import_memories(batch)
        assert "\n" not in str(exc.value) and "memory" in str(exc.value)
        assert store.paths.memories.read_bytes() == before, why


def test_import_stores_the_given_vectors(tmp_path: Path) -> None:
    mems = records(tmp_path)
    store = Store.init(tmp_path, now=T0)
    vecs = np.eye(3, 4, dtype=np.float32)
    store.import_memories(mems, vectors=vecs, embedder_name="hash-4")
    got, skipped = EmbeddingsFile(store.paths.embeddings).load("hash-4", 4)
    assert not skipped
    by_id = {r.id: r.vector for r in got} if isinstance(got, list) else got
    assert set(by_id) == {"ext-1", "ext-2", "ext-3"}
    assert np.allclose(np.asarray(by_id["ext-2"]), vecs[1])
    with pytest.raises(InvalidInputError):
        store.import_memories([Memory("y", "t")], vectors=vecs)  # no embedder name


def test_auto_extract_graph_off_keeps_a_curated_graph(tmp_path: Path) -> None:
    """With ``autoExtractGraph: false`` the graph is exactly the one written (a remember, an
    import and a repair add no extracted fact); by default a write adds the extractor's nodes."""
    nodes, _ = RuleBasedExtractor().extract(FACTUAL)
    assert nodes  # the sentence yields facts, so their absence below means something
    graph = EntityGraph([GraphNode("billing:postgres", "PostgreSQL", aliases=("postgres",)),
                         GraphNode("billing:ledger", "ledger")],
                        [GraphEdge("billing:ledger", "billing:postgres", "uses")])
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    curated = Store.init(tmp_path / "a", now=T0, profile="robust", auto_extract_graph=False)
    curated.write_graph(graph)
    files = [(curated.paths.graph / n).read_bytes() for n in ("nodes.jsonl", "edges.jsonl")]
    curated.remember(FACTUAL, now=T0)
    curated.import_memories([Memory("ext-9", FACTUAL, created_at=T0)])
    assert curated.repair() == []
    assert [(curated.paths.graph / n).read_bytes() for n in ("nodes.jsonl", "edges.jsonl")] == files
    loaded = curated.load_graph()
    assert sorted(n.id for n in loaded.nodes) == ["billing:ledger", "billing:postgres"] and len(list(loaded.edges)) == 1
    cfg = json.loads(curated.paths.config.read_text())
    assert cfg["autoExtractGraph"] is False and cfg["recall"]["profile"] == "robust"

    default = Store.init(tmp_path / "b", now=T0)
    default.write_graph(graph)
    default.remember(FACTUAL, now=T0)
    assert {n.id for n in nodes} <= {n.id for n in default.load_graph().nodes}
    assert "billing:postgres" in {n.id for n in default.load_graph().nodes}  # merged into, not replaced


def test_auto_extract_graph_set_on_an_existing_store_keeps_other_keys(tmp_path: Path) -> None:
    Store.init(tmp_path, now=T0, profile="upstream")
    Store.init(tmp_path, now=T0, auto_extract_graph=False)
    cfg = json.loads((tmp_path / ".memofs" / "config.json").read_text())
    assert cfg["recall"]["profile"] == "upstream" and cfg["autoExtractGraph"] is False


def test_malformed_auto_extract_graph_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    store = Store.init(tmp_path, now=T0)
    cfg = json.loads(store.paths.config.read_text())
    store.paths.config.write_text(json.dumps({**cfg, "autoExtractGraph": "no"}))
    with pytest.raises(StoreError) as exc:
        store.remember("anything", now=T0)
    msg = str(exc.value)
    assert "config.json" in msg and "'autoExtractGraph'" in msg and "\n" not in msg
    assert lines(store.paths.memories) == []  # refused before the write
