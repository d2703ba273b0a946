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
8. Round half up to ``round_decimals`` (upstream ``Math.round``); order by score descending, then id ascending; cut at K.

``cfg.fusion == "learned"`` (an option beyond the spec) keeps step 3's pools and replaces
steps 4-7 by a model file's score (:func:`memofs.learned.fuse_learned`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

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
    """Candidates of one query, fused. ``rows`` index the frame, best first, cut at K.

    ``candidate_parts`` holds per-candidate intermediate values in pool order and
    ``order`` the pool positions of ``rows``; :attr:`parts` (for explain) is built from
    them on first use, so the harness's recombination never pays for it.
    """

    rows: NDArray[np.int64]  # frame rows of the candidates, in final rank order
    scores: NDArray[np.float64]  # rounded final scores, same order
    weights: Weights
    candidate_parts: dict[str, NDArray]
    order: NDArray[np.int64]

    @cached_property
    def parts(self) -> dict[str, NDArray]:
        """Per-result intermediate values, aligned with ``rows``."""
        return {n: v[self.order] for n, v in self.candidate_parts.items()}

    def ids(self, frame: SignalFrame) -> list[str]:
        return [frame.ids[i] for i in self.rows.tolist()]


@dataclass(frozen=True)
class Pools:
    """The candidate pools of one query (spec "Fusion" step 3) and the weights behind them."""

    rows: NDArray[np.int64]  # union of the pools, ascending frame rows
    weights: Weights
    lexical: NDArray[np.float64]  # lexical score of every frame row
    member: dict[str, NDArray[np.bool_]]  # "vector_pool" / "lexical_pool", aligned with rows

    def __iter__(self):  # rows, weights, lexical, member = pools(...)
        return iter((self.rows, self.weights, self.lexical, self.member))


def round_half_up(x: NDArray[np.float64], decimals: int) -> NDArray[np.float64]:
    """``floor(x * 10**d + 0.5) / 10**d``: upstream's ``Math.round(x * 1e4) / 1e4`` (halves
    go up), not numpy's round-half-even (facts sheet, "Final score")."""
    scale = 10.0**decimals
    return np.floor(np.asarray(x, dtype=np.float64) * scale + 0.5) / scale


def recency(age_days: NDArray[np.float64], half_life_days: float) -> NDArray[np.float64]:
    """``0.5 ** (age_days / half_life)``; ages clamp at 0; a missing age (NaN) gives 0.5;
    a half-life of 0 gives 1 (upstream)."""
    age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
    out = np.ones_like(age) if half_life_days <= 0 else np.power(0.5, age / half_life_days)
    return np.where(np.isnan(age), 0.5, out)


def expiry_floors(cfg: RecallConfig) -> NDArray[np.float64]:
    """Expiry floor (days) per kind code; kinds without a floor never expire."""
    return _expiry_floors(tuple(sorted(cfg.kind_expiry_days.items()))).copy()


@lru_cache(maxsize=64)
def _expiry_floors(items: tuple[tuple[str, float], ...]) -> NDArray[np.float64]:
    table = dict(items)
    floors = np.full(OTHER_KIND + 1, np.inf)
    for i, kind in enumerate(MEMORY_KINDS):
        floors[i] = table.get(kind, np.inf)
    return floors


def lexical_score(frame: SignalFrame, cfg: RecallConfig) -> NDArray[np.float64]:
    """``use_bm25 * bm25 + use_fuzzy * fuzzy_boost * fuzzy`` (step 1)."""
    if cfg.use_bm25 and cfg.use_fuzzy:
        return frame.bm25 + cfg.fuzzy_boost * frame.fuzzy
    if cfg.use_bm25:
        return frame.bm25.astype(np.float64, copy=True)
    if cfg.use_fuzzy:
        return cfg.fuzzy_boost * frame.fuzzy
    return np.zeros(len(frame))


def effective_weights(frame: SignalFrame, cfg: RecallConfig, lex: NDArray[np.float64], eligible: NDArray[np.bool_]) -> tuple[float, float, str]:
    """(w_vec, w_lex, reason) after dynamic weighting (step 2)."""
    return _weights(frame, cfg, eligible & np.isfinite(frame.cosine), eligible & (lex > 0))


def _weights(frame: SignalFrame, cfg: RecallConfig, vec_ok: NDArray[np.bool_], lex_ok: NDArray[np.bool_]) -> tuple[float, float, str]:
    # vec_ok / lex_ok: eligible rows with a finite cosine / a positive lexical score
    vector_usable = cfg.use_vector and frame.vector_ok and cfg.w_vec > 0 and bool(vec_ok.any())
    lexical_usable = (cfg.use_bm25 or (cfg.use_fuzzy and cfg.fuzzy_boost > 0)) and cfg.w_vec < 1
    lexical_hits = lexical_usable and bool(lex_ok.any())
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
    """The ``n`` masked rows with the largest values, ties by ``order_key`` (id order).
    Masked-in values must be finite."""
    count = int(np.count_nonzero(mask))
    if count == 0 or n <= 0:
        return np.zeros(0, dtype=np.int64)
    if count == mask.size:  # every row (the usual vector pool): no gather
        rows, v = None, values
    else:
        rows = np.flatnonzero(mask)
        v = values[rows]
    if count > n:
        kth = np.partition(v, v.size - n)[v.size - n]  # the n-th largest masked value
        # keep every row tied with it, so the id tie-break below is exact
        keep = np.flatnonzero(v >= kth)
        rows = keep if rows is None else rows[keep]
    elif rows is None:
        rows = np.arange(count)
    return rows[np.lexsort((order_key[rows], -values[rows]))][:n]


def pools(frame: SignalFrame, cfg: RecallConfig, k: int) -> Pools:
    """Candidate rows (union of the pools), the weights, and the lexical scores (steps 1-3).

    Unpacks as ``rows, weights, lexical, member``.
    """
    eligible = np.ones(len(frame), dtype=bool) if cfg.include_graph_docs else ~frame.is_graph
    lex = lexical_score(frame, cfg)
    vec_ok = eligible & np.isfinite(frame.cosine)
    lex_ok = eligible & (lex > 0)
    wv, wl, reason = _weights(frame, cfg, vec_ok, lex_ok)
    in_vec = np.zeros(len(frame), dtype=bool)
    in_lex = np.zeros(len(frame), dtype=bool)
    if wv > 0:
        in_vec[_top(frame.cosine, vec_ok, frame.order_key, math.ceil(k * cfg.vector_pool_multiplier))] = True
    if wl > 0:
        in_lex[_top(lex, lex_ok, frame.order_key, math.ceil(k * cfg.lexical_pool_multiplier))] = True
    rows = np.flatnonzero(in_vec | in_lex)
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
    return Pools(rows, weights, lex, {"vector_pool": in_vec[rows], "lexical_pool": in_lex[rows]})


def fuse(frame: SignalFrame, cfg: RecallConfig, k: int | None = None, candidates: Pools | None = None) -> Fused:
    """Fuse one query's signals under ``cfg``; returns the top ``k`` (default ``cfg.top_k``).

    ``candidates``: the result of ``pools(frame, cfg, k)`` when the caller already has it.
    """
    k = cfg.top_k if k is None else k
    if cfg.fusion == "learned":  # same pools, scored by a model file (memofs.learned)
        from memofs.learned import fuse_learned

        return fuse_learned(frame, cfg, k, candidates=candidates)
    rows, w, lex_all, member = candidates if candidates is not None else pools(frame, cfg, k)
    cos = clamp01(frame.cosine[rows])
    lex = lex_all[rows]
    lex_sat = clamp01(saturate(lex, cfg.saturation_c))
    base0 = w.w_vec * cos + w.w_lex * lex_sat
    rr = frame.rerank[rows]
    if w.rerank_blend > 0:
        base = (1.0 - w.rerank_blend) * base0 + w.rerank_blend * clamp01(rr)
    else:
        base = base0
    age = frame.age_days[rows]
    rec = recency(age, cfg.half_life_days)
    conf_raw = frame.confidence[rows]
    conf = clamp01(np.where(np.isnan(conf_raw), cfg.default_confidence, conf_raw))
    composite = w.w_relevance * base + w.w_recency * rec + w.w_confidence * conf
    stale = frame.stale[rows] & cfg.use_drift
    unverified = (age > _expiry_floors(tuple(sorted(cfg.kind_expiry_days.items())))[frame.kind[rows]]) & cfg.use_decay
    stale_factor = np.where(stale, cfg.stale_penalty, 1.0)
    unverified_factor = np.where(unverified, cfg.unverified_penalty, 1.0)
    factor = stale_factor * unverified_factor
    final = round_half_up(composite * factor, cfg.round_decimals)
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
        "stale_factor": stale_factor,
        "unverified_factor": unverified_factor,
        **member,
    }
    return Fused(rows=rows[order], scores=final[order], weights=w, candidate_parts=parts, order=order)
