"""Score squashing used by fusion (spec "Signal 1" and "Fusion")."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def saturate(s: ArrayLike, c: float = 2.0) -> NDArray[np.float64]:
    """``saturate(s) = 0 if s <= 0 else s / (s + c)``: maps raw lexical scores into [0, 1).

    ``c`` is the saturation constant (2 in the spec); it must be positive.
    """
    if not c > 0:
        raise ValueError(f"saturation constant must be > 0, got {c!r}")
    x = np.asarray(s, dtype=np.float64)
    pos = np.where(x > 0, x, 0.0)
    return pos / (pos + c)


def clamp01(x: ArrayLike) -> NDArray[np.float64]:
    """Clip to [0, 1]; non-finite values become 0 (upstream ``clamp01``)."""
    a = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(a), np.clip(a, 0.0, 1.0), 0.0)
