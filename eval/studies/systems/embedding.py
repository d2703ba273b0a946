"""The vectors every system under test gets: the harness's embedder behind its content-
addressed cache (:mod:`memofs_eval.runs.embed`), so memofs and the foreign systems read the same
MiniLM vectors and a text is encoded once across systems and runs.

The cache is warmed with every text of the dataset in one batch before the first ingest, as
the harness warms it before extraction: a per-call cache lookup reads the cache's files, and
recall latency should measure the system, not the harness's cache."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memofs_datasets.format import Dataset

from memofs_eval._env import cache_root
from memofs.signals.embedding_cache import EmbeddingCache

from memofs_eval.runs.embed import CachedEmbedder, embedding_cache, make_embedder


_CACHES: list[EmbeddingCache] = []  # every cache this process opened: their hit/miss counters


def harness_embedder(name: str, corpus_texts: Sequence[str] = ()) -> CachedEmbedder | None:
    """``name`` as in a harness spec (``minilm``, ``lsa``, ``none``...); None for ``none``."""
    inner = make_embedder(name, list(corpus_texts))
    if inner is None:
        return None
    cache = embedding_cache(cache_root())
    _CACHES.append(cache)
    return CachedEmbedder(inner, cache)


def cache_stats() -> dict[str, int]:
    """Texts the harness's embedding cache answered (``hits``) or encoded (``misses``) in this
    process so far, over every embedder :func:`harness_embedder` made."""
    return {"hits": sum(c.hits for c in _CACHES), "misses": sum(c.misses for c in _CACHES)}


def warmed_embedder(name: str, dataset: Dataset, extra_texts: Iterable[str] = ()) -> CachedEmbedder | None:
    """:func:`harness_embedder` holding the vectors of the memories, the raw query texts and
    ``extra_texts`` (memofs: its rewritten query texts) in memory."""
    emb = harness_embedder(name, [m.text for m in dataset.memories])
    if emb is not None:
        emb.warm([m.text for m in dataset.memories] + [q.text for q in dataset.queries] + list(extra_texts))
    return emb
