"""One ``memories.jsonl`` dialect for store and datasets (issue 35), and one timestamp parser.

The references below are the readers as they were before the codec was shared (copied from
``memofs/store/project.py`` and ``datasets/format.py`` at f9e6fe9, trimmed to what decides a
record), so every line either dialect wrote decodes to the same records as before."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memofs.files import memory_lines
from memofs.files.records import Anchor, Memory
from memofs.files.timestamps import format_iso, parse_iso
from memofs.store.project import Store, StoreError, memory_from_row
from memofs_datasets.format import load_dataset, write_dataset

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc)
_OLD_CORE = ("id", "text", "kind", "created_at", "confidence", "tags", "namespace", "anchors", "supersedes")


def _old_store_memory(row: dict[str, Any]) -> tuple[Memory, dict]:
    """The store's reader at f9e6fe9 on a valid line: anchors without spans, extras on top."""
    created = row.get("created_at")
    conf = row.get("confidence")
    return (Memory(id=row["id"], text=row["text"], kind=row.get("kind", "note"),
                   created_at=None if created is None else datetime.fromisoformat(created.replace("Z", "+00:00")),
                   confidence=None if conf is None else float(conf), namespace=row.get("namespace", "default"),
                   tags=tuple(row.get("tags", [])),
                   anchors=tuple(Anchor(a["path"], a["sha256"]) for a in row.get("anchors", [])),
                   supersedes=tuple(row.get("supersedes", []))),
            {k: v for k, v in row.items() if k not in _OLD_CORE})


def _old_dataset_memory(row: dict[str, Any]) -> tuple[Memory, dict]:
    """The dataset loader at f9e6fe9 on a valid line: metadata nested, entities on top."""
    meta = dict(row.get("metadata", {}))
    if row.get("entities"):
        meta["entities"] = tuple(row["entities"])
    conf = row.get("confidence")
    return (Memory(id=row["id"], text=row["text"], kind=row["kind"], created_at=datetime.fromisoformat(row["created_at"]),
                   confidence=None if conf is None else float(conf), namespace=row["namespace"],
                   tags=tuple(row.get("tags", ())),
                   anchors=tuple(Anchor(a["path"], a["sha256"], tuple(a["lines"]) if "lines" in a else None)
                                 for a in row.get("anchors", ())),
                   supersedes=tuple(row.get("supersedes", ()))), meta)


STORE_LINES = [
    {"id": "mem_1", "text": "use asyncpg", "kind": "decision", "created_at": "2026-03-01T09:30:00Z", "confidence": 0.9,
     "tags": ["db"], "namespace": "default", "anchors": [{"path": "src/db.py", "sha256": "ab" * 32}],
     "supersedes": [], "title": "pool", "metadata": {"ticket": 7}, "sourceRefs": [{"sourceType": "chat"}]},
    {"id": "mem_2", "text": "no ORM", "kind": "constraint", "created_at": "2026-03-02T00:00:00.123456Z",
     "confidence": None, "tags": [], "namespace": "svc/a", "anchors": [], "supersedes": ["mem_1"], "writer": "me"},
    {"id": "mem_3", "text": "minimal line"},
]


@pytest.mark.parametrize("row", STORE_LINES, ids=lambda r: r["id"])
def test_store_lines_decode_as_before(row: dict[str, Any]) -> None:
    m = memory_from_row(json.loads(json.dumps(row)), "memories.jsonl:1")
    want, meta = _old_store_memory(row)
    assert (m, m.anchors, m.metadata) == (want, want.anchors, meta)
    if set(_OLD_CORE) <= set(row):  # a line as the store writes it is written back unchanged
        assert memory_lines.memory_to_json(m) == row


def test_store_refusals_still_name_file_line_and_field() -> None:
    with pytest.raises(StoreError, match=r"^m\.jsonl:4: field 'created_at' is not an ISO timestamp with timezone"):
        memory_from_row({"id": "a", "text": "t", "created_at": "2026-03-01T00:00:00"}, "m.jsonl:4")
    with pytest.raises(StoreError, match=r"^m\.jsonl:2: field 'title' has 600 characters"):
        memory_from_row({"id": "a", "text": "t", "title": "x" * 600}, "m.jsonl:2")


NESTED_LINES = [
    {"id": "m1", "text": "use asyncpg for the pool", "kind": "decision", "created_at": "2026-01-01T00:00:00Z",
     "confidence": 0.9, "namespace": "a", "tags": ["db"], "anchors": [{"path": "src/x.py", "sha256": "ab" * 32,
                                                                       "lines": [1, 3]}], "entities": ["n1"]},
    {"id": "m2", "text": "use psycopg3 for the pool", "kind": "decision", "created_at": "2026-05-01T10:00:00+02:00",
     "namespace": "a", "supersedes": ["m1"], "metadata": {"author": "x", "session": 3}},
]
TOML = 'name = "d"\nversion = "1"\nas_of = "2026-09-01T00:00:00Z"\nlicence = "MIT"\ndescription = "x"\n'


def _dataset(root: Path, toml: str, memories: str, ids: list[str]) -> Path:
    root.mkdir(parents=True)
    (root / "dataset.toml").write_text(toml)
    (root / "memories.jsonl").write_text(memories)
    (root / "queries.jsonl").write_text(json.dumps({"id": "q1", "text": "pool", "task_type": "general",
                                                    "category": "paraphrase", "split": "tune"}) + "\n")
    (root / "qrels.tsv").write_text("".join(f"q1 0 {i} 1\n" for i in ids))
    (root / "graph").mkdir()
    (root / "graph" / "nodes.jsonl").write_text(json.dumps({"id": "n1", "label": "asyncpg"}) + "\n")
    return root


def test_nested_dataset_lines_decode_as_before(tmp_path: Path) -> None:
    """A format-1 dataset (no ``format`` key) still nests metadata: the same records as before."""
    text = "".join(json.dumps(r) + "\n" for r in NESTED_LINES)
    ds = load_dataset(_dataset(tmp_path / "d", TOML, text, ["m1", "m2"]))
    want = [_old_dataset_memory(r) for r in NESTED_LINES]
    assert [(m, m.anchors, m.created_at.utcoffset(), m.metadata) for m in ds.memories] == \
        [(w, w.anchors, w.created_at.utcoffset(), meta) for w, meta in want]


def test_a_store_file_is_a_dataset_file_and_back(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "src").mkdir(parents=True)
    (project / "src" / "db.py").write_text("pool = 1\n")
    store = Store.init(project, clock=lambda: T0)
    store.remember("use asyncpg for the pool", kind="decision", confidence=0.8, tags=["db"], anchors=["src/db.py"],
                   title="pool", metadata={"ticket": 7}, source_refs=[{"sourceType": "chat", "path": "a.md"}])
    store.remember("no ORM on the posting path", kind="constraint", namespace="svc",
                   now=datetime.fromisoformat("2026-03-02T08:00:00+02:00"))  # written as UTC, as always
    stored = list(store.load(sidecar=False).memories)
    raw = store.paths.memories.read_bytes()
    assert b'"created_at":"2026-03-02T06:00:00Z"' in raw

    ds = load_dataset(_dataset(tmp_path / "d", TOML + "format = 2\n", raw.decode(), [m.id for m in stored]))
    assert [(m, m.anchors, m.metadata) for m in ds.memories] == [(m, m.anchors, m.metadata) for m in stored]

    out = write_dataset(ds, tmp_path / "out")
    assert (out / "memories.jsonl").read_bytes() == raw  # one dialect: the same bytes
    back = [memory_from_row(json.loads(line), f"x:{i}") for i, line in enumerate(raw.decode().splitlines(), 1)]
    assert [(m, m.anchors, m.metadata) for m in back] == [(m, m.anchors, m.metadata) for m in stored]

    # and a store reads the exported file as its own
    shutil.copy(out / "memories.jsonl", store.paths.memories)
    again = list(Store.open(project).load(sidecar=False).memories)
    assert [(m, m.metadata) for m in again] == [(m, m.metadata) for m in stored]


def test_a_dataset_with_spans_and_entities_round_trips_through_the_store_reader(tmp_path: Path) -> None:
    text = "".join(json.dumps(r) + "\n" for r in NESTED_LINES)
    ds = load_dataset(_dataset(tmp_path / "d", TOML, text, ["m1", "m2"]))
    for m in ds.memories:
        line = json.loads(json.dumps(memory_lines.memory_to_json(m)))
        got = memory_from_row(line, "x:1")
        assert (got, got.anchors, got.created_at.utcoffset()) == (m, m.anchors, m.created_at.utcoffset())
        assert {**got.metadata, "entities": tuple(got.metadata.get("entities", ()))} == \
            {**m.metadata, "entities": tuple(m.metadata.get("entities", ()))}


# --------------------------------------------------------------------------- timestamps

def _old_store_parse(value: Any) -> datetime:
    if not isinstance(value, str):
        raise TypeError(type(value).__name__)
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError("timestamp has no timezone")
    return dt


def _old_dataset_parse(value: Any) -> datetime:
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(value) if isinstance(value, str) else None
    if dt is None:
        raise ValueError(type(value).__name__)
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("naive")
    return dt


CASES = ["2026-03-01T00:00:00Z", "2026-03-01T00:00:00.123456Z", "2026-03-01T10:00:00+02:00", "2026-03-01T00:00:00+0530",
         "20260301T000000Z", "2026-03-01 00:00Z", "2026-03-01T00:00:00", "2026-03-01", "2026-03-01T00:00:00z",
         "yesterday", "", "Z", 1_700_000_000, None, 1.5]


def _outcome(fn: Any, value: Any) -> object:
    try:
        return fn(value)
    except (TypeError, ValueError):
        return "refused"


@pytest.mark.parametrize("value", CASES, ids=repr)
def test_one_parser_accepts_and_refuses_what_both_did(value: Any) -> None:
    got = _outcome(parse_iso, value)
    assert got == _outcome(_old_store_parse, value) == _outcome(_old_dataset_parse, value)
    if got != "refused":
        assert got.utcoffset() == _old_dataset_parse(value).utcoffset()


def test_datetime_values_from_toml_are_accepted_when_aware() -> None:
    assert parse_iso(T0) is T0
    with pytest.raises(ValueError, match="no timezone"):
        parse_iso(datetime(2026, 3, 1))


def test_format_iso_keeps_the_offset_and_writes_z_for_utc() -> None:
    plus2 = datetime.fromisoformat("2026-05-01T10:00:00+02:00")
    assert format_iso(plus2) == "2026-05-01T10:00:00+02:00"
    assert format_iso(T0) == "2026-03-01T09:30:00Z"
    assert parse_iso(format_iso(plus2)).utcoffset() == plus2.utcoffset()
