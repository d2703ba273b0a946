"""numpy's OpenBLAS workers sleep as soon as they are idle, so they leave MiniLM's cores free.

After each threaded call OpenBLAS keeps its workers spinning for ``2**THREAD_TIMEOUT``
cycles (default 28: about 0.1 s). Recall calls BLAS for the vector cosine (``M @ q``) and
torch's OpenMP threads run the query encode next to it, so on a small machine the two
pools fight for the same cores: an encode right after the cosine runs against a spinning
worker (``reports/performance.md``'s stage profile shows the "query embedding" stage against
a bare encode). ``OPENBLAS_THREAD_TIMEOUT=4`` (OpenBLAS's minimum, ``2**4`` cycles) keeps
the threaded ``M @ q``, which one BLAS thread would slow, and stops the spin.

OpenBLAS reads the variable once, when numpy loads it, so this only takes effect when
``memofs`` is imported before numpy (the CLI, the MCP server, the harness); a value the
user set is kept, and a process that loaded numpy first keeps OpenBLAS's default.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

THREAD_TIMEOUT = "4"
"""OpenBLAS's ``OPENBLAS_THREAD_TIMEOUT`` (log2 of the spin cycles; 4 is its floor)."""


def apply(environ: MutableMapping[str, str] = os.environ, loaded: bool | None = None) -> bool:
    """Set ``OPENBLAS_THREAD_TIMEOUT`` where unset and numpy is not loaded yet; True when it was set."""
    if ("numpy" in sys.modules) if loaded is None else loaded:
        return False
    if "OPENBLAS_THREAD_TIMEOUT" in environ:
        return False
    environ["OPENBLAS_THREAD_TIMEOUT"] = THREAD_TIMEOUT
    return True
