"""Which loops run the per-query hot paths: numba's compiled kernels or plain numpy.

Both give the same floats and the same rows (tested equal, ties included); they differ
in what a process pays. The compiled kernels (:mod:`memofs.signals.bm25_kernel`,
:mod:`memofs.ranking.pool_kernel`) are faster per query, but a process pays numba's import
and the first dispatch of each cached kernel once, and compiles them when no cache exists
yet (``reports/performance.md``, "Kernels", measures both sides and the break-even). A
long-lived process (the MCP server, the harness, the benches) earns that back; a one-shot
``memofs recall`` never does.

The choice is per process: ``$MEMOFS_KERNELS`` (``numba`` or ``numpy``) when set, else
what the running surface asked for with :func:`prefer` (the CLI: numpy; ``memofs mcp``:
numba), else numba. numba is optional (the ``kernels`` extra; the harness's ``eval`` extra
brings it through ranx): without it every process runs numpy's loops, which the store
bench measures at 0.39 ms more per recall at 100k memories against 0.54 s less load.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache

BACKENDS = ("numba", "numpy")
ENV = "MEMOFS_KERNELS"

_preferred = "numba"


def prefer(backend: str) -> None:
    """This process's choice when ``$MEMOFS_KERNELS`` is unset."""
    global _preferred
    _preferred = _check(backend, "backend")


@cache
def numba_installed() -> bool:
    """Whether numba can be imported (looked up, not imported: the import is the cost)."""
    return importlib.util.find_spec("numba") is not None


def backend() -> str:
    """``numba`` or ``numpy``: ``$MEMOFS_KERNELS`` when set, else the preferred one, else
    numpy when numba is not installed. ValueError naming the variable when it holds anything
    else, or asks for numba where it is not installed."""
    raw = os.environ.get(ENV, "").strip().lower()
    if raw:
        chosen = _check(raw, ENV)
        if chosen == "numba" and not numba_installed():
            raise ValueError(f"{ENV}=numba but numba is not installed (pip install 'memofs[kernels]')")
        return chosen
    return _preferred if _preferred == "numpy" or numba_installed() else "numpy"


def compiled() -> bool:
    """Whether the hot paths run numba's kernels."""
    return backend() == "numba"


def _check(value: str, name: str) -> str:
    if value not in BACKENDS:
        raise ValueError(f"{name} must be one of {', '.join(BACKENDS)}; got {value!r}")
    return value
