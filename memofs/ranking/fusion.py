"""Score combination: the *fusion* half of the pipeline (spec "Fusion" and
"Post-scoring intelligence"). One implementation, vectorised over candidates, used by
online recall and by the harness's recombination of cached signals.

Steps, with :class:`~memofs.ranking.config.RecallConfig` names:

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
4. ``base = w_vec * clamp01(cosine) + w_lex * clamp01(saturate(lexical, saturation_c))``;
   a phrase-scan block's lexical (block score / 10) is clamped, not saturated (upstream's
   merge; :func:`~memofs.ranking.pools.lexical_saturated`)
5. ``base = (1 - blend) * base + blend * clamp01(rerank)``, ``blend = rerank_blend`` when
   the reranker is on and scored the candidates, else 0 (a failed reranker is skipped). A
   candidate the reranker did not score (a model reranker sees only the fused pool's top
   ``rerank_top_n``; its rerank is NaN) keeps its base: the fold is the identity for it.
6. ``final = w_relevance * base + w_recency * 0.5 ** (age_days / half_life_days)
   + w_confidence * clamp01(confidence)``; a missing age gives recency 0.5 and a missing
   confidence gives ``default_confidence``; a switched-off term has weight 0;
   ``neutral_recency_confidence`` gives every candidate recency 0.5 and
   ``default_confidence`` (upstream's lexical candidates carry neither, facts section 4).
7. Anchor drift: ``final *= stale_penalty`` when an anchor drifted (``use_drift``); kind
   decay: ``*= unverified_penalty`` when ``age_days`` exceeds the kind's expiry floor
   (``use_decay``, :func:`~memofs.ranking.terms.unverified`); penalties compound
   (0.5 * 0.6 = 0.3). Supersession: ``*= superseded_penalty`` when another memory
   supersedes this one (``use_supersession``, :func:`~memofs.ranking.terms.superseded`).
   Vocabulary: :class:`~memofs.ranking.config.RecallConfig`.
8. Round half up to ``round_decimals`` (upstream ``Math.round``); order by score descending, then id ascending; cut at K.

``cfg.fusion == "learned"`` (an option beyond the spec) keeps step 3's pools and replaces
steps 4-7 by a model file's score (:func:`memofs.ranking.learned.fuse_learned`).
"""

from __future__ import annotations

import numpy as np

from memofs.ranking.config import RecallConfig
from memofs.ranking.pools import Fused, Pools, pools
from memofs.ranking.rounding import round_half_up
from memofs.ranking.terms import candidate_terms
from memofs.signals.frame import SignalFrame


def fuse(frame: SignalFrame, cfg: RecallConfig, k: int | None = None, candidates: Pools | None = None) -> Fused:
    """Fuse one query's signals under ``cfg``; returns the top ``k`` (default ``cfg.top_k``).

    ``candidates``: the result of ``pools(frame, cfg, k)`` when the caller already has it.
    """
    k = cfg.top_k if k is None else k
    if cfg.fusion == "learned":  # same pools, scored by a model file (memofs.ranking.learned)
        from memofs.ranking.learned import fuse_learned

        return fuse_learned(frame, cfg, k, candidates=candidates)
    pool = candidates if candidates is not None else pools(frame, cfg, k)
    rows, w, lex, member = pool.rows, pool.weights, pool.row_lexical, pool.member
    t = candidate_terms(frame, rows, lex, cfg)  # steps 4-7's inputs, read once (memofs.ranking.terms)
    base0 = w.w_vec * t.cosine + w.w_lex * t.lexical_saturated
    rr = frame.rerank[rows]
    if w.rerank_blend > 0:
        base = (1.0 - w.rerank_blend) * base0 + w.rerank_blend * t.rerank
        unscored = np.isnan(rr)
        if unscored.any():
            base = np.where(unscored, base0, base)
    else:
        base = base0
    rec, conf, stale, unverified_rows, superseded_rows = t.recency, t.confidence, t.stale, t.unverified, t.superseded
    composite = w.w_relevance * base + w.w_recency * rec + w.w_confidence * conf
    stale_factor = np.where(stale, cfg.stale_penalty, 1.0)
    unverified_factor = np.where(unverified_rows, cfg.unverified_penalty, 1.0)
    superseded_factor = np.where(superseded_rows, cfg.superseded_penalty, 1.0)
    factor = stale_factor * unverified_factor * superseded_factor
    final = round_half_up(composite * factor, cfg.round_decimals)
    order = np.lexsort((frame.order_key[rows], -final))[:k]
    parts = {
        "bm25": frame.bm25[rows],
        "fuzzy": frame.fuzzy[rows],
        "lexical": lex,
        "lexical_saturated": t.lexical_saturated,
        "cosine": frame.cosine[rows],
        "rerank": rr,
        "base_before_rerank": base0,
        "base": base,
        "recency": rec,
        "confidence": conf,
        "composite": composite,
        "stale": stale,
        "unverified": unverified_rows,
        "penalty": factor,
        "stale_factor": stale_factor,
        "unverified_factor": unverified_factor,
        "superseded": superseded_rows,
        "superseded_factor": superseded_factor,
        **member,
    }
    return Fused(rows=rows[order], scores=final[order], weights=w, candidate_parts=parts, order=order)
