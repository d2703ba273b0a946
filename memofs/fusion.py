"""Score combination: the *fusion* half of the pipeline (spec "Fusion" and
"Post-scoring intelligence"). One implementation, vectorised over candidates, used by
online recall and by the harness's recombination of cached signals.

Steps, with :class:`~memofs.config.RecallConfig` names:

1. ``lexical = use_bm25 * bm25 + use_fuzzy * fuzzy_boost * fuzzy``
2. Effective weights (``dynamic_weights``). The vector path is *usable* when
   ``use_vector``, the query was embedded, and ``w_vec > 0``; the lexical path when BM25
   or fuzzy is on and ``w_vec < 1``.
   - vector path not usable (embedder missing or failed)   -> (w_vec, w_lex) = (0, 1)
   - lexical path not usable, or no document has lexical > 0 -> (1, 0)
   - both usable                                             -> (w_vec, 1 - w_vec)
   - neither                                                 -> no candidates, empty result
   A path with weight 0 contributes no candidate pool.
3. Pools: top ``ceil(K * vector_pool_multiplier)`` by cosine, top
   ``ceil(K * lexical_pool_multiplier)`` by lexical (> 0), union by id, ties by id.
4. ``base = w_vec * clamp01(cosine) + w_lex * clamp01(saturate(lexical, saturation_c))``
5. ``base = (1 - blend) * base + blend * clamp01(rerank)``, ``blend = rerank_blend`` when
   the reranker is on and scored the candidates, else 0 (a failed reranker is skipped).
6. ``final = w_relevance * base + w_recency * 0.5 ** (age_days / half_life_days)
   + w_confidence * clamp01(confidence)``; a missing age gives recency 0.5 and a missing
   confidence gives ``default_confidence``; a switched-off term has weight 0.
7. ``final *= stale_penalty`` when an anchor drifted (``use_drift``) and
   ``*= unverified_penalty`` when ``age_days`` exceeds the kind's expiry floor
   (``use_decay``); penalties compound (0.5 * 0.6 = 0.3).
8. Round to ``round_decimals``; order by score descending, then id ascending; cut at K.

``cfg.fusion == "learned"`` (an option beyond the spec) keeps step 3's pools and replaces
steps 4-7 by a model file's score (:func:`memofs.learned.fuse_learned`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from memofs.config import RecallConfig
from memofs.records import MEMORY_KINDS
from memofs.saturation import clamp01, saturate
from memofs.signals import OTHER_KIND, SignalFrame


@dataclass(frozen=True)
class Weights:
    """The weights fusion actually used for one query, after dynamic weighting."""

    w_vec: float
    w_lex: float
    reason: str
    rerank_blend: float
    w_relevance: float
    w_recency: float
    w_confidence: float


@dataclass
class Fused:
    """Candidates of one query, fused. ``rows`` index the frame; ``order`` ranks them."""

    rows: NDArray[np.int64]  # frame rows of the candidates, in final rank order
    scores: NDArray[np.float64]  # rounded final scores, same order
    weights: Weights
    parts: dict[str, NDArray]  # per-candidate intermediate values, same order (for explain)

    def ids(self, frame: SignalFrame) -> list[str]:
        return [frame.ids[i] for i in self.rows.tolist()]


def recency(age_days: NDArray[np.float64], half_life_days: float) -> NDArray[np.float64]:
    """``0.5 ** (age_days / half_life)``; ages clamp at 0; a missing age (NaN) gives 0.5;
    a half-life of 0 gives 1 (upstream)."""
    age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
    out = np.ones_like(age) if half_life_days <= 0 else np.power(0.5, age / half_life_days)
    return np.where(np.isnan(age), 0.5, out)


def expiry_floors(cfg: RecallConfig) -> NDArray[np.float64]:
    """Expiry floor (days) per kind code; kinds without a floor never expire."""
    floors = np.full(OTHER_KIND + 1, np.inf)
    for i, kind in enumerate(MEMORY_KINDS):
        floors[i] = cfg.kind_expiry_days.get(kind, np.inf)
    return floors


def lexical_score(frame: SignalFrame, cfg: RecallConfig) -> NDArray[np.float64]:
    lex = np.zeros(len(frame))
    if cfg.use_bm25:
        lex = lex + frame.bm25
    if cfg.use_fuzzy:
        lex = lex + cfg.fuzzy_boost * frame.fuzzy
    return lex


def effective_weights(frame: SignalFrame, cfg: RecallConfig, lex: NDArray[np.float64], eligible: NDArray[np.bool_]) -> tuple[float, float, str]:
    vector_usable = cfg.use_vector and frame.vector_ok and cfg.w_vec > 0 and bool(np.isfinite(frame.cosine[eligible]).any())
    lexical_usable = (cfg.use_bm25 or (cfg.use_fuzzy and cfg.fuzzy_boost > 0)) and cfg.w_vec < 1
    lexical_hits = lexical_usable and bool((lex[eligible] > 0).any())
    if not cfg.dynamic_weights:
        wv = cfg.w_vec if vector_usable else 0.0
        wl = (1.0 - cfg.w_vec) if lexical_usable else 0.0
        return wv, wl, "fixed"
    if not vector_usable and not lexical_hits:
        return 0.0, 0.0, "no vector path and no lexical hit: no candidates"
    if not vector_usable:
        return 0.0, 1.0, "vector path unavailable: lexical only"
    if not lexical_hits:
        return 1.0, 0.0, "no lexical hit: vectors only"
    return cfg.w_vec, 1.0 - cfg.w_vec, "default split"


def _top(values: NDArray[np.float64], mask: NDArray[np.bool_], order_key: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    rows = np.flatnonzero(mask)
    if rows.size == 0 or n <= 0:
        return rows[:0]
    if rows.size > n:
        # keep every row tied with the n-th best value, so the id tie-break below is exact
        v = values[rows]
        kth = v[np.argpartition(-v, n - 1)[:n]].min()
        rows = rows[v >= kth]
    return rows[np.lexsort((order_key[rows], -values[rows]))][:n]


def pools(frame: SignalFrame, cfg: RecallConfig, k: int) -> tuple[NDArray[np.int64], Weights, NDArray[np.float64], dict[str, NDArray[np.bool_]]]:
    """Candidate rows (union of the pools), the weights, and the lexical scores."""
    eligible = np.ones(len(frame), dtype=bool) if cfg.include_graph_docs else ~frame.is_graph
    lex = lexical_score(frame, cfg)
    wv, wl, reason = effective_weights(frame, cfg, lex, eligible)
    vec_rows = _top(np.nan_to_num(frame.cosine, nan=-np.inf), eligible & np.isfinite(frame.cosine), frame.order_key, math.ceil(k * cfg.vector_pool_multiplier)) if wv > 0 else np.zeros(0, np.int64)
    lex_rows = _top(lex, eligible & (lex > 0), frame.order_key, math.ceil(k * cfg.lexical_pool_multiplier)) if wl > 0 else np.zeros(0, np.int64)
    rows = np.union1d(vec_rows, lex_rows)
    blend = cfg.rerank_blend if (cfg.use_reranker and frame.rerank_ok) else 0.0
    weights = Weights(
        w_vec=wv,
        w_lex=wl,
        reason=reason,
        rerank_blend=blend,
        w_relevance=cfg.w_relevance,
        w_recency=cfg.w_recency if cfg.use_recency else 0.0,
        w_confidence=cfg.w_confidence if cfg.use_confidence else 0.0,
    )
    member = {"vector_pool": np.isin(rows, vec_rows), "lexical_pool": np.isin(rows, lex_rows)}
    return rows, weights, lex, member


def fuse(frame: SignalFrame, cfg: RecallConfig, k: int | None = None) -> Fused:
    """Fuse one query's signals under ``cfg``; returns the top ``k`` (default ``cfg.top_k``)."""
    k = cfg.top_k if k is None else k
    if cfg.fusion == "learned":  # same pools, scored by a model file (memofs.learned)
        from memofs.learned import fuse_learned

        return fuse_learned(frame, cfg, k)
    rows, w, lex_all, member = pools(frame, cfg, k)
    cos = clamp01(frame.cosine[rows])
    lex = lex_all[rows]
    lex_sat = clamp01(saturate(lex, cfg.saturation_c))
    base0 = w.w_vec * cos + w.w_lex * lex_sat
    rr = frame.rerank[rows]
    if w.rerank_blend > 0:
        base = (1.0 - w.rerank_blend) * base0 + w.rerank_blend * clamp01(rr)
    else:
        base = base0
    rec = recency(frame.age_days[rows], cfg.half_life_days)
    conf_raw = frame.confidence[rows]
    conf = clamp01(np.where(np.isnan(conf_raw), cfg.default_confidence, conf_raw))
    composite = w.w_relevance * base + w.w_recency * rec + w.w_confidence * conf
    stale = frame.stale[rows] & cfg.use_drift
    unverified = (frame.age_days[rows] > expiry_floors(cfg)[frame.kind[rows]]) & cfg.use_decay
    factor = np.where(stale, cfg.stale_penalty, 1.0) * np.where(unverified, cfg.unverified_penalty, 1.0)
    final = np.round(composite * factor, cfg.round_decimals)
    order = np.lexsort((frame.order_key[rows], -final))[:k]
    parts = {
        "bm25": frame.bm25[rows],
        "fuzzy": frame.fuzzy[rows],
        "lexical": lex,
        "lexical_saturated": lex_sat,
        "cosine": frame.cosine[rows],
        "rerank": rr,
        "base_before_rerank": base0,
        "base": base,
        "recency": rec,
        "confidence": conf,
        "composite": composite,
        "stale": stale,
        "unverified": unverified,
        "penalty": factor,
        "stale_factor": np.where(stale, cfg.stale_penalty, 1.0),
        "unverified_factor": np.where(unverified, cfg.unverified_penalty, 1.0),
        **member,
    }
    return Fused(rows=rows[order], scores=final[order], weights=w, parts={n: v[order] for n, v in parts.items()})
