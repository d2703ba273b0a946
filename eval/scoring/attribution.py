"""Which signal put each hit in the top K: an additive split of the fused score.

With the names of :func:`memofs.ranking.fusion.fuse` (``keep = 1 - rerank_blend``, ``c01`` = clamp
to [0, 1], non-finite -> 0), the pre-rounding final score of a candidate is exactly

    vector     = w_relevance * keep * w_vec * c01(cosine)
    bm25       = w_relevance * keep * w_lex * lexical_saturated * bm25_term / lexical
    fuzzy      = w_relevance * keep * w_lex * lexical_saturated * fuzzy_term / lexical
    rerank     = w_relevance * rerank_blend * c01(rerank)
    recency    = w_recency * recency
    confidence = w_confidence * confidence
    penalty    = composite * (penalty_factor - 1)        (<= 0: what the multiplicative
                                                         stale/unverified penalty took away)
    final      = vector + bm25 + fuzzy + rerank + recency + confidence + penalty

A candidate the reranker did not score (rerank NaN: a model reranker scores only the
fused pool's top N) keeps its whole base, as fusion does: ``keep = 1`` and ``rerank = 0``.

where ``bm25_term = bm25`` (if BM25 is on) and ``fuzzy_term = fuzzy_boost * fuzzy`` (if
fuzzy is on) are the two addends of the raw lexical score, so the saturated lexical part
is split between them in proportion. Every number is read from ``Fused.parts`` and
``Fused.weights``, the values ``recall(explain=True)`` reports.

A hit is *carried* by its largest positive term. A relevant hit in the top K is a
*rescue* by one retrieval path when it was in the vector pool only or the lexical pool
only: the other signal alone would not have retrieved it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from memofs.ranking.config import RecallConfig
from memofs.ranking.fusion import fuse
from memofs.ranking.pools import Fused
from memofs.ranking.terms import clamp01
from memofs.signals.frame import SignalFrame

SIGNALS: tuple[str, ...] = ("vector", "bm25", "fuzzy", "rerank", "recency", "confidence")
TERMS: tuple[str, ...] = SIGNALS + ("penalty",)


def attribute(fused: Fused, cfg: RecallConfig) -> dict[str, NDArray[np.float64]]:
    """The additive terms of every candidate of ``fused`` (its order), plus ``total`` (their
    sum, the unrounded final score). Learned fusion has no such split: ``ValueError``."""
    if cfg.fusion != "formula":
        raise ValueError(f"attribution needs the formula fusion (cfg.fusion = {cfg.fusion!r})")
    p, w = fused.parts, fused.weights
    rr = np.asarray(p["rerank"], dtype=np.float64)
    blended = np.full(len(rr), w.rerank_blend > 0) & ~np.isnan(rr)  # unscored rows: identity fold
    keep = np.where(blended, 1.0 - w.rerank_blend, 1.0)
    lex_part = w.w_relevance * keep * w.w_lex * p["lexical_saturated"]
    bm25_term = p["bm25"] if cfg.use_bm25 else np.zeros_like(p["bm25"])
    fuzzy_term = cfg.fuzzy_boost * p["fuzzy"] if cfg.use_fuzzy else np.zeros_like(p["fuzzy"])
    lexical = np.asarray(p["lexical"], dtype=np.float64)
    safe = np.where(lexical > 0, lexical, 1.0)
    bm25_share = np.where(lexical > 0, bm25_term / safe, 0.0)
    fuzzy_share = np.where(lexical > 0, fuzzy_term / safe, 0.0)
    out = {
        "vector": w.w_relevance * keep * w.w_vec * clamp01(p["cosine"]),
        "bm25": lex_part * bm25_share,
        "fuzzy": lex_part * fuzzy_share,
        "rerank": np.where(blended, w.w_relevance * w.rerank_blend * clamp01(rr), 0.0),
        "recency": w.w_recency * np.asarray(p["recency"], dtype=np.float64),
        "confidence": w.w_confidence * np.asarray(p["confidence"], dtype=np.float64),
        "penalty": np.asarray(p["composite"], dtype=np.float64) * (np.asarray(p["penalty"], dtype=np.float64) - 1.0),
    }
    out["total"] = sum(out[t] for t in TERMS)
    return out


def carrier(terms: Mapping[str, float]) -> str:
    """The signal with the largest positive term (ties: :data:`SIGNALS` order); "none" if no term is positive."""
    best, value = "none", 0.0
    for s in SIGNALS:
        if terms[s] > value:
            best, value = s, terms[s]
    return best


def rescue(vector_pool: bool, lexical_pool: bool) -> str:
    """``vector`` / ``lexical`` when only that retrieval path had the candidate, else ``""``."""
    if vector_pool and not lexical_pool:
        return "vector"
    if lexical_pool and not vector_pool:
        return "lexical"
    return ""


def hits(frame: SignalFrame, fused: Fused, cfg: RecallConfig, qrels: Mapping[str, int], k: int) -> list[dict]:
    """One row per hit in the top ``k`` of one query: terms, carrier, pools, relevance."""
    terms = attribute(fused, cfg)
    rows = []
    for pos in range(min(k, len(fused.rows))):
        doc = frame.ids[int(fused.rows[pos])]
        t = {name: float(terms[name][pos]) for name in (*TERMS, "total")}
        vp, lp = bool(fused.parts["vector_pool"][pos]), bool(fused.parts["lexical_pool"][pos])
        rows.append({"doc": doc, "rank": pos + 1, "grade": int(qrels.get(doc, 0)), "score": float(fused.scores[pos]), **t,
                     "carrier": carrier(t), "vector_pool": vp, "lexical_pool": lp, "rescue": rescue(vp, lp)})
    return rows


def hit_table(frames: Mapping[str, SignalFrame], cfg: RecallConfig, judged: Mapping[str, Mapping[str, int]],
              category: Mapping[str, str], k: int) -> pd.DataFrame:
    """Hits of every judged query (``fuse(frame, cfg, k)``, the harness's own ranking)."""
    rows = []
    for qid in judged:
        frame = frames.get(qid)
        if frame is None:
            continue
        for r in hits(frame, fuse(frame, cfg, k), cfg, judged[qid], k):
            rows.append({"query": qid, "category": category.get(qid, ""), **r})
    cols = ["query", "category", "doc", "rank", "grade", "score", *TERMS, "total", "carrier", "vector_pool", "lexical_pool", "rescue"]
    return pd.DataFrame(rows, columns=cols)


def summary(table: pd.DataFrame, queries: Sequence[str] | None = None) -> pd.DataFrame:
    """Per category (and ``all``): relevant hits in the top K, the share carried by each
    signal, and the rescues by the vector-only and the lexical-only path."""
    rel = table[table.grade >= 1]
    if queries is not None:
        rel = rel[rel["query"].isin(set(queries))]
    groups = {"all": rel, **{c: g for c, g in sorted(rel.groupby("category"), key=lambda kv: kv[0])}}
    rows = []
    for cat, g in groups.items():
        n = len(g)
        row: dict[str, object] = {"category": cat, "relevant_hits": n}
        for s in SIGNALS:
            row[f"carried_{s}"] = float((g.carrier == s).mean()) if n else float("nan")
        row["rescued_vector"] = int((g.rescue == "vector").sum())
        row["rescued_lexical"] = int((g.rescue == "lexical").sum())
        rows.append(row)
    return pd.DataFrame(rows)
