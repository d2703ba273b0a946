"""Embedders by spec name, routed through the on-disk :class:`EmbeddingCache`.

``minilm`` -> :class:`LocalEmbedder` (bundled weights, sentence-transformers: the harness
keeps torch, and embeds on a GPU when torch sees one, ``DEVICE = "auto"``), ``static`` -> distilled static
MiniLM, ``lsa`` -> :class:`LSAEmbedder` fitted on the dataset's memory texts, ``none`` ->
lexical only, anything else -> a sentence-transformers model path or name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm
from numpy.typing import NDArray

from memofs.signals.embedders.base import Embedder, empty
from memofs.signals.embedding_cache import EmbeddingCache

DEVICE = "auto"
"""Where sentence-transformers models embed: ``cuda`` when present, else ``cpu`` (nothing needs a GPU)."""


def embed_device() -> str:
    """The device :data:`DEVICE` resolves to on this machine (named in the run manifest)."""
    from memofs.signals.embedders.local import resolve_device

    return resolve_device(DEVICE)


def make_embedder(name: str, corpus_texts: Sequence[str] = ()) -> Embedder | None:
    """The embedder a spec names; ``lsa`` is fitted on ``corpus_texts`` (deterministic seed)."""
    if name == "none":
        return None
    if name == "minilm":
        from memofs.signals.embedders.local import LocalEmbedder

        return LocalEmbedder(device=DEVICE)
    if name == "static":
        from memofs.signals.embedders.static import StaticEmbedder

        return StaticEmbedder()
    if name == "lsa":
        from memofs.signals.embedders.lsa import LSAEmbedder

        return LSAEmbedder(dim=256, seed=0).fit(sorted(set(corpus_texts)))
    from memofs.signals.embedders.local import LocalEmbedder

    return LocalEmbedder(model=name, device=DEVICE)


class CachedEmbedder:
    """An embedder whose every ``encode`` goes through the embedding cache, with an
    in-memory front so per-query calls never touch the disk after a batch warm-up."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self._memo: dict[str, NDArray[np.float32]] = {}

    @property
    def dim(self) -> int:
        return self.inner.dim

    def warm(self, texts: Sequence[str], progress: bool = False, desc: str = "") -> None:
        """Encode ``texts`` through the cache in resumable chunks, with a counting bar."""
        todo = sorted({t for t in texts if t not in self._memo})
        if todo:
            with tqdm(total=len(todo), desc=desc or f"embed [{self.name}]", unit="text", disable=not progress, leave=False) as bar:
                vectors = self.cache.encode(self.inner, todo, on_chunk=bar.update)
            for t, v in zip(todo, vectors, strict=True):
                self._memo[t] = v

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        texts = list(texts)
        if not texts:
            return empty(self.dim)
        self.warm(texts)
        return np.stack([self._memo[t] for t in texts])


def embedding_cache(root: Path) -> EmbeddingCache:
    return EmbeddingCache(root / "embeddings")
