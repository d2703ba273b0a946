"""Process environment for the harness, applied before ranx, numba or torch are imported.

ranx's numba kernels compile for seconds in every fresh process unless numba may write a
cache it can reuse, so ``NUMBA_CACHE_DIR`` points into the project cache. Runs are offline.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """``$MEMOFS_EVAL_CACHE`` or ``<repo>/.cache`` (embeddings, signals, numba, static tables)."""
    return Path(os.environ.get("MEMOFS_EVAL_CACHE") or REPO / ".cache")


def setup() -> Path:
    """Set the cache and offline variables (only where unset) and return the cache root."""
    root = cache_root()
    (root / "numba").mkdir(parents=True, exist_ok=True)
    defaults = {
        "NUMBA_CACHE_DIR": str(root / "numba"),
        "MEMOFS_CACHE_DIR": str(root),  # the static embedder's distilled table lives here
        "MPLBACKEND": "Agg",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    return root


setup()
