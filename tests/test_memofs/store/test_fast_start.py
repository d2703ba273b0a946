"""The later start (issue 18): a rehydration whose memories and vectors are in their
sidecars adopts the sidecar's normalised matrix as the Recaller's vector index (one map, no
copy) and checks the texts against the vectors with the memories sidecar's hashes. Checked
against independent truth: cosines and rankings of a naive numpy computation, a naive
SHA-256 of every text, a full parse of the files, a naive count of lines."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memofs.signals.embeddings_file import EmbeddingsFile
from memofs.signals.vector_index import VectorIndex, unit_rows
from memofs.store.project import LiveStore, Store, rehydrate
from support import HashEmbedder

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)
TOPICS = ["databases", "caches", "deploy windows", "package managers", "queues", "logging", "tests"]


def naive_cosines(vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
    """cos = a.b / (|a||b|), 0 for a zero vector."""
    v = vectors.astype(np.float64)
    norms = np.linalg.norm(v, axis=1) * np.linalg.norm(q)
    return np.divide(v @ q.astype(np.float64), norms, out=np.zeros(len(v)), where=norms > 0)


def naive_sha(texts: list[str]) -> list[str]:
    return [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.init(tmp_path, clock=lambda: T0)
    emb = HashEmbedder()
    for i in range(60):
        s.remember(f"memory {i} about {TOPICS[i % len(TOPICS)]} and item {i * 7}", embedder=emb,
                   namespace="team-a" if i % 3 == 0 else "default", now=T0 + timedelta(minutes=i))
    return s


def started(store: Store, emb: HashEmbedder | None = None):
    """A first start (writes both sidecars) and then the later start under test."""
    rehydrate(store, embedder=emb or HashEmbedder())
    return rehydrate(store, embedder=emb or HashEmbedder())


# ---------------------------------------------------------------------- the adopted index
def test_the_later_start_adopts_the_sidecar_map_and_scores_like_numpy(store: Store) -> None:
    first = rehydrate(store, embedder=HashEmbedder())
    emb = HashEmbedder()
    later = rehydrate(store, embedder=emb)
    assert emb.encoded == [] and later.embedded == 0 and later.loaded_vectors == 60
    index = later.recaller._vectors
    assert not index._mat.flags.writeable  # the read-only map itself, never copied
    mems = later.memories
    raw = HashEmbedder().encode([m.text for m in mems])
    for q in ("caches and queues", "deploy windows", "item 49"):
        qv = HashEmbedder().encode([q])[0]
        want = naive_cosines(raw, qv)
        got = index.row_scores(qv)
        assert index.rows_of([m.id for m in mems]).tolist() == list(range(60))
        np.testing.assert_allclose(got, want, atol=1e-6)
        # the same rows, bit for bit, as the first start's (parsed) index: same recall
        assert got.tobytes() == first.recaller._vectors.row_scores(qv).tobytes()
        a = [(r.id, r.score) for r in first.recaller.recall(q, 8, now=T0 + timedelta(days=1))]
        b = [(r.id, r.score) for r in later.recaller.recall(q, 8, now=T0 + timedelta(days=1))]
        assert a == b
    hits = index.search(HashEmbedder().encode(["queues"])[0], 5, "team-a")
    team = [m for m in mems if m.namespace == "team-a"]
    qv = HashEmbedder().encode(["queues"])[0]
    naive = sorted(zip(naive_cosines(HashEmbedder().encode([m.text for m in team]), qv), (m.id for m in team)),
                   key=lambda s: (-s[0], s[1]))[:5]
    assert [i for i, _ in hits] == [i for _, i in naive]


def test_an_adopted_index_is_copied_on_its_first_write(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    raw = rng.standard_normal((40, 6)).astype(np.float32)
    raw[5] = 0.0  # a zero row stays zero
    rows = unit_rows(raw, 6)
    rows.flags.writeable = False  # as a memory map comes
    before = rows.copy()
    index = VectorIndex(6)
    ids = [f"d{i:02d}" for i in range(40)]
    index.load_unit_rows(ids, rows, np.arange(40) % 2, ["a", "b"])
    q = rng.standard_normal(6).astype(np.float32)
    np.testing.assert_allclose(index.row_scores(q), naive_cosines(raw, q), atol=1e-6)
    assert index.namespace_of("d03") == "b" and [i for i, _ in index.search(q, 3, "a")] == [
        i for _, i in sorted(((s, i) for s, i, k in zip(naive_cosines(raw, q), ids, range(40)) if k % 2 == 0 and k != 5),
                             key=lambda s: (-s[0], s[1]))[:3]]
    extra = rng.standard_normal((3, 6)).astype(np.float32)
    index.upsert(["d01", "new1", "new2"], extra)  # a replacement and two new rows: copied, then written
    index.remove(["d07"])
    want = {i: r for i, r in zip(ids, raw)}
    want.update({"d01": extra[0], "new1": extra[1], "new2": extra[2]})
    del want["d07"]
    got_ids, got = index.scores(q)
    np.testing.assert_allclose(got, naive_cosines(np.array([want[i] for i in got_ids]), q), atol=1e-6)
    assert sorted(got_ids) == sorted(want)
    assert rows.tobytes() == before.tobytes()  # the map was never written


@pytest.mark.parametrize("bad", ["nan", "not-unit", "duplicate-id", "code"])
def test_load_unit_rows_refuses_rows_it_cannot_trust(bad: str) -> None:
    rows = unit_rows(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), 3)
    ids, codes = ["a", "b", "c", "d"], np.zeros(4, dtype=np.int32)
    if bad == "nan":
        rows[2, 1] = np.nan
    elif bad == "not-unit":
        rows[1] *= 2
    elif bad == "duplicate-id":
        ids[3] = "a"
    else:
        codes[0] = 1
    index = VectorIndex(3)
    with pytest.raises(ValueError):
        index.load_unit_rows(ids, rows, codes, ["default"])
    assert len(index) == 0
    if bad in ("duplicate-id", "code"):  # refused without the unit-length pass as well
        with pytest.raises(ValueError):
            index.load_unit_rows(ids, rows, codes, ["default"], digest_checked=True)
        assert len(index) == 0


def test_in_order_is_the_index_itself_or_a_bit_exact_copy() -> None:
    raw = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    index = VectorIndex(4)
    index.upsert(list("abcde"), raw, ["x", "y", "x", "y", "x"])
    assert index.in_order(list("abcde")) is index
    other = index.in_order(list("edcba"))
    assert other is not index and other.ids == list("edcba")
    assert other.vectors_of(list("abcde")).tobytes() == index.vectors_of(list("abcde")).tobytes()
    assert [other.namespace_of(i) for i in "abcde"] == ["x", "y", "x", "y", "x"]
    with pytest.raises(KeyError):
        index.in_order(["a", "zz"])


# ---------------------------------------------------------------------- texts against vectors
def test_the_load_carries_every_text_hash(store: Store) -> None:
    assert store.load().sha is None  # no memories sidecar yet: parsed (and the sidecar written)
    report = store.load()
    assert report.sha.tolist() == [h.encode() for h in naive_sha([m.text for m in report.memories])]
    rows = [json.loads(x) for x in store.paths.memories.read_text().splitlines()]
    with open(store.paths.memories, "a", encoding="utf-8") as fh:  # lines after the sidecar
        fh.write(json.dumps({**rows[4], "text": "memory 4 rewritten by hand"}) + "\n")
        fh.write(json.dumps({"id": "m_new", "text": "a new memory written by hand"}) + "\n")
    report = store.load()
    assert [m.id for m in report.memories][-2:] == [rows[4]["id"], "m_new"]
    assert report.sha.tolist() == [h.encode() for h in naive_sha([m.text for m in report.memories])]


@pytest.mark.parametrize("edit", ["in-place", "appended-line"])
def test_a_text_edited_by_hand_is_re_embedded(store: Store, edit: str) -> None:
    started(store)
    rows = [json.loads(x) for x in store.paths.memories.read_text().splitlines()]
    target = rows[10]
    new_text = "memory 10 now about something else entirely"
    if edit == "in-place":  # memories sidecar stale: a full parse, no stored hashes
        rows[10] = {**target, "text": new_text}
        store.paths.memories.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:  # sidecar still valid: its hashes plus the parsed line's
        with open(store.paths.memories, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**target, "text": new_text}) + "\n")
    emb = HashEmbedder()
    state = rehydrate(store, embedder=emb)
    assert emb.encoded == [new_text] and state.embedded == 1
    want = unit_rows(HashEmbedder().encode([new_text]), 8)[0]
    assert state.recaller._vectors.vector(target["id"]).tobytes() == want.tobytes()
    again = HashEmbedder()
    rehydrate(store, embedder=again)
    assert again.encoded == []  # stored, and the next start reuses it


def test_a_damaged_unit_matrix_is_dropped_and_rebuilt(store: Store, caplog) -> None:
    started(store)
    d = store.paths.embeddings.parent
    meta = json.loads((d / "embeddings.sidecar.json").read_text())
    unit = d / f"embeddings.{meta['generation']}.unit.npy"
    a = np.load(unit, mmap_mode="r+")
    a[3, 0] = 40.0  # the column's digest (sealed, issue 36 item 7) catches it before the norm check
    a.flush()
    del a
    emb = HashEmbedder()
    with caplog.at_level(logging.WARNING, logger="memofs.embeddings_file"):
        state = rehydrate(store, embedder=emb)
    assert emb.encoded == []  # rebuilt from embeddings.jsonl, nothing encoded again
    assert json.loads((d / "embeddings.sidecar.json").read_text())["generation"] != meta["generation"]
    raw = HashEmbedder().encode([m.text for m in state.memories])
    qv = HashEmbedder().encode(["caches"])[0]
    np.testing.assert_allclose(state.recaller._vectors.row_scores(qv), naive_cosines(raw, qv), atol=1e-6)
    later = rehydrate(store, embedder=HashEmbedder())
    assert not later.recaller._vectors._mat.flags.writeable  # the rebuilt sidecar is adopted again


def test_a_stale_vector_sidecar_is_not_adopted(store: Store) -> None:
    started(store)
    f = EmbeddingsFile(store.paths.embeddings)
    mems = store.load().memories
    vec = HashEmbedder().encode(["something else"])
    from memofs.signals.embeddings_file import EmbeddingRecord, text_sha256

    f.upsert([EmbeddingRecord(id=mems[0].id, vector=vec[0], embedder="hash-test", text_sha256=text_sha256("x"))])
    emb = HashEmbedder()
    state = rehydrate(store, embedder=emb)  # the appended line's hash is not the text's: re-embedded
    assert emb.encoded == [mems[0].text]
    want = unit_rows(HashEmbedder().encode([mems[0].text]), 8)[0]
    assert state.recaller._vectors.vector(mems[0].id).tobytes() == want.tobytes()


def test_an_adopted_map_outlives_a_new_sidecar_generation(store: Store) -> None:
    state = started(store)
    index = state.recaller._vectors
    assert not index._mat.flags.writeable
    d = store.paths.embeddings.parent
    old = json.loads((d / "embeddings.sidecar.json").read_text())["generation"]
    (d / "embeddings.sidecar.json").unlink()  # another process writes a new generation
    rehydrate(store, embedder=HashEmbedder())
    assert not list(d.glob(f"embeddings.{old}.*.npy"))  # the mapped files were unlinked ...
    raw = HashEmbedder().encode([m.text for m in state.memories])
    qv = HashEmbedder().encode(["logging and tests"])[0]
    np.testing.assert_allclose(index.row_scores(qv), naive_cosines(raw, qv), atol=1e-6)  # ... and still read


def test_a_live_store_copies_its_adopted_index_on_the_first_remember(store: Store) -> None:
    started(store)
    live = LiveStore(store, embedder=HashEmbedder())
    assert not live.state().recaller._vectors._mat.flags.writeable
    m = live.remember("a brand new memory about queues and caches", now=T0 + timedelta(hours=5))
    state = live.state()
    assert live.full_loads == 1 and m.id in state.recaller.memories
    assert state.recaller._vectors._mat.flags.writeable  # grown: now a matrix of its own
    qv = HashEmbedder().encode(["queues and caches"])[0]
    raw = HashEmbedder().encode([x.text for x in state.memories])
    np.testing.assert_allclose(state.recaller._vectors.row_scores(qv), naive_cosines(raw, qv), atol=1e-6)
    assert state.recaller.recall("brand new queues", 1, now=T0 + timedelta(days=1))[0].id == m.id


# ---------------------------------------------------------------------- derived-lines checkpoint
def test_the_checkpoint_counts_event_lines_as_a_naive_count_does(store: Store) -> None:
    def saved_events_lines() -> int:
        return json.loads((store.paths.embeddings.parent / "derived.json").read_text())["events"]["lineno"]

    store.checkpoint_derived()
    assert saved_events_lines() == store.paths.events.read_bytes().count(b"\n")
    for i in range(70):  # past a checkpoint taken by remember itself
        store.remember(f"another memory {i}", now=T0 + timedelta(hours=1, seconds=i))
    store.checkpoint_derived()
    assert saved_events_lines() == store.paths.events.read_bytes().count(b"\n")
    events = store.paths.events.read_text().splitlines()
    tmp = store.paths.events.with_suffix(".new")
    tmp.write_text("".join(line + "\n" for line in events[:25]))  # replaced by a shorter file
    tmp.replace(store.paths.events)
    store.checkpoint_derived()
    assert saved_events_lines() == 25
