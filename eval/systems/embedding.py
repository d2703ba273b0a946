"""The vectors every system under test gets: the harness's embedder behind its content-
addressed cache (:mod:`memofs_eval.embed`), so memofs and the foreign systems read the same
MiniLM vectors and a text is encoded once across systems and runs."""

from __future__ import annotations

from collections.abc import Sequence

from memofs_eval._env import cache_root
from memofs_eval.embed import CachedEmbedder, embedding_cache, make_embedder


def harness_embedder(name: str, corpus_texts: Sequence[str] = ()) -> CachedEmbedder | None:
    """``name`` as in a harness spec (``minilm``, ``lsa``, ``none``...); None for ``none``."""
    inner = make_embedder(name, list(corpus_texts))
    return CachedEmbedder(inner, embedding_cache(cache_root())) if inner is not None else None
