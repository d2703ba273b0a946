"""Rerankers (spec "Fusion", reranker fold; upstream-facts.md section 5).

A reranker scores (query, candidate text) pairs; fusion folds the score in as
``base = (1 - blend) * base + blend * clamp01(rerank)`` with ``blend = 0.5``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from memofs.signals.fuzzy import OverlapIndex, QueryOverlap
from memofs.text.tokenize import tokenize_simple


RERANKERS: tuple[str, ...] = ("deterministic", "cross-encoder")
"""``RecallConfig.reranker``: the spec's token-overlap fallback, or a local cross-encoder
(:class:`~memofs.signals.cross_encoder.OnnxCrossEncoder`, an option beyond the spec)."""


class Reranker(Protocol):
    name: str
    #: True when scoring every document of a corpus is cheap (the harness then caches it);
    #: False for model rerankers that only see the fused candidate pool.
    scores_corpus: bool

    def score(self, query: str, texts: Sequence[str]) -> NDArray[np.float64]:
        """One score per text; larger is more relevant."""
        ...


class DeterministicFallbackReranker:
    """The fuzzy overlap (:mod:`memofs.signals.fuzzy`) of the reranker tokens (no stop-word
    removal): exact 1, containment in either direction 0.25, divided by the number of query
    tokens (upstream section 5: ``tokenOverlapScore(tokenizeSimple(q), tokenizeSimple(d))``).

    :meth:`score` scores given texts (a candidate pool); :meth:`corpus_index` gives the
    same scores for every document of a corpus at once (the harness's signal frames)."""

    name = "deterministic-fallback"
    scores_corpus = True

    def __init__(self, partial: float = 0.25) -> None:
        self.partial = partial

    def score(self, query: str, texts: Sequence[str]) -> NDArray[np.float64]:
        q = QueryOverlap(tokenize_simple(query), self.partial)
        return np.array([q.score(tokenize_simple(t)) for t in texts], dtype=np.float64)

    def corpus_index(self) -> OverlapIndex:
        """An empty index whose :meth:`~OverlapIndex.overlap` of a query text equals
        :meth:`score` of each document it holds."""
        return OverlapIndex(tokenizer=tokenize_simple, partial=self.partial)


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` (any model name or local path), the spec's
    planned upgrade. Logits are squashed with a sigmoid into [0, 1]."""

    scores_corpus = False

    def __init__(self, model: str, *, device: str = "cpu", batch_size: int = 32, max_length: int = 256) -> None:
        from sentence_transformers import CrossEncoder

        self.name = f"cross-encoder:{model}"
        self._model = CrossEncoder(model, device=device, max_length=max_length)
        self.batch_size = batch_size

    def score(self, query: str, texts: Sequence[str]) -> NDArray[np.float64]:
        if not texts:
            return np.zeros(0)
        logits = np.asarray(
            self._model.predict([(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False),
            dtype=np.float64,
        )
        if logits.ndim > 1:  # multi-class heads: take the last ("relevant") logit
            logits = logits[:, -1]
        return 1.0 / (1.0 + np.exp(-logits))


def reranker_for(kind: str, model: str | None = None, *, partial: float = 0.25, max_length: int | None = None) -> Reranker:
    """The reranker ``RecallConfig.reranker`` names: ``deterministic`` (the spec's default) or
    ``cross-encoder`` (``model``: its directory; None reads ``$MEMOFS_RERANKER_MODEL``).
    Nothing loads here: a cross-encoder that cannot load fails at its first score, and
    recall then skips the fold with a warning."""
    if kind == "deterministic":
        return DeterministicFallbackReranker(partial)
    if kind == "cross-encoder":
        from memofs.signals.cross_encoder import OnnxCrossEncoder

        return OnnxCrossEncoder(model, max_length=max_length)
    raise ValueError(f"reranker must be one of {', '.join(RERANKERS)}; got {kind!r}")
