"""VectorIndex against a brute-force pure-Python cosine reference."""

from __future__ import annotations

import math
import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.signals import vector_index as vi
from memofs.signals.vector_index import DimensionError, VectorIndex


def brute_force(items: dict[str, list[float]], q: list[float], k: int, ns_of=None, namespace=None):
    """cos = dot / (|a||b|), 0 if a norm is 0; sort by (-score, id)."""

    def cos(a, b):
        na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
        return 0.0 if na == 0 or nb == 0 else sum(x * y for x, y in zip(a, b)) / (na * nb)

    scored = [(cos(v, q), i) for i, v in items.items() if namespace is None or ns_of[i] == namespace]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [(i, s) for s, i in scored[:k]]


def assert_same_ranking(got, want):
    assert [i for i, _ in got] == [i for i, _ in want]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-6)


def test_ranking_equals_brute_force_with_namespaces_and_removals():
    rng = random.Random(7)
    dim = 12
    items = {f"doc{i:03d}": [rng.gauss(0, 1) for _ in range(dim)] for i in range(300)}
    ns_of = {i: rng.choice(["a", "b", "default"]) for i in items}
    index = VectorIndex(dim, capacity=4)  # forces several growths
    ids = list(items)
    index.upsert(ids, np.array([items[i] for i in ids]), [ns_of[i] for i in ids])
    gone = rng.sample(ids, 60)
    index.remove(gone)
    for i in gone:
        del items[i]
    # replace some vectors in place
    for i in rng.sample(list(items), 20):
        items[i] = [rng.gauss(0, 1) for _ in range(dim)]
        index.upsert([i], np.array([items[i]]), ns_of[i])
    assert len(index) == len(items)
    for _ in range(20):
        q = [rng.gauss(0, 1) for _ in range(dim)]
        for k in (1, 5, 17, 500):
            assert_same_ranking(index.search(np.array(q), k), brute_force(items, q, k))
            assert_same_ranking(index.search(np.array(q), k, "b"), brute_force(items, q, k, ns_of, "b"))


def test_ties_broken_by_id_ascending_at_the_cut():
    index = VectorIndex(2)
    ids = ["e", "c", "a", "d", "b"]
    index.upsert(ids, np.array([[1.0, 0.0]] * 5))
    index.upsert(["z"], np.array([[0.0, 1.0]]))
    assert [i for i, _ in index.search(np.array([1.0, 0.0]), 3)] == ["a", "b", "c"]


@settings(max_examples=60, deadline=None)
@given(
    vecs=st.lists(st.lists(st.integers(-3, 3), min_size=3, max_size=3), min_size=1, max_size=25),
    q=st.lists(st.integers(-3, 3), min_size=3, max_size=3),
    k=st.integers(1, 30),
)
def test_property_small_integer_vectors(vecs, q, k):
    """Integer vectors produce many exact ties and zero vectors."""
    items = {f"id{i:02d}": [float(x) for x in v] for i, v in enumerate(vecs)}
    index = VectorIndex(3)
    index.upsert(list(items), np.array(list(items.values())))
    got = index.search(np.array(q, dtype=float), k)
    want = brute_force(items, [float(x) for x in q], k)
    # exact ties computed in float32 vs float64 may differ in the last bit; compare scores
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
    for (i1, s1), (i2, s2) in zip(got, got[1:]):
        assert s1 > s2 or (s1 == s2 and i1 < i2)


def test_scores_returns_every_cosine():
    index = VectorIndex(2)
    index.upsert(["x", "y", "z"], np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), ["n1", "n2", "n1"])
    ids, s = index.scores(np.array([1.0, 0.0]))
    assert ids == ["x", "y", "z"]
    np.testing.assert_allclose(s, [1.0, 0.0, 1 / math.sqrt(2)], atol=1e-6)
    ids, s = index.scores(np.array([1.0, 0.0]), namespace="n1")
    assert ids == ["x", "z"]
    assert index.search(np.array([1.0, 0.0]), 5, namespace="nope") == []


def test_dimension_errors_and_storage_layout():
    index = VectorIndex(4)
    with pytest.raises(DimensionError):
        index.upsert(["a"], np.ones((1, 3)))
    index.upsert(["a"], np.ones((1, 4)))
    with pytest.raises(DimensionError, match="different dimensions"):
        index.search(np.ones(3), 1)
    assert index._mat.dtype == np.float32 and index._mat.flags.c_contiguous
    np.testing.assert_allclose(index.vector("a"), np.full(4, 0.5))
    assert index.search(np.zeros(4), 1) == [("a", 0.0)]  # zero query -> cosine 0


def test_remove_then_reinsert():
    index = VectorIndex(2)
    index.upsert(["a", "b"], np.eye(2))
    assert index.remove(["a", "missing"]) == 1
    assert index.search(np.array([1.0, 0.0]), 2) == [("b", 0.0)]
    index.upsert(["a"], np.array([[1.0, 0.0]]))
    assert index.search(np.array([1.0, 0.0]), 1) == [("a", 1.0)]
    assert len(index) == 2


def test_rows_of_and_row_scores_align_after_removals():
    from memofs.signals.vector_index import VectorIndex

    rng = np.random.default_rng(3)
    idx = VectorIndex(4)
    ids = [f"v{i}" for i in range(6)]
    idx.upsert(ids, rng.normal(size=(6, 4)))
    idx.remove(["v1", "v4"])
    q = rng.normal(size=4)
    rows = idx.rows_of(["v5", "v1", "v0"])
    assert rows[1] == -1
    got = idx.row_scores(q)[rows[[0, 2]]]
    qn = q / np.linalg.norm(q)
    np.testing.assert_allclose(got, [idx.vector("v5") @ qn, idx.vector("v0") @ qn], rtol=1e-6)
    live = ["v0", "v2", "v3", "v5"]  # the index's own order after the removals (the fast path's case)
    assert idx.rows_of(live).tolist() == [0, 1, 2, 3]
    for r, id_ in zip(idx.rows_of(live).tolist(), live):
        np.testing.assert_allclose(idx.row_scores(q)[r], idx.vector(id_) @ qn, rtol=1e-6)



@pytest.mark.parametrize("ids", [
    ("g:a", "g:b", "v0", "v1", "v2"),  # a start's layout: documents without vectors, then the rows in order
    ["v0", "v1", "v2"],
    ("v0", "v1", "v2", "g:a"),  # the rows first: no tail match
    ("v2", "g:a", "v0", "v1", "v2"),  # a row id before the tail as well
    ("g:a", "v0", "v2", "v1"),  # the tail reordered
    ("g:a", "v1", "v2"),  # the tail cut
    (),
])
def test_rows_of_equals_one_lookup_per_id(ids):
    """Whatever shortcut it takes, rows_of is the naive lookup: each id's row, -1 when absent."""
    idx = VectorIndex(3)
    idx.upsert(["v0", "v1", "v2"], np.eye(3))
    naive = [{"v0": 0, "v1": 1, "v2": 2}.get(i, -1) for i in ids]
    assert idx.rows_of(ids).tolist() == naive

def _mapped_index(tmp_path, rows: np.ndarray) -> VectorIndex:
    """An index over ``rows`` as a start adopts a sidecar's: a read-only ``np.load`` map."""
    np.save(tmp_path / "unit.npy", rows)
    idx = VectorIndex(rows.shape[1])
    n = rows.shape[0]
    idx.load_unit_rows([f"m{i:06d}" for i in range(n)], np.load(tmp_path / "unit.npy", mmap_mode="r"),
                       np.zeros(n, dtype=np.int32), ["default"])
    return idx


def _mapped_resident_kb(path) -> int:
    """Resident KiB of this process's maps of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        if "-" in line.split(" ", 1)[0] and ":" not in line.split(" ", 1)[0]:
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.parametrize("n", [1000, vi.SCAN_ROWS, 3 * vi.SCAN_ROWS + 5])
def test_mapped_scan_ranks_as_the_in_memory_index(tmp_path, n):
    """The block-wise scan of a mapped matrix (issue 38) ranks exactly as the in-memory index
    (one product) over the same unit rows: same ids in the same order for every query; the
    scores are the same bits up to SCAN_ROWS rows and agree to float32 rounding above."""
    rng = np.random.default_rng(n)
    rows = vi.unit_rows(rng.standard_normal((n, 48)).astype(np.float32), 48)
    mapped = _mapped_index(tmp_path, rows)
    plain = VectorIndex(48)  # the same rows, bit for bit, in ordinary memory
    plain.load_unit_rows([f"m{i:06d}" for i in range(n)], rows.copy(), np.zeros(n, dtype=np.int32), ["default"])
    for q in rng.standard_normal((5, 48)).astype(np.float32):
        got, want = mapped.search(q, 50), plain.search(q, 50)
        assert [i for i, _ in got] == [i for i, _ in want]
        s_map, s_plain = mapped.row_scores(q), plain.row_scores(q)
        if n <= vi.SCAN_ROWS:
            assert np.array_equal(s_map, s_plain)
        else:
            np.testing.assert_allclose(s_map, s_plain, rtol=0, atol=1e-6)
            np.testing.assert_allclose(s_map, rows.astype(np.float64) @ (q / np.linalg.norm(q)).astype(np.float64),
                                       rtol=0, atol=1e-5)  # a float64 cosine: independent truth


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_mapped_scan_leaves_at_most_one_block_resident(tmp_path):
    """After the load's unit check and a query, the map holds at most one scan block in
    this process's resident set, not the whole matrix (the pages stay in the page cache)."""
    n, dim = 4 * vi.SCAN_ROWS, 64
    rows = vi.unit_rows(np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32), dim)
    idx = _mapped_index(tmp_path, rows)
    idx.search(rows[123], 5)
    whole_kb = n * dim * 4 // 1024
    assert _mapped_resident_kb(tmp_path / "unit.npy") <= vi.SCAN_ROWS * dim * 4 // 1024 + 8 < whole_kb
    assert idx.search(rows[123], 1)[0][0] == "m000123"  # the dropped pages read back as they were
