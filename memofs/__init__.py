"""MemoFS hybrid recall: BM25 + fuzzy overlap + vector similarity, fused and reranked."""

# importing the library changes nothing in the caller's process: the processes memofs starts
# itself (memofs.surfaces: the CLI, the MCP server) set numpy's load-time environment there
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
