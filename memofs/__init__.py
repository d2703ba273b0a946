"""MemoFS hybrid recall: BM25 + fuzzy overlap + vector similarity, fused and reranked."""

import signal as _signal


def quit_on_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C in the ``memofs`` command outside a command's own boundary (the CLI's
    ``_guard``): while its modules import, or after the command is done. One line and exit
    130, never a traceback; every write is crash-safe (as for kill -9), so none is half-done."""
    import os

    os.write(2, b"memofs: interrupted\n")
    os._exit(130)


def _console_script() -> bool:
    import os
    import sys

    return os.path.basename(sys.argv[0] if sys.argv else "") == "memofs"


# first thing, and only in the console script (a library never takes over a signal): the
# CLI's imports take a while, and Ctrl-C during them printed Python's traceback (issue 36)
if _console_script() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, quit_on_interrupt)

# importing the library changes nothing else in the caller's process: the processes memofs
# starts itself (memofs.surfaces: the CLI, the MCP server) set numpy's load-time environment there
__version__ = "0.1.0"

# the front door for library users; loaded on first use so `import memofs` (and every CLI
# start) stays cheap. The deep paths keep working.
_EXPORTS = {
    "Recaller": "memofs.ranking.recall",
    "RecallConfig": "memofs.ranking.config",
    "Memory": "memofs.files.records",
    "Store": "memofs.store.project",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'memofs' has no attribute {name!r}")
