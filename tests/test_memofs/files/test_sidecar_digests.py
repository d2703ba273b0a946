"""Column digests of the binary sidecars (memofs.files.sidecar, issues 36 and 38): BLAKE3 of
the array's bytes, the same whether computed from the array at write or from the file at
read; a column whose check is deferred is refused on first use when it was altered; the
vector sidecar's fast start never checks (so never reads) the raw vectors."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from blake3 import blake3

from memofs.files.sidecar import Sidecar, column_digest
from memofs.signals.vector_sidecar import VectorSidecar
from memofs.store.project import rehydrate
from support import HashEmbedder


def _columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"m": rng.standard_normal((300, 5)).astype(np.float32), "v": np.arange(11, dtype=np.int64),
            "e": np.zeros((0, 4), dtype=np.float32)}


def test_a_digest_is_blake3_of_the_arrays_bytes() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert column_digest(a) == "blake3:" + blake3(a.tobytes()).hexdigest()
    assert column_digest(a.T) == "blake3:" + blake3(np.ascontiguousarray(a.T).tobytes()).hexdigest()  # C order


def test_read_checks_the_files_bytes_against_the_digest_written(tmp_path: Path) -> None:
    side = Sidecar(None, tmp_path, "x", 1)
    cols = _columns()
    assert side.write(None, cols, {})
    got = side.read()
    assert got is not None
    meta, read, _ = got
    for name, a in cols.items():  # the file-read digest at load is the array digest at write
        assert meta["columns"][name]["digest"] == column_digest(a)
        np.testing.assert_array_equal(read[name], a)


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def _column_file(directory: Path, name: str, col: str) -> Path:
    gen = json.loads((directory / f"{name}.sidecar.json").read_text())["generation"]
    return directory / f"{name}.{gen}.{col}.npy"


def test_an_altered_column_is_refused_now_or_on_first_use_when_deferred(tmp_path: Path) -> None:
    side = Sidecar(None, tmp_path, "x", 1)
    assert side.write(None, _columns(), {})
    _flip_last_byte(_column_file(tmp_path, "x", "m"))
    assert side.read() is None  # checked at read: rebuilt, never trusted
    meta, cols, _ = side.read(defer=("m",))
    np.testing.assert_array_equal(cols.verified("v"), np.arange(11))  # checked columns pass through
    with pytest.raises(ValueError, match=r"x\.[0-9a-f]+\.m\.npy does not match its digest"):
        cols.verified("m")


def test_a_deferred_column_that_is_intact_passes_once(tmp_path: Path) -> None:
    side = Sidecar(None, tmp_path, "x", 1)
    cols = _columns()
    assert side.write(None, cols, {})
    _, read, _ = side.read(defer=("m", "e"))
    np.testing.assert_array_equal(read.verified("m"), cols["m"])
    assert read.verified("e").shape == (0, 4)
    assert not read.deferred


NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _vector_store(tmp_path: Path):
    from memofs.store.project import Store

    s = Store.init(tmp_path, clock=lambda: NOW)
    emb = HashEmbedder()
    for text in ["Postgres uses PgBouncer", "Deploys run on Fridays", "Redis caches sessions"]:
        s.remember(text, embedder=emb, now=NOW)
    rehydrate(s, embedder=emb)  # writes the vector sidecar
    return s


def test_the_fast_start_does_not_check_the_raw_vectors_and_the_general_path_does(tmp_path: Path) -> None:
    s = _vector_store(tmp_path)
    emb = HashEmbedder()
    _flip_last_byte(_column_file(s.paths.embeddings.parent, "embeddings", "vectors"))
    side = VectorSidecar(s.paths.embeddings)
    fast = side.read(emb.name, emb.dim, decode=False)
    assert fast is not None  # ids, unit rows and hashes checked; the raw matrix not yet
    with pytest.raises(ValueError, match="does not match its digest"):
        _ = fast.vectors
    assert side.read(emb.name, emb.dim) is None  # the general path checks everything
    state = rehydrate(s, embedder=emb)  # and a start still ranks from true vectors
    qv = emb.encode(["Postgres"])[0]
    from memofs.signals.vector_index import unit_rows

    want = unit_rows(emb.encode([m.text for m in state.memories]), emb.dim) @ (qv / np.linalg.norm(qv))
    np.testing.assert_allclose(state.recaller._vectors.row_scores(qv), want, atol=1e-6)


def test_the_fast_start_adopts_unit_rows_only_through_their_digest(tmp_path: Path) -> None:
    """The fast start skips the unit-length pass (``digest_checked``): an altered unit
    column must then be refused by its digest, and the start rank from true cosines."""
    s = _vector_store(tmp_path)
    emb = HashEmbedder()
    _flip_last_byte(_column_file(s.paths.embeddings.parent, "embeddings", "unit"))
    assert VectorSidecar(s.paths.embeddings).read(emb.name, emb.dim, decode=False) is None
    state = rehydrate(s, embedder=emb)
    qv = emb.encode(["Postgres"])[0]
    from memofs.signals.vector_index import unit_rows

    want = unit_rows(emb.encode([m.text for m in state.memories]), emb.dim) @ (qv / np.linalg.norm(qv))
    np.testing.assert_allclose(state.recaller._vectors.row_scores(qv), want, atol=1e-6)


def test_the_fast_start_compares_ids_without_decoding_them_and_agrees_with_the_list(tmp_path: Path) -> None:
    s = _vector_store(tmp_path)
    emb = HashEmbedder()
    state = VectorSidecar(s.paths.embeddings).read(emb.name, emb.dim, decode=False)
    assert "ids" not in vars(state)  # not decoded by the read
    ids = [m.id for m in rehydrate(s, embedder=emb).memories]
    candidates = [ids, ids[::-1], ids[:-1], [*ids, "x"], [ids[0] + "é", *ids[1:]], [], [i.upper() for i in ids]]
    for cand in candidates:  # the naive reference: the decoded list's equality
        assert state.has_ids(cand) == (state.ids == cand), cand
    assert state.has_ids(ids)


def test_a_process_forked_after_reading_a_sidecar_can_read_one(tmp_path: Path) -> None:
    """Failed (the child hung) while digests used BLAKE3's multithreaded mode: rayon's
    process-wide pool, started by the parent's read, does not survive a fork."""
    import os
    import time

    side = Sidecar(None, tmp_path, "x", 1)
    big = {"m": np.ones((1 << 16, 64), dtype=np.float32)}  # 16 MiB: a hash large enough to split
    assert side.write(None, big, {})
    assert side.read() is not None  # the parent hashes first
    pid = os.fork()
    if pid == 0:  # the child: read and exit at once, never return into pytest
        os._exit(0 if side.read() is not None else 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("a forked child's sidecar read did not finish in 60 s")


def test_a_deferred_column_whose_file_a_newer_generation_removed_is_still_checked(tmp_path: Path) -> None:
    side = Sidecar(None, tmp_path, "x", 1)
    cols = _columns()
    assert side.write(None, cols, {})
    _, read, _ = side.read(defer=("m",))
    path = _column_file(tmp_path, "x", "m")
    assert side.write(None, {**cols, "m": cols["m"] + 1}, {})  # a writer switches generation
    assert not path.exists()  # the old column's name is gone, its map is not
    np.testing.assert_array_equal(read.verified("m"), cols["m"])  # checked through the map
