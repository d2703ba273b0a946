"""Memory at scale (issue 18, index RSS): loading a block of vectors holds them once, and
gives the rows a naive normalisation gives, bit for bit."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from memofs.signals.vector_index import VectorIndex


def naive_unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def test_a_block_upsert_normalises_in_place_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((500, 24)).astype(np.float32)
    x[7] = 0.0  # a zero row stays zero
    x.flags.writeable = False  # a read-only input (a memory map) is never written
    index = VectorIndex(24)
    index.upsert([f"d{i:03d}" for i in range(500)], x)
    got = index.vectors_of([f"d{i:03d}" for i in range(500)])
    assert got.tobytes() == naive_unit(x).tobytes()
    assert not got.flags.writeable  # a view of the index, read-only
    assert index.vectors_of(["d002", "d001"]).tobytes() == naive_unit(x)[[2, 1]].tobytes()


def test_a_block_upsert_holds_the_vectors_once() -> None:
    n, dim = 20_000, 256
    x = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
    ids = [f"d{i}" for i in range(n)]
    index = VectorIndex(dim)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        index.upsert(ids, x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    capacity = index._mat.nbytes  # the doubled capacity the index allocates
    # the matrix plus the id map and chunk-sized temporaries; a normalised copy of the
    # block and linalg.norm's squared copy (the old path) would add 2 x x.nbytes
    assert peak < capacity + 0.5 * x.nbytes, (peak, capacity, x.nbytes)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_vectors_are_refused_before_anything_is_stored(bad: float) -> None:
    x = np.ones((3, 4), dtype=np.float32)
    x[1, 2] = bad
    index = VectorIndex(4)
    with pytest.raises(ValueError, match="NaN or infinite"):
        index.upsert(["a", "b", "c"], x)
    assert len(index) == 0
