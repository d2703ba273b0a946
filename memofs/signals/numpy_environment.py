"""numpy's load-time environment: two settings numpy reads once, when it is imported.

**OpenBLAS's workers sleep as soon as they are idle, so they leave MiniLM's cores free.**
After each threaded call OpenBLAS keeps its workers spinning for ``2**THREAD_TIMEOUT``
cycles (default 28: about 0.1 s). Recall calls BLAS for the vector cosine (``M @ q``) and
torch's OpenMP threads run the query encode next to it, so on a small machine the two
pools fight for the same cores: an encode right after the cosine runs against a spinning
worker (``reports/performance.md``'s stage profile shows the "query embedding" stage against
a bare encode). ``OPENBLAS_THREAD_TIMEOUT=4`` (OpenBLAS's minimum, ``2**4`` cycles) keeps
the threaded ``M @ q``, which one BLAS thread would slow, and stops the spin.

**numpy does not ask the kernel for transparent huge pages** (``NUMPY_MADVISE_HUGEPAGE=0``,
numpy's documented switch). By default numpy marks every array of 4 MiB or more
``MADV_HUGEPAGE``; where the system's THP ``defrag`` policy is ``madvise`` (this machine's
and many distributions'), the first touch of such an array may compact memory synchronously.
A start builds a handful of arrays of that size (the BM25 weights of every posting, at
100k memories), and in fresh CLI processes on a 100k store the time of that one step varied
about fivefold between identical runs; with the switch off it did not (issue 18's stop-32
note has the runs). Huge pages would save TLB misses on long scans of large arrays, which
a store's arrays are too small to feel.

numpy reads both when it loads, so this only takes effect when ``memofs`` is imported
before numpy (the CLI, the MCP server, the harness); a value the user set is kept, and a
process that loaded numpy first keeps numpy's defaults.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

THREAD_TIMEOUT = "4"
"""OpenBLAS's ``OPENBLAS_THREAD_TIMEOUT`` (log2 of the spin cycles; 4 is its floor)."""

SETTINGS: dict[str, str] = {"OPENBLAS_THREAD_TIMEOUT": THREAD_TIMEOUT, "NUMPY_MADVISE_HUGEPAGE": "0"}
"""What :func:`apply` sets, each only where the user has not."""


def apply(environ: MutableMapping[str, str] = os.environ, loaded: bool | None = None) -> list[str]:
    """Set each of :data:`SETTINGS` where unset, when numpy is not loaded yet; the names set."""
    if ("numpy" in sys.modules) if loaded is None else loaded:
        return []
    done = [name for name in SETTINGS if name not in environ]
    environ.update((name, SETTINGS[name]) for name in done)
    return done
