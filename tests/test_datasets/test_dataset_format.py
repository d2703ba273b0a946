"""The memofs dataset format: validation errors (file, line, field), round trip, content hash, tiny."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pytest

from memofs.ranking.config import DEFAULT_KIND_EXPIRY_DAYS as KIND_EXPIRY_DAYS
from memofs_datasets.format import (
    QUERY_CATEGORIES,
    Dataset,
    DatasetError,
    bundled_datasets,
    load_dataset,
    write_dataset,
)
from support import REPO_ROOT

REPO = REPO_ROOT
TINY = REPO / "datasets" / "tiny"
HEX = "ab" * 32

# --------------------------------------------------------------------------- a minimal valid dataset

TOML = """name = "mini"
version = "0.1"
as_of = "2026-09-01T00:00:00Z"
licence = "MIT"
description = "fixture"

[source_tree]
root = "tree"

[[changes]]
namespace = "a"
path = "src/x.py"
change = "modified"
date = "2026-08-01T00:00:00Z"
"""


def _base() -> dict:
    return {
        "dataset.toml": TOML,
        "memories": [
            {"id": "m1", "text": "use asyncpg for the pool", "kind": "decision", "created_at": "2026-01-01T00:00:00Z",
             "confidence": 0.9, "namespace": "a", "tags": ["db"],
             "anchors": [{"path": "src/x.py", "sha256": HEX, "lines": [1, 3]}], "entities": ["n1"]},
            {"id": "m2", "text": "use psycopg3 for the pool", "kind": "decision", "created_at": "2026-05-01T10:00:00+02:00",
             "namespace": "a", "supersedes": ["m1"], "metadata": {"author": "x"}},
            {"id": "m3", "text": "bundle stays under 250 kB", "kind": "constraint", "created_at": "2026-06-01T00:00:00Z",
             "namespace": "b"},
        ],
        "queries": [
            {"id": "q1", "text": "which postgres driver", "task_type": "coding", "category": "temporal_superseded",
             "split": "tune", "scope": "a", "as_of": "2026-08-01T00:00:00Z", "notes": "m2 supersedes m1"},
            {"id": "q2", "text": "bundle size limit", "task_type": "general", "category": "paraphrase",
             "split": "heldout"},
        ],
        "qrels": ["q1 0 m2 3", "q1 0 m1 1", "q2 0 m3 2"],
        "nodes": [
            {"id": "n1", "label": "asyncpg", "type": "tool", "aliases": ["apg"], "status": "active", "summary": ""},
            {"id": "n2", "label": "psycopg2", "type": "tool", "aliases": [], "status": "retired", "summary": "old"},
        ],
        "edges": [{"source": "n1", "target": "n2", "type": "supersedes", "status": "active"}],
    }


def _write(root: Path, spec: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tree" / "a" / "src").mkdir(parents=True, exist_ok=True)
    (root / "tree" / "a" / "src" / "x.py").write_text("pool = None\n")
    if spec["dataset.toml"] is not None:
        (root / "dataset.toml").write_text(spec["dataset.toml"])
    for name, key in (("memories.jsonl", "memories"), ("queries.jsonl", "queries")):
        if spec[key] is not None:
            (root / name).write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in spec[key]))
    if spec["qrels"] is not None:
        (root / "qrels.tsv").write_text("".join(line + "\n" for line in spec["qrels"]))
    (root / "graph").mkdir(exist_ok=True)
    (root / "graph" / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in spec["nodes"]))
    (root / "graph" / "edges.jsonl").write_text("".join(json.dumps(r) + "\n" for r in spec["edges"]))
    return root


def test_minimal_fixture_loads(tmp_path: Path) -> None:
    ds = load_dataset(_write(tmp_path / "d", _base()))
    assert [m.id for m in ds.memories] == ["m1", "m2", "m3"]
    assert ds.qrels == {"q1": {"m2": 3, "m1": 1}, "q2": {"m3": 2}}
    assert ds.memories[0].anchors[0].lines == (1, 3)
    assert ds.memories[0].metadata["entities"] == ("n1",)
    assert ds.memories[1].created_at == datetime(2026, 5, 1, 8, 0, tzinfo=timezone.utc)
    assert ds.memories[1].metadata == {"author": "x"}
    assert ds.changes[0].change == "modified"
    assert ds.anchor_root("a") == (tmp_path / "d" / "tree" / "a").resolve()
    q1, q2 = ds.queries
    assert [m.id for m in ds.corpus_for(q1)] == ["m1", "m2"]
    assert len(ds.corpus_for(q2)) == 3
    assert ds.now_for(q1) == datetime(2026, 8, 1, tzinfo=timezone.utc)
    assert ds.now_for(q2) == ds.as_of


def _set(key: str, idx: int, field: str, value) -> Callable[[dict], None]:
    def mutate(spec: dict) -> None:
        if value is _DELETE:
            del spec[key][idx][field]
        else:
            spec[key][idx][field] = value
    return mutate


def _line(key: str, idx: int, text: str) -> Callable[[dict], None]:
    def mutate(spec: dict) -> None:
        spec[key][idx] = text
    return mutate


def _toml(old: str, new: str) -> Callable[[dict], None]:
    def mutate(spec: dict) -> None:
        assert old in spec["dataset.toml"]
        spec["dataset.toml"] = spec["dataset.toml"].replace(old, new)
    return mutate


def _anchor(**changes) -> Callable[[dict], None]:
    def mutate(spec: dict) -> None:
        a = spec["memories"][0]["anchors"][0]
        for k, v in changes.items():
            if v is _DELETE:
                del a[k]
            else:
                a[k] = v
    return mutate


_DELETE = object()

# (mutation, file, line, field) -- lines counted by hand on the fixture above
DEFECTS = {
    "invalid json": (_line("memories", 1, '{"id": "m2", "text": '), "memories.jsonl", 2, "json"),
    "not an object": (_line("memories", 2, "[1, 2]"), "memories.jsonl", 3, "json"),
    "missing text": (_set("memories", 0, "text", _DELETE), "memories.jsonl", 1, "text"),
    "mistyped text": (_set("memories", 0, "text", 42), "memories.jsonl", 1, "text"),
    "missing namespace": (_set("memories", 2, "namespace", _DELETE), "memories.jsonl", 3, "namespace"),
    "unknown kind": (_set("memories", 1, "kind", "fact"), "memories.jsonl", 2, "kind"),
    "bad date": (_set("memories", 0, "created_at", "2026-13-01T00:00:00Z"), "memories.jsonl", 1, "created_at"),
    "naive date": (_set("memories", 2, "created_at", "2026-06-01T00:00:00"), "memories.jsonl", 3, "created_at"),
    "missing date": (_set("memories", 2, "created_at", _DELETE), "memories.jsonl", 3, "created_at"),
    "null date": (_set("memories", 2, "created_at", None), "memories.jsonl", 3, "created_at"),
    "confidence > 1": (_set("memories", 0, "confidence", 1.5), "memories.jsonl", 1, "confidence"),
    "confidence < 0": (_set("memories", 0, "confidence", -0.1), "memories.jsonl", 1, "confidence"),
    "confidence string": (_set("memories", 0, "confidence", "high"), "memories.jsonl", 1, "confidence"),
    "duplicate memory id": (_set("memories", 2, "id", "m1"), "memories.jsonl", 3, "id"),
    "unknown memory field": (_set("memories", 1, "anchor", []), "memories.jsonl", 2, "anchor"),
    "tags not strings": (_set("memories", 0, "tags", ["ok", 3]), "memories.jsonl", 1, "tags"),
    "supersedes unknown": (_set("memories", 1, "supersedes", ["m9"]), "memories.jsonl", 2, "supersedes"),
    "supersedes itself": (_set("memories", 1, "supersedes", ["m2"]), "memories.jsonl", 2, "supersedes"),
    "entity unknown": (_set("memories", 0, "entities", ["n9"]), "memories.jsonl", 1, "entities"),
    "anchor missing path": (_anchor(path=_DELETE), "memories.jsonl", 1, "anchors[0].path"),
    "anchor missing sha": (_anchor(sha256=_DELETE), "memories.jsonl", 1, "anchors[0].sha256"),
    "anchor short sha": (_anchor(sha256="abc123"), "memories.jsonl", 1, "anchors[0].sha256"),
    "anchor non-hex sha": (_anchor(sha256="zz" * 32), "memories.jsonl", 1, "anchors[0].sha256"),
    "anchor absolute": (_anchor(path="/etc/passwd"), "memories.jsonl", 1, "anchors[0].path"),
    "anchor dotdot": (_anchor(path="src/../../x.py"), "memories.jsonl", 1, "anchors[0].path"),
    "anchor bad lines": (_anchor(lines=[5, 2]), "memories.jsonl", 1, "anchors[0].lines"),
    "duplicate query id": (_set("queries", 1, "id", "q1"), "queries.jsonl", 2, "id"),
    "query invalid json": (_line("queries", 0, "{not json"), "queries.jsonl", 1, "json"),
    "unknown task_type": (_set("queries", 0, "task_type", "testing"), "queries.jsonl", 1, "task_type"),
    "missing task_type": (_set("queries", 1, "task_type", _DELETE), "queries.jsonl", 2, "task_type"),
    "unknown category": (_set("queries", 1, "category", "misc"), "queries.jsonl", 2, "category"),
    "unknown split": (_set("queries", 1, "split", "train"), "queries.jsonl", 2, "split"),
    "scope without memories": (_set("queries", 1, "scope", "zzz"), "queries.jsonl", 2, "scope"),
    "query naive as_of": (_set("queries", 0, "as_of", "2026-08-01"), "queries.jsonl", 1, "as_of"),
    "qrels 3 columns": (_line("qrels", 1, "q1 m1 1"), "qrels.tsv", 2, "columns"),
    "qrels 5 columns": (_line("qrels", 2, "q2 0 m3 2 x"), "qrels.tsv", 3, "columns"),
    "qrels non-integer": (_line("qrels", 1, "q1 0 m1 x"), "qrels.tsv", 2, "relevance"),
    "qrels fractional": (_line("qrels", 1, "q1 0 m1 1.5"), "qrels.tsv", 2, "relevance"),
    "qrels above 3": (_line("qrels", 0, "q1 0 m2 4"), "qrels.tsv", 1, "relevance"),
    "qrels negative": (_line("qrels", 1, "q1 0 m1 -1"), "qrels.tsv", 2, "relevance"),
    "qrels unknown query": (_line("qrels", 1, "q9 0 m1 1"), "qrels.tsv", 2, "query_id"),
    "qrels unknown memory": (_line("qrels", 1, "q1 0 m9 1"), "qrels.tsv", 2, "memory_id"),
    "qrels outside scope": (_line("qrels", 1, "q1 0 m3 1"), "qrels.tsv", 2, "memory_id"),
    "qrels duplicate": (_line("qrels", 1, "q1 0 m2 2"), "qrels.tsv", 2, "memory_id"),
    "query without relevant": (_line("qrels", 2, "q2 0 m3 0"), "queries.jsonl", 2, "id"),
    "toml naive as_of": (_toml('as_of = "2026-09-01T00:00:00Z"', 'as_of = "2026-09-01T00:00:00"'), "dataset.toml", 3, "as_of"),
    "toml bad as_of": (_toml('as_of = "2026-09-01T00:00:00Z"', 'as_of = "yesterday"'), "dataset.toml", 3, "as_of"),
    "toml missing name": (_toml('name = "mini"\n', ""), "dataset.toml", None, "name"),
    "toml syntax": (_toml('version = "0.1"', "version = "), "dataset.toml", 2, "toml"),
    "toml bad change": (_toml('change = "modified"', 'change = "renamed"'), "dataset.toml", 13, "changes[0].change"),
    "toml change dotdot": (_toml('path = "src/x.py"', 'path = "../x.py"'), "dataset.toml", 12, "changes[0].path"),
    "toml missing tree": (_toml('root = "tree"', 'root = "nope"'), "dataset.toml", 8, "source_tree.root"),
    "node bad status": (lambda s: s["nodes"][1].update(status="gone"), "graph/nodes.jsonl", 2, "status"),
    "edge unknown node": (lambda s: s["edges"][0].update(target="n7"), "graph/edges.jsonl", 1, "target"),
}


@pytest.mark.parametrize("name", list(DEFECTS))
def test_defect_names_file_line_field(tmp_path: Path, name: str) -> None:
    mutate, file, line, field = DEFECTS[name]
    spec = _base()
    mutate(spec)
    root = _write(tmp_path / "d", spec)
    with pytest.raises(DatasetError) as info:
        load_dataset(root)
    err = info.value
    expected_file = str((root / file).resolve())
    assert (err.file, err.line, err.field) == (expected_file, line, field), err.report()
    where = f"{expected_file}:{line}" if line is not None else expected_file
    assert str(err).startswith(f"{where}: {field}: ")


@pytest.mark.parametrize("missing", ["dataset.toml", "memories", "queries", "qrels"])
def test_missing_file(tmp_path: Path, missing: str) -> None:
    spec = _base()
    spec[missing] = None
    root = _write(tmp_path / "d", spec)
    with pytest.raises(DatasetError) as info:
        load_dataset(root)
    assert info.value.field == "file"
    assert Path(info.value.file).name == {"memories": "memories.jsonl", "queries": "queries.jsonl",
                                          "qrels": "qrels.tsv"}.get(missing, missing)


def test_all_defects_collected_first_is_earliest(tmp_path: Path) -> None:
    spec = _base()
    spec["qrels"].append("q2 0 m2 7")  # qrels.tsv:4
    spec["memories"][2]["kind"] = "fact"  # memories.jsonl:3
    spec["queries"][0]["split"] = "dev"  # queries.jsonl:1
    with pytest.raises(DatasetError) as info:
        load_dataset(_write(tmp_path / "d", spec))
    got = [(Path(i.file).name, i.line, i.field) for i in info.value.errors]
    assert got[0] == ("memories.jsonl", 3, "kind")
    # every defect once, in reading order; nothing derived from them (q1's and m3's judgements) is re-reported
    assert got == [("memories.jsonl", 3, "kind"), ("queries.jsonl", 1, "split"), ("qrels.tsv", 4, "relevance")]
    assert "and" in str(info.value) and len(info.value.report().splitlines()) == len(got)


def test_public_flag_relaxes_only_public_rules(tmp_path: Path) -> None:
    spec = _base()
    spec["memories"][2]["created_at"] = None
    spec["queries"][1]["category"] = "beir-test"
    spec["queries"][1]["split"] = None
    root = _write(tmp_path / "d", spec)
    with pytest.raises(DatasetError):
        load_dataset(root)
    ds = load_dataset(root, public=True)
    assert ds.memories[2].created_at is None and ds.queries[1].split is None
    (root / "dataset.toml").write_text(TOML.replace('description = "fixture"', 'description = "fixture"\npublic = true'))
    assert load_dataset(root) == ds
    spec["memories"][2]["created_at"] = "2026-06-01"  # still wrong in public mode: naive
    with pytest.raises(DatasetError) as info:
        load_dataset(_write(tmp_path / "e", spec), public=True)
    assert (info.value.line, info.value.field) == (3, "created_at")


# --------------------------------------------------------------------------- round trip and hash


def _full_equal(a: Dataset, b: Dataset) -> bool:
    """Dataset equality plus the compare=False metadata of memories and queries."""
    return (a == b and [m.metadata for m in a.memories] == [m.metadata for m in b.memories]
            and [q.metadata for q in a.queries] == [q.metadata for q in b.queries])


def test_round_trip(tmp_path: Path) -> None:
    ds = load_dataset(_write(tmp_path / "d", _base()))
    out = write_dataset(ds, tmp_path / "out")
    back = load_dataset(out)
    assert _full_equal(ds, back)
    assert back.memories[1].created_at.utcoffset() == timedelta(hours=2)  # offset preserved, not just the instant
    again = write_dataset(back, tmp_path / "again")
    for f in ("dataset.toml", "memories.jsonl", "queries.jsonl", "qrels.tsv", "graph/nodes.jsonl", "graph/edges.jsonl",
              "tree/a/src/x.py"):
        assert (out / f).read_bytes() == (again / f).read_bytes(), f
    assert ds.content_hash() == back.content_hash()


def test_round_trip_tiny(tmp_path: Path) -> None:
    ds = load_dataset(TINY)
    back = load_dataset(write_dataset(ds, tmp_path / "tiny"))
    assert _full_equal(ds, back)
    assert back.content_hash() == ds.content_hash()
    for f in ("memories.jsonl", "qrels.tsv", "graph/nodes.jsonl"):
        assert (TINY / f).read_bytes() == (tmp_path / "tiny" / f).read_bytes(), f


def test_write_refuses_and_leaves_nothing_on_failure(tmp_path: Path) -> None:
    ds = load_dataset(_write(tmp_path / "d", _base()))
    with pytest.raises(FileExistsError):
        write_dataset(ds, tmp_path / "d")  # not overwritten without consent
    import dataclasses
    broken = dataclasses.replace(ds, root=None)  # source tree cannot be copied
    with pytest.raises(ValueError):
        write_dataset(broken, tmp_path / "out" / "x")
    assert not (tmp_path / "out" / "x").exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_content_hash_sensitivity(tmp_path: Path) -> None:
    root = _write(tmp_path / "d", _base())
    h = load_dataset(root).content_hash()
    assert h == load_dataset(root).content_hash()
    assert len(h) == 64 and int(h, 16) >= 0
    mem = (root / "memories.jsonl").read_text()
    (root / "memories.jsonl").write_text(mem.replace("bundle stays under 250 kB", "bundle stays under 251 kB"))
    assert load_dataset(root).content_hash() != h
    (root / "memories.jsonl").write_text(mem)
    assert load_dataset(root).content_hash() == h
    (root / "qrels.tsv").write_text("q1 0 m2 3\nq1 0 m1 2\nq2 0 m3 2\n")  # one grade changed
    assert load_dataset(root).content_hash() != h
    (root / "qrels.tsv").write_text("q1 0 m2 3\nq1 0 m1 1\nq2 0 m3 2\n")
    (root / "tree" / "a" / "src" / "x.py").write_text("pool = 1\n")  # source tree content counts too
    assert load_dataset(root).content_hash() != h


def test_content_hash_same_in_fresh_interpreter() -> None:
    """Stable across processes: no dependence on hash seeds or dict order of the running process."""
    here = load_dataset(TINY).content_hash()
    code = "from memofs_datasets.format import load_dataset; print(load_dataset(%r).content_hash())" % str(TINY)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == here


# --------------------------------------------------------------------------- the bundled tiny dataset


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_bundled_includes_tiny() -> None:
    found = bundled_datasets()
    assert found["tiny"] == TINY
    assert all((p / "dataset.toml").is_file() for p in found.values())


def test_tiny_loads_and_matches_its_files() -> None:
    ds = load_dataset(TINY)
    mems, qs = _jsonl(TINY / "memories.jsonl"), _jsonl(TINY / "queries.jsonl")
    assert len(ds.memories) == len(mems) and 35 <= len(mems) <= 45
    assert len(ds.queries) == len(qs) and 18 <= len(qs) <= 25
    assert {m["namespace"] for m in mems} == set(ds.namespaces) and len(ds.namespaces) == 2
    assert {q["category"] for q in qs} == set(QUERY_CATEGORIES)  # every category is exercised
    assert {q["task_type"] for q in qs} == {"coding", "debug", "refactor", "docs", "general"}
    assert ds.as_of == datetime(2026, 9, 1, tzinfo=timezone.utc)
    assert len({m.text for m in ds.memories}) == len(ds.memories)
    assert {r for j in ds.qrels.values() for r in j.values()} >= {0, 1, 2, 3}
    assert any(m.supersedes for m in ds.memories)
    assert any(n.status == "retired" for n in ds.graph_nodes)
    # splits partition the queries and carry their own qrels
    tune, held = ds.split("tune"), ds.split("heldout")
    assert len(tune.queries) + len(held.queries) == len(ds.queries)
    assert set(tune.qrels) == {q.id for q in tune.queries}
    with pytest.raises(ValueError):
        ds.split("train")


def test_tiny_source_tree_has_one_modified_and_one_deleted_anchor() -> None:
    """Recomputed from the files: the declared changes are what the tree actually shows."""
    ds = load_dataset(TINY)
    status = {}
    for m in ds.memories:
        for a in m.anchors:
            f = ds.anchor_root(m.namespace) / a.path
            if not f.exists():
                status[(m.namespace, a.path)] = "deleted"
            elif hashlib.sha256(f.read_bytes()).hexdigest() != a.sha256:
                status[(m.namespace, a.path)] = "modified"
            else:
                status[(m.namespace, a.path)] = "fresh"
    changed = {k: v for k, v in status.items() if v != "fresh"}
    assert sorted(changed.values()) == ["deleted", "modified"]
    assert {(c.namespace, c.path): c.change for c in ds.changes} == changed
    assert "fresh" in status.values()


def test_tiny_has_expired_and_fresh_memories() -> None:
    ds = load_dataset(TINY)
    ages = [(m.kind, (ds.as_of - m.created_at).days) for m in ds.memories]
    expired = [k for k, d in ages if k in KIND_EXPIRY_DAYS and d > KIND_EXPIRY_DAYS[k]]
    fresh = [k for k, d in ages if k in KIND_EXPIRY_DAYS and d <= KIND_EXPIRY_DAYS[k]]
    assert "note" in expired and "preference" in expired and fresh
    assert all(m.created_at <= ds.as_of for m in ds.memories)
    scoped = [q for q in ds.queries if q.scope]
    for q in scoped:
        assert all(m.namespace == q.scope for m in ds.corpus_for(q))
        assert set(ds.qrels[q.id]) <= {m.id for m in ds.corpus_for(q)}


def test_agent_memory_meets_its_datasheet():
    """The authored dataset loads and keeps the promised shape."""
    from collections import Counter

    from memofs_datasets.format import bundled_datasets, load_dataset

    ds = load_dataset(bundled_datasets()["agent-memory"])
    real = [m for m in ds.memories if "distractor" not in m.tags]
    assert len(real) >= 500 and len({m.namespace for m in ds.memories}) >= 3
    assert len(ds.queries) >= 250
    cats = Counter(q.category for q in ds.queries)
    assert set(cats) == {
        "identifier", "exact_phrase", "error_code_version", "paraphrase", "abbreviation",
        "temporal_superseded", "temporal_recency", "stale_anchor", "expired_kind", "task_typed",
    }
    assert min(cats.values()) >= 20
    assert {q.split for q in ds.queries} == {"tune", "heldout"}
    assert sum(1 for m in ds.memories if m.supersedes) >= 30
    assert any(n.status in ("retired", "deprecated") for n in ds.graph_nodes)
    kinds = {c.change for c in ds.changes}
    assert kinds == {"modified", "deleted"}


def test_graph_is_scoped_by_namespace_prefix():
    from memofs_datasets.format import bundled_datasets, load_dataset

    ds = load_dataset(bundled_datasets()["agent-memory"])
    nodes, edges = ds.graph_for("atlas")
    assert nodes and all(n.id.startswith("atlas:") for n in nodes)
    ids = {n.id for n in nodes}
    assert all(e.source in ids and e.target in ids for e in edges)
    assert len(ds.graph_for(None)[0]) == len(ds.graph_nodes) > len(nodes)
