"""Embedders for the vector signal: local MiniLM, LSA, static distilled MiniLM, providers.

The names below are imported on first use (PEP 562), not with the package: a CLI process
that asks for one embedder (or none) does not pay for the others' imports (the providers'
HTTP client alone is ~65 ms of every lexical ``memofs recall``, issue 38)."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Embedder": "base", "EmbedderError": "base", "l2_normalise": "base",
    "LocalEmbedder": "local",
    "LSAEmbedder": "lsa",
    "CloudflareEmbedder": "providers", "OpenAIEmbedder": "providers", "RetryPolicy": "providers",
    "VoyageEmbedder": "providers",
    "SafeEmbedder": "select", "select_embedder": "select",
    "StaticEmbedder": "static",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
