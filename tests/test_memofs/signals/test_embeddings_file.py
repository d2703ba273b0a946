"""embeddings.jsonl persistence: exact round trips, crash and concurrency robustness."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from memofs.signals.embedders import LSAEmbedder
from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile, EmbeddingsFileError, text_sha256
from memofs.signals.vector_index import VectorIndex
from support import REPO_ROOT

REPO = REPO_ROOT


def records(n: int, dim: int = 8, embedder: str = "emb-a", seed: int = 0, prefix: str = "c") -> list[EmbeddingRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        v = rng.standard_normal(dim).astype(np.float32)
        out.append(EmbeddingRecord(
            id=f"{prefix}{i}", vector=v / np.linalg.norm(v), embedder=embedder,
            text_sha256=text_sha256(f"text {i}"), namespace="ns" if i % 2 else "default",
            metadata={"sourcePath": ".memofs/memory/notes.md", "i": i, "tags": ["x", "ü"]},
        ))
    return out


def test_round_trip_is_bit_exact(tmp_path):
    f = EmbeddingsFile(tmp_path / "indexes" / "embeddings.jsonl")
    recs = records(20)
    f.upsert(recs)
    loaded, skipped = f.load("emb-a", 8)
    assert skipped == []
    assert [r.id for r in loaded] == [r.id for r in recs]
    for a, b in zip(loaded, recs):
        assert a.vector.dtype == np.float32 and a.vector.tobytes() == b.vector.tobytes()
        assert (a.namespace, a.metadata, a.text_sha256, a.embedder) == (b.namespace, b.metadata, b.text_sha256, b.embedder)
    line = json.loads(f.path.read_text().splitlines()[0])
    assert set(line) == {"id", "namespace", "embedder", "dim", "text_sha256", "vector", "metadata"}


def test_upsert_replaces_by_id_and_remove(tmp_path):
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(records(5))
    changed = records(1, seed=9)[0]
    f.upsert([changed])
    assert f.remove(["c3", "nope"]) == 1
    loaded, _ = f.load("emb-a", 8)
    assert sorted(r.id for r in loaded) == ["c0", "c1", "c2", "c4"]
    assert next(r for r in loaded if r.id == "c0").vector.tobytes() == changed.vector.tobytes()
    assert len(f.path.read_text().splitlines()) == 4


def test_truncated_last_line_is_skipped_with_one_warning(tmp_path, caplog):
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(records(6))
    data = f.path.read_bytes()
    f.path.write_bytes(data[: len(data) - 40])  # cut into the middle of the last line
    caplog.set_level(logging.WARNING)
    loaded, skipped = f.load("emb-a", 8)
    assert [r.id for r in loaded] == ["c0", "c1", "c2", "c3", "c4"]
    assert [(s.line, s.reason) for s in skipped] == [(6, "truncated")]
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1


def test_corrupt_middle_line_names_file_line_and_field(tmp_path):
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(records(3))
    lines = f.path.read_text().splitlines()
    obj = json.loads(lines[1])
    del obj["text_sha256"]
    lines[1] = json.dumps(obj)
    f.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(EmbeddingsFileError, match=r"e\.jsonl:2: field 'text_sha256'"):
        f.load("emb-a", 8)


def test_other_embedders_and_dims_are_never_mixed(tmp_path):
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(records(3, prefix="a"))
    f.upsert(records(2, embedder="emb-b", prefix="b"))
    f.upsert(records(2, dim=4, prefix="d"))
    loaded, skipped = f.load("emb-a", 8)
    assert sorted(r.id for r in loaded) == ["a0", "a1", "a2"]
    assert sorted((s.id, s.reason) for s in skipped) == [
        ("b0", "other-embedder"), ("b1", "other-embedder"), ("d0", "other-dim"), ("d1", "other-dim")]


class CountingEmbedder:
    """LSA with a call log, so tests see exactly what was embedded."""

    def __init__(self, corpus, name_suffix=""):
        self.inner = LSAEmbedder(dim=4).fit(corpus)
        self.name, self.dim = self.inner.name + name_suffix, self.inner.dim
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return self.inner.encode(texts)


CORPUS = ["red apple pie", "green apple tart", "blue sky today", "grey sky rain", "apple orchard in spring"]


def test_sync_rehydrates_without_embedding_and_embeds_only_changes(tmp_path):
    path = tmp_path / "e.jsonl"
    texts = {f"t{i}": t for i, t in enumerate(CORPUS[:4])}
    emb = CountingEmbedder(CORPUS)
    first = EmbeddingsFile(path).sync(VectorIndex(emb.dim), texts, emb)
    assert first.embedded == 4 and len(emb.calls) == 1

    # "restart": fresh index and embedder object, same file
    emb2 = CountingEmbedder(CORPUS)
    index = VectorIndex(emb2.dim)
    report = EmbeddingsFile(path).sync(index, texts, emb2)
    assert emb2.calls == [] and report.loaded == 4 and len(index) == 4
    q = emb.inner.encode(["apple"])[0]
    assert index.search(q, 1)[0][0] in {"t0", "t1"}

    texts2 = dict(texts, t1="green pear tart", t4=CORPUS[4])
    del texts2["t3"]
    report = EmbeddingsFile(path).sync(index, texts2, emb2)
    assert sorted(emb2.calls[0]) == sorted(["green pear tart", CORPUS[4]])
    assert report.removed == 1 and sorted(index.ids) == ["t0", "t1", "t2", "t4"]
    loaded, _ = EmbeddingsFile(path).load(emb2.name, emb2.dim)
    assert sorted(r.id for r in loaded) == ["t0", "t1", "t2", "t4"]


def test_sync_reembeds_lines_of_another_embedder(tmp_path):
    path = tmp_path / "e.jsonl"
    texts = {"t0": CORPUS[0], "t1": CORPUS[1]}
    EmbeddingsFile(path).sync(VectorIndex(4), texts, CountingEmbedder(CORPUS))
    other = CountingEmbedder(CORPUS, name_suffix="-v2")
    EmbeddingsFile(path).sync(VectorIndex(other.dim), texts, other)
    assert sorted(other.calls[0]) == sorted(texts.values())
    assert {json.loads(l)["embedder"] for l in path.read_text().splitlines()} == {other.name}


WRITER = """
import sys, numpy as np
from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile
path, prefix, n, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
f = EmbeddingsFile(path)
rng = np.random.default_rng(abs(hash(prefix)) % 2**32)
print("ready", flush=True)
for i in range(n):
    f.upsert([EmbeddingRecord(id=f"{prefix}{i}", vector=rng.standard_normal(dim).astype(np.float32),
                              embedder="emb", text_sha256="0" * 64)])
"""


def _writer(path, prefix, n, dim):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), prefix, str(n), str(dim)],
                            stdout=subprocess.PIPE, text=True, env=env)


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "e.jsonl"
    procs = [_writer(path, p, 50, 8) for p in ("p", "q")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    loaded, skipped = EmbeddingsFile(path).load("emb", 8)
    assert skipped == []
    assert sorted(r.id for r in loaded) == sorted([f"p{i}" for i in range(50)] + [f"q{i}" for i in range(50)])


def test_writer_killed_mid_write_leaves_a_readable_file(tmp_path):
    path = tmp_path / "e.jsonl"
    EmbeddingsFile(path).upsert(records(200, dim=384, embedder="emb"))
    proc = _writer(path, "k", 10_000, 384)  # each upsert appends one line of 384 floats
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    loaded, skipped = EmbeddingsFile(path).load("emb", 384)
    # the kill may land inside an append: at most the unacknowledged last line is torn,
    # reported as such; every earlier record loads
    lines = path.read_bytes().count(b"\n") + (0 if path.read_bytes().endswith(b"\n") else 1)
    assert [(s.reason, s.line) for s in skipped] in ([], [("truncated", lines)])
    assert len(loaded) >= 200 and {f"c{i}" for i in range(200)} <= {r.id for r in loaded}
    # the next writer takes the lock, cuts a torn tail and clears the dead writer's temp file
    EmbeddingsFile(path).upsert(records(1, dim=384, embedder="emb", prefix="after"))
    assert not list(tmp_path.glob(".embeddings-tmp-*"))
    again, skipped = EmbeddingsFile(path).load("emb", 384)
    assert skipped == [] and {r.id for r in loaded} | {"after0"} == {r.id for r in again}


# ---------------------------------------------------------------------- append-only writes (issue 18)
def test_upsert_appends_one_line_without_rewriting(tmp_path):
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(records(300))
    before, inode = f.path.read_bytes(), f.path.stat().st_ino
    changed = records(1, seed=9)[0]
    f.upsert([changed])
    after = f.path.read_bytes()
    assert f.path.stat().st_ino == inode and after.startswith(before)  # appended in place, not replaced
    assert after[len(before):].decode() == changed.to_json() + "\n"
    loaded, _ = f.load("emb-a", 8)
    got = {r.id: r for r in loaded}
    assert len(got) == 300 and got["c0"].vector.tobytes() == changed.vector.tobytes()  # the later line wins


def test_upsert_after_a_torn_tail_cuts_it_first(tmp_path):
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(records(3))
    with open(f.path, "ab") as fh:
        fh.write(b'{"id": "c9", "vec')  # a writer killed mid-append
    f.upsert(records(1, prefix="d"))
    loaded, skipped = f.load("emb-a", 8)
    assert [r.id for r in loaded] == ["c0", "c1", "c2", "d0"] and skipped == []


class _Fixed:
    """An embedder that must not be called (every vector is already stored)."""

    name, dim = "emb-a", 8

    def encode(self, texts):
        raise AssertionError("nothing should be embedded")


def test_sync_compacts_superseded_lines_past_the_threshold(tmp_path, monkeypatch):
    import memofs.signals.embeddings_file as ef

    f = EmbeddingsFile(tmp_path / "e.jsonl")
    recs = records(40)
    texts = {r.id: f"text {i}" for i, r in enumerate(recs)}
    f.upsert(recs)
    f.upsert(recs[:9])  # 9 superseded lines: below a quarter of the 40 live ones
    monkeypatch.setattr(ef, "COMPACT_MIN_DEAD", 5)
    f.sync(VectorIndex(8), texts, _Fixed())
    assert len(f.path.read_text().splitlines()) == 49  # not compacted
    f.upsert(recs[9:10])  # 10 superseded = a quarter: compaction
    index = VectorIndex(8)
    f.sync(index, texts, _Fixed())
    lines = [json.loads(x)["id"] for x in f.path.read_text().splitlines()]
    assert sorted(lines) == sorted(texts) and len(index.ids) == 40


_KILL_MID_COMPACTION = """
import os, signal, sys
import memofs.signals.embeddings_file as ef
ef._before_replace = lambda: os.kill(os.getpid(), signal.SIGKILL)
ef.EmbeddingsFile(sys.argv[1]).compact()
"""


def test_kill_9_mid_compaction_loses_nothing_acknowledged(tmp_path):
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(records(50))
    f.upsert(records(20, seed=3))  # acknowledged updates, superseding 20 lines
    want = {r.id: r.vector.tobytes() for r in f.load("emb-a", 8)[0]}
    before = f.path.read_bytes()
    proc = subprocess.run([sys.executable, "-c", _KILL_MID_COMPACTION, str(f.path)], env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))},
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-400:]
    assert list(tmp_path.glob(".embeddings-tmp-*"))  # killed after the temp file, before the rename
    assert f.path.read_bytes() == before  # the old file is whole
    assert f.compact() == 20  # the next compaction finishes the job and clears the leftover
    assert not list(tmp_path.glob(".embeddings-tmp-*"))
    assert {r.id: r.vector.tobytes() for r in f.load("emb-a", 8)[0]} == want
    assert len(f.path.read_text().splitlines()) == 50


# ---------------------------------------------------------------------- the binary sidecar (issue 18)
def _texts(recs):
    return {r.id: f"text {i}" for i, r in enumerate(recs)}


def test_sidecar_stands_for_the_parsed_lines_and_covers_appends(tmp_path):
    recs = records(30)
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(recs)
    parsed = VectorIndex(8)
    f.sync(parsed, _texts(recs), _Fixed())  # full parse: writes the sidecar
    assert f.last_load.from_sidecar is False and f.sidecar.meta.exists()
    g = EmbeddingsFile(tmp_path / "e.jsonl")  # a new process
    index = VectorIndex(8)
    g.sync(index, _texts(recs), _Fixed())
    assert g.last_load.from_sidecar is True and g.last_load.parsed == 0
    for r in recs:
        assert index.vector(r.id).tobytes() == parsed.vector(r.id).tobytes()  # bit-exact from the .npy
    changed = records(1, seed=5)[0]
    g.upsert([changed])  # appended: the sidecar still covers the prefix
    h = EmbeddingsFile(tmp_path / "e.jsonl")
    loaded, _ = h._load("emb-a", 8, use_sidecar=True)[:2]
    assert h.last_load.from_sidecar is True and h.last_load.parsed == 1
    assert loaded["c0"].vector.tobytes() == changed.vector.tobytes()
    assert {i: r.vector.tobytes() for i, r in loaded.items()} == {r.id: r.vector.tobytes() for r in h.load("emb-a", 8)[0]}


@pytest.mark.parametrize("edit", ["same-length", "shorter"])
def test_a_hand_edited_jsonl_rebuilds_the_sidecar(tmp_path, edit):
    recs = records(20)
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(recs)
    f.sync(VectorIndex(8), _texts(recs), _Fixed())
    old_meta = f.sidecar.meta.read_text()
    lines = f.path.read_text().splitlines()
    row = json.loads(lines[3])
    row["vector"][0] = 0.25 if edit == "same-length" else 0.5
    new = json.dumps(row, separators=(",", ":"))
    if edit == "same-length":
        new = new.replace("0.25", "0.25" + "0" * (len(lines[3]) - len(new)), 1) if len(new) < len(lines[3]) else new
    assert (len(new) == len(lines[3])) == (edit == "same-length")
    lines[3] = new
    time.sleep(0.01)  # a later mtime
    f.path.write_text("\n".join(lines) + "\n")  # an editor saving in place: same inode
    g = EmbeddingsFile(tmp_path / "e.jsonl")
    index = VectorIndex(8)
    g.sync(index, _texts(recs), _Fixed())
    assert g.last_load.from_sidecar is False  # stale: parsed again
    want = VectorIndex(8)
    want.upsert(["c3"], np.asarray([row["vector"]], dtype=np.float32), ["ns"])
    assert index.vector("c3").tobytes() == want.vector("c3").tobytes()  # the edited value, not the cached one
    assert f.sidecar.meta.read_text() != old_meta  # rebuilt
    k = EmbeddingsFile(tmp_path / "e.jsonl")
    k.sync(VectorIndex(8), _texts(recs), _Fixed())
    assert k.last_load.from_sidecar is True


def test_a_damaged_or_missing_sidecar_is_only_a_cache(tmp_path):
    recs = records(10)
    f = EmbeddingsFile(tmp_path / "e.jsonl")
    f.upsert(recs)
    f.sync(VectorIndex(8), _texts(recs), _Fixed())
    for npy in tmp_path.glob("e.*.npy"):
        npy.write_bytes(b"not a numpy file")
    g = EmbeddingsFile(tmp_path / "e.jsonl")
    index = VectorIndex(8)
    g.sync(index, _texts(recs), _Fixed())
    want = VectorIndex(8)
    want.upsert([r.id for r in recs], np.vstack([r.vector for r in recs]), [r.namespace for r in recs])
    assert g.last_load.from_sidecar is False and index.vector("c1").tobytes() == want.vector("c1").tobytes()
    assert len({p.name.split(".")[1] for p in tmp_path.glob("e.*.npy")}) == 1  # one generation left, a valid one
    assert EmbeddingsFile(tmp_path / "e.jsonl").sidecar.read("emb-a", 8) is not None
