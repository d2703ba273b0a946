"""Process environment for the harness, applied before ranx, numba or torch are imported.

ranx's numba kernels compile for seconds in every fresh process unless numba may write a
cache it can reuse, so ``NUMBA_CACHE_DIR`` points into the project cache. Runs are offline.
The repository root is kept off ``sys.path`` (:func:`keep_repo_root_off_path`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """``$MEMOFS_EVAL_CACHE`` or ``<repo>/.cache`` (embeddings, signals, numba, static tables)."""
    return Path(os.environ.get("MEMOFS_EVAL_CACHE") or REPO / ".cache")


def keep_repo_root_off_path() -> None:
    """Drop the repository root from ``sys.path`` (``python -m`` and ``python -c`` put the
    working directory there). Its folders are installed under other names (``datasets/`` as
    ``memofs_datasets``, ``eval/`` as ``memofs_eval``); reachable from the root, ``datasets/``
    is Hugging Face's ``datasets`` to any library that probes for it (lancedb registers HF types
    once a module named ``datasets`` is importable or imported, then fails on ours)."""
    def here(entry: str) -> Path | None:
        try:
            return Path(entry or os.getcwd()).resolve()
        except OSError:  # a deleted working directory
            return None

    sys.path[:] = [p for p in sys.path if here(p) != REPO]


def setup() -> Path:
    """Set the cache and offline variables (only where unset), keep the repository root off
    ``sys.path`` and return the cache root."""
    keep_repo_root_off_path()
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
