"""Per-candidate terms: what fusion's steps 4-8 (spec "Fusion" and "Post-scoring
intelligence") combine, each defined once for both fusions (:mod:`memofs.ranking.fusion`, and
:mod:`memofs.ranking.learned`, whose features are the formula's own terms).

* squashing: ``saturate(s) = max(s, 0) / (max(s, 0) + c)`` and ``clamp01``;
* ``lexical_saturated = clamp01(saturate(lexical, saturation_c))`` (a phrase-scan block: clamped only);
* ``recency = 0.5 ** (age_days / half_life_days)``; ``confidence = clamp01(confidence)``;
* the penalty tests: drift (``stale``), kind decay (``unverified``), ``superseded``.

The final score's rounding is :mod:`memofs.ranking.rounding`'s.

:func:`candidate_terms` computes every term of a pool's rows in one call, so a fusion reads
its inputs here once and combines them in its own module.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from memofs.files.records import MEMORY_KINDS
from memofs.ranking.config import RecallConfig
from memofs.signals.frame import OTHER_KIND, SignalFrame


def saturate(s: ArrayLike, c: float = 2.0) -> NDArray[np.float64]:
    """``saturate(s) = 0 if s <= 0 else s / (s + c)``: maps raw lexical scores into [0, 1).

    ``c`` is the saturation constant (2 in the spec); it must be positive.
    """
    if not c > 0:
        raise ValueError(f"saturation constant must be > 0, got {c!r}")
    x = np.asarray(s, dtype=np.float64)
    pos = np.where(x > 0, x, 0.0)
    return pos / (pos + c)


def clamp01(x: ArrayLike) -> NDArray[np.float64]:
    """Clip to [0, 1]; non-finite values become 0 (upstream ``clamp01``)."""
    a = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(a), np.clip(a, 0.0, 1.0), 0.0)


def lexical_saturated(lexical: NDArray[np.float64], is_phrase: NDArray[np.bool_], cfg: RecallConfig) -> NDArray[np.float64]:
    """``clamp01(saturate(lexical, saturation_c))`` (spec "Fusion"); a phrase-scan block's
    score (block score / 10) is only clamped to [0, 1], as upstream's merge does (facts
    sheet section 2: "not clamped here; the merge clamps it")."""
    sat = clamp01(saturate(lexical, cfg.saturation_c))
    return np.where(is_phrase, clamp01(lexical), sat) if is_phrase.any() else sat


def superseded(frame: SignalFrame, rows: NDArray[np.int64], cfg: RecallConfig) -> NDArray[np.bool_]:
    """Supersession's test: ``rows`` whose memory another memory supersedes (the frame's
    ``superseded`` column), when ``cfg.use_supersession``; fusion multiplies them by
    ``cfg.superseded_penalty``."""
    return frame.superseded[rows] & cfg.use_supersession


def recency(age_days: NDArray[np.float64], half_life_days: float) -> NDArray[np.float64]:
    """``0.5 ** (age_days / half_life)`` (spec "Fusion"); ages clamp at 0; a missing age
    (NaN) gives 0.5; a half-life of 0 gives 1 (upstream)."""
    age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
    out = np.ones_like(age) if half_life_days <= 0 else np.power(0.5, age / half_life_days)
    return np.where(np.isnan(age), 0.5, out)


def confidence(raw: NDArray[np.float64], default: float) -> NDArray[np.float64]:
    """``clamp01(confidence)``, ``default`` where it was not given (NaN) (upstream ``readConfidence``)."""
    return clamp01(np.where(np.isnan(raw), default, raw))


@lru_cache(maxsize=64)
def _expiry_floors(items: tuple[tuple[str, float], ...]) -> NDArray[np.float64]:
    """Expiry floor in days per kind code (infinite for a kind without one)."""
    table = dict(items)
    floors = np.full(OTHER_KIND + 1, np.inf)
    for i, kind in enumerate(MEMORY_KINDS):
        floors[i] = table.get(kind, np.inf)
    return floors


def unverified(age_days: NDArray[np.float64], kind: NDArray[np.int64], cfg: RecallConfig) -> NDArray[np.bool_]:
    """Kind decay's test (vocabulary: :class:`RecallConfig`): *unverified* = older than its
    kind's expiry floor (``cfg.kind_expiry_days``), when ``cfg.use_decay``; a missing age
    (NaN) never is."""
    floors = _expiry_floors(tuple(sorted(cfg.kind_expiry_days.items())))
    return (np.asarray(age_days) > floors[kind]) & cfg.use_decay


@dataclass(frozen=True)
class Terms:
    """The terms of a pool's rows (aligned with them), as :func:`candidate_terms` computes them."""

    cosine: NDArray[np.float64]  # clamp01(cosine)
    lexical_saturated: NDArray[np.float64]
    rerank: NDArray[np.float64]  # clamp01(rerank)
    recency: NDArray[np.float64]
    confidence: NDArray[np.float64]
    stale: NDArray[np.bool_]  # drifted anchor, when use_drift
    unverified: NDArray[np.bool_]
    superseded: NDArray[np.bool_]


def candidate_terms(frame: SignalFrame, rows: NDArray[np.int64], lexical: NDArray[np.float64], cfg: RecallConfig) -> Terms:
    """Every term of ``rows`` (``lexical``: their step-1 lexical scores) under ``cfg``;
    ``neutral_recency_confidence`` gives recency 0.5 and ``default_confidence`` to all
    (upstream's lexical candidates carry neither, facts section 4)."""
    age = frame.age_days[rows]
    if cfg.neutral_recency_confidence:
        rec = np.full(rows.size, 0.5)
        conf = np.full(rows.size, cfg.default_confidence)  # validated in [0, 1]
    else:
        rec = recency(age, cfg.half_life_days)
        conf = confidence(frame.confidence[rows], cfg.default_confidence)
    return Terms(
        cosine=clamp01(frame.cosine[rows]),
        lexical_saturated=lexical_saturated(lexical, frame.is_phrase[rows], cfg),
        rerank=clamp01(frame.rerank[rows]),
        recency=rec,
        confidence=conf,
        stale=frame.stale[rows] & cfg.use_drift,
        unverified=unverified(age, frame.kind[rows], cfg),
        superseded=superseded(frame, rows, cfg),
    )
