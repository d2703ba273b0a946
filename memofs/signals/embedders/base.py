"""The embedder protocol, its error type and the row normalisation every embedder shares.

An embedder maps ``n`` texts to an ``(n, dim)`` float32 matrix whose rows have unit L2
norm, so cosine similarity is a plain dot product:  cos(a, b) = a . b  when |a| = |b| = 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray


class EmbedderError(RuntimeError):
    """An embedder could not load or could not encode (bad weights, provider error, ...)."""


@runtime_checkable
class Embedder(Protocol):
    """``name`` is stable (recorded in reports and cache keys); ``dim`` is the row width."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """``(len(texts), dim)`` float32, L2-normalised rows; empty input gives ``(0, dim)``."""
        ...


def l2_normalise(matrix: NDArray, dim: int | None = None) -> NDArray[np.float32]:
    """Rows divided by their L2 norm, as contiguous float32. All-zero rows stay zero
    (upstream cosine is 0 when a norm is 0, never NaN)."""
    x = np.ascontiguousarray(matrix, dtype=np.float32)
    if x.ndim != 2 or (dim is not None and x.shape[1] != dim):
        want = f"(n, {dim})" if dim is not None else "(n, d)"
        raise EmbedderError(f"expected an embedding matrix of shape {want}, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise EmbedderError("embedding matrix contains NaN or infinite values")
    norms = np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return np.ascontiguousarray(x / norms.astype(np.float32), dtype=np.float32)


def empty(dim: int) -> NDArray[np.float32]:
    """The ``(0, dim)`` result of encoding no texts."""
    return np.zeros((0, dim), dtype=np.float32)
