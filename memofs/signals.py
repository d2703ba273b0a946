"""Per-query, per-candidate signals: the *extraction* half of the pipeline.

A :class:`SignalFrame` holds one row per document of a corpus for one query: raw BM25,
fuzzy overlap, cosine, rerank overlap, age, confidence, kind, drift and graph flags. It is
produced once per (query, signal settings) by :meth:`memofs.recall.Recaller.signals` and
combined by :func:`memofs.fusion.fuse`, online and in the harness alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from memofs.records import MEMORY_KINDS

#: kind codes: the seven upstream kinds, then "other" (graph documents, unknown kinds)
KIND_CODES: dict[str, int] = {k: i for i, k in enumerate(MEMORY_KINDS)}
OTHER_KIND = len(MEMORY_KINDS)


def kind_code(kind: str) -> int:
    return KIND_CODES.get(kind, OTHER_KIND)


@dataclass
class SignalFrame:
    """Columnar signals, every array aligned with ``ids``.

    Missing values are NaN: ``cosine`` (no vector for that document, or no query vector),
    ``rerank`` (reranker unavailable, failed, or not run for that document), ``age_days``
    (no ``created_at``), ``confidence`` (not given).
    """

    ids: tuple[str, ...]
    order_key: NDArray[np.int64]
    bm25: NDArray[np.float64]
    fuzzy: NDArray[np.float64]
    cosine: NDArray[np.float64]
    rerank: NDArray[np.float64]
    age_days: NDArray[np.float64]
    confidence: NDArray[np.float64]
    kind: NDArray[np.int64]
    stale: NDArray[np.bool_]
    is_graph: NDArray[np.bool_]
    query_text: str = ""
    vector_ok: bool = False
    rerank_ok: bool = False
    stale_reasons: dict[str, str] = field(default_factory=dict)
    entities: tuple = ()
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows: NDArray[np.int64]) -> SignalFrame:
        """The frame restricted to ``rows`` (e.g. a query's scoped corpus)."""
        arr = {
            name: getattr(self, name)[rows]
            for name in ("order_key", "bm25", "fuzzy", "cosine", "rerank", "age_days", "confidence", "kind", "stale", "is_graph")
        }
        ids = tuple(self.ids[i] for i in rows.tolist())
        keep = set(ids)
        return SignalFrame(
            ids=ids,
            **arr,
            query_text=self.query_text,
            vector_ok=self.vector_ok,
            rerank_ok=self.rerank_ok,
            stale_reasons={k: v for k, v in self.stale_reasons.items() if k in keep},
            entities=self.entities,
            notes=list(self.notes),
        )
