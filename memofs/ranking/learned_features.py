"""The features of learned fusion: each candidate's vector computed from the
:class:`~memofs.signals.frame.SignalFrame` alone (signals, pool membership, ranks, query cues as
interactions, session context), the feature groups and the sets the study selects."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.files.records import MEMORY_KINDS
from memofs.ranking.config import DEFAULT_KIND_EXPIRY_DAYS, RecallConfig
from memofs.ranking.pools import lexical_score
from memofs.ranking.query_cues import query_cues
from memofs.ranking.terms import clamp01, confidence, recency, saturate, unverified
from memofs.signals.frame import ContextColumns, SignalFrame



@dataclass(frozen=True)
class FeatureParams:
    """The constants features are computed with; stored in the model file so training and
    serving agree whatever the serving config says."""

    fuzzy_boost: float = 0.15
    saturation_c: float = 2.0
    half_life_days: float = 30.0
    default_confidence: float = 0.5
    kind_expiry_days: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_KIND_EXPIRY_DAYS))

    @classmethod
    def from_config(cls, cfg: RecallConfig) -> FeatureParams:
        return cls(cfg.fuzzy_boost, cfg.saturation_c, cfg.half_life_days, cfg.default_confidence, dict(cfg.kind_expiry_days))

    def config(self, cfg: RecallConfig | None = None) -> RecallConfig:
        """``cfg`` (default :class:`RecallConfig`) with these constants: what the features
        are computed under."""
        return (cfg or RecallConfig()).replace(
            fuzzy_boost=self.fuzzy_boost, saturation_c=self.saturation_c, half_life_days=self.half_life_days,
            default_confidence=self.default_confidence, kind_expiry_days=dict(self.kind_expiry_days))

    def to_dict(self) -> dict[str, Any]:
        return {"fuzzy_boost": self.fuzzy_boost, "saturation_c": self.saturation_c, "half_life_days": self.half_life_days,
                "default_confidence": self.default_confidence, "kind_expiry_days": dict(self.kind_expiry_days)}


KIND_NAMES: tuple[str, ...] = (*MEMORY_KINDS, "other")

FEATURES: tuple[str, ...] = (
    # lexical
    "lexical", "lexical_saturated", "bm25", "fuzzy", "lexical_norm", "lexical_rr", "in_lexical_pool",
    # vector
    "cosine", "cosine_missing", "cosine_norm", "vector_rr", "in_vector_pool",
    # rerank overlap
    "rerank", "rerank_missing",
    # time
    "log_age", "age_missing", "recency", "age_rel",
    # trust
    "confidence", "confidence_missing", "stale", "unverified",
    # kind one-hot
    *(f"kind_{k}" for k in KIND_NAMES),
    # query-aware interactions (query-level flags alone cancel pairwise)
    "past_x_recency", "past_x_age_rel", "date_x_recency", "date_x_age_rel", "present_x_recency", "present_x_age_rel",
    "when_x_age_rel", "qlen_x_lexical_norm", "qlen_x_cosine_norm",
    # session context (ContextColumns): neighbours' relevance, the session's relevance
    "prev_lexical_rel", "next_lexical_rel", "nb1_lexical_rel", "nb2_lexical_rel",
    "prev_cosine_rel", "next_cosine_rel", "nb1_cosine_rel", "nb2_cosine_rel",
    "session_max_lexical_rel", "session_other_lexical_rel", "session_max_cosine_rel", "session_other_cosine_rel",
    # the candidate's text (ContextColumns)
    "log_words", "is_question", "after_question_lexical_rel", "after_question_cosine_rel", "has_time", "when_x_has_time",
    # per-query ranks and normalised scores of every signal, and peers' fused scores (v3)
    "bm25_norm", "fuzzy_norm", "rerank_norm", "lexical_rank_log", "cosine_rank_log", "rrf", "rrf_norm", "wsum_norm",
)
"""Feature names, in column order. ``*_norm``: min-max within the query's candidates;
``*_rr``: 1 / rank within that pool (0 outside it); ``age_rel``: min-max of age within the
candidates (0 = newest); ``qlen``: log1p(words of the recall query).

Context features (:func:`_context_features`) use relevance relative to the whole corpus:
``lexical_rel = lexical / max(lexical)`` and ``cosine_rel = min-max of cosine`` over every
non-graph document of the frame (not only the candidates), so a neighbour outside the pools
still counts. ``prev_*`` / ``next_*``: that of the previous / next memory of the session (0
when none); ``nb1_*``: max over +-1, ``nb2_*``: max over +-1 and +-2; ``session_max_*``: max over
the candidate's session; ``session_other_*``: the max over the session without the candidate
itself (0 when alone); ``log_words``: log1p(words);
``*_rank_log``: ``log(rank)`` within the candidates (value desc, id asc; a candidate without
the signal ranks last); ``rrf``: ``sum over {lexical, cosine} of 1 / (60 + rank)`` within the
candidates (Cormack et al.'s RRF, k = 60), ``rrf_norm`` its min-max; ``wsum_norm``:
``(lexical_norm + cosine_norm) / 2`` (ranx's min-max wsum at weight 0.5);
``after_question_*``: ``is_question(prev) * *_rel(prev)``; ``when_x_has_time``: the query
starts with "when" and the memory mentions a moment."""


def _minmax(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(x - min) / (max - min)`` over finite values; constant or empty -> 0 (NaN -> 0)."""
    fin = np.isfinite(x)
    if not fin.any():
        return np.zeros_like(x)
    lo, hi = float(x[fin].min()), float(x[fin].max())
    if hi <= lo:
        return np.zeros_like(x)
    return np.where(fin, (x - lo) / (hi - lo), 0.0)


#: feature groups, the units the study selects (:data:`FEATURE_SETS`). ``portable``: ranks
#: and min-max scores within the query's candidates, pool membership, missing flags and peers'
#: fused scores: they mean the same thing in any corpus. ``absolute``: raw signal values, whose
#: scale depends on the corpus (BM25 grows with the corpus's idf, cosine with the embedder).
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "portable": ("lexical_norm", "lexical_rr", "in_lexical_pool", "cosine_missing", "cosine_norm", "vector_rr",
                 "in_vector_pool", "rerank_missing", "bm25_norm", "fuzzy_norm", "rerank_norm", "lexical_rank_log",
                 "cosine_rank_log", "rrf", "rrf_norm", "wsum_norm", "qlen_x_lexical_norm", "qlen_x_cosine_norm"),
    "time": ("past_x_recency", "past_x_age_rel", "date_x_recency", "date_x_age_rel", "present_x_recency",
             "present_x_age_rel", "when_x_age_rel"),
    "trust": ("confidence", "confidence_missing", "stale", "unverified", *(f"kind_{k}" for k in KIND_NAMES)),
    "context": ("prev_lexical_rel", "next_lexical_rel", "nb1_lexical_rel", "nb2_lexical_rel", "prev_cosine_rel",
                "next_cosine_rel", "nb1_cosine_rel", "nb2_cosine_rel", "session_max_lexical_rel",
                "session_other_lexical_rel", "session_max_cosine_rel", "session_other_cosine_rel", "log_words",
                "is_question", "after_question_lexical_rel", "after_question_cosine_rel", "has_time", "when_x_has_time"),
    "absolute": ("lexical", "lexical_saturated", "bm25", "fuzzy", "cosine", "rerank", "log_age", "age_missing",
                 "recency", "age_rel"),
    # low-capacity subsets of ``portable`` (a model with fewer degrees of freedom has less of
    # one corpus's shape to carry to another): ranks and pool membership only; peers' fused
    # scores only
    "ranks": ("lexical_rr", "in_lexical_pool", "cosine_missing", "vector_rr", "in_vector_pool", "lexical_rank_log",
              "cosine_rank_log", "rrf"),
    "peers": ("rrf", "rrf_norm", "wsum_norm"),
}
#: candidate feature sets of the nested selection, each a union of groups
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "portable": ("portable",),
    "portable+time": ("portable", "time"),
    "portable+time+trust": ("portable", "time", "trust"),
    "portable+time+context": ("portable", "time", "context"),
    "all": tuple(FEATURE_GROUPS),
    "ranks": ("ranks",),
    "peers": ("peers",),
}


def feature_set(name: str) -> tuple[str, ...]:
    """The features of :data:`FEATURE_SETS` ``name``, in :data:`FEATURES` order."""
    if name not in FEATURE_SETS:
        raise ValueError(f"unknown feature set {name!r} (one of {', '.join(FEATURE_SETS)})")
    chosen = {f for g in FEATURE_SETS[name] for f in FEATURE_GROUPS[g]}
    return tuple(f for f in FEATURES if f in chosen)


def _rank_log(values: NDArray[np.float64], order_key: NDArray[np.int64]) -> NDArray[np.float64]:
    """``log(rank)`` within the candidates, value desc then id asc; NaN ranks after every value."""
    n = values.size
    out = np.zeros(n)
    if n:
        v = np.where(np.isfinite(values), values, -np.inf)
        out[np.lexsort((order_key, -v))] = np.log(np.arange(1, n + 1))
    return out


def _pool_rr(values: NDArray[np.float64], member: NDArray[np.bool_], order_key: NDArray[np.int64]) -> NDArray[np.float64]:
    """1 / rank within the pool members, ranked like the pools (value desc, id asc); 0 outside.
    The pools are prefixes of that order, so these are the ranks the pools were cut by."""
    out = np.zeros(values.size)
    idx = np.flatnonzero(member)
    if idx.size:
        order = idx[np.lexsort((order_key[idx], -values[idx]))]
        out[order] = 1.0 / np.arange(1, idx.size + 1)
    return out


def features(frame: SignalFrame, rows: NDArray[np.int64], member: dict[str, NDArray[np.bool_]], params: FeatureParams,
             cfg: RecallConfig | None = None) -> NDArray[np.float64]:
    """The ``(len(rows), len(FEATURES))`` feature matrix of one query's candidates ``rows``
    (``member``: pool membership per candidate, as returned by :func:`memofs.ranking.pools.pools`).

    The formula's terms are the fusion's own (:func:`~memofs.ranking.pools.lexical_score`,
    :func:`~memofs.ranking.terms.recency`, :func:`~memofs.ranking.terms.confidence`,
    :func:`~memofs.ranking.terms.unverified`, saturation), computed under
    :meth:`FeatureParams.config`: the model's constants with ``cfg``'s switches (default:
    every signal on), so a signal switched off (``use_bm25``, ``use_fuzzy``, ``use_decay``)
    is 0 in every feature built on it."""
    fc = params.config(cfg)
    n = rows.size
    ok = frame.order_key[rows]
    lex_all = lexical_score(frame, fc)
    lex = lex_all[rows]
    bm25 = frame.bm25[rows] if fc.use_bm25 else np.zeros(n)
    fuzzy = frame.fuzzy[rows] if fc.use_fuzzy else np.zeros(n)
    cos_raw = frame.cosine[rows]
    cos_missing = np.isnan(cos_raw)
    cos = np.where(cos_missing, 0.0, cos_raw)
    rr_raw = frame.rerank[rows]
    rr_missing = np.isnan(rr_raw)
    age_raw = frame.age_days[rows]
    age_missing = np.isnan(age_raw)
    age = np.where(age_missing, 0.0, np.maximum(age_raw, 0.0))
    rec = recency(age_raw, fc.half_life_days)
    age_rel = _minmax(np.where(age_missing, np.nan, age))
    conf_raw = frame.confidence[rows]
    conf_missing = np.isnan(conf_raw)
    conf = confidence(conf_raw, fc.default_confidence)
    kind = frame.kind[rows]
    unverified_rows = unverified(age_raw, kind, fc)
    in_vec = member["vector_pool"].astype(bool)
    in_lex = member["lexical_pool"].astype(bool)
    lex_norm = _minmax(lex)
    cos_norm = _minmax(np.where(cos_missing, np.nan, cos_raw))
    q = query_cues(frame.query_text)
    qlen = math.log1p(q.n_words)
    cols: dict[str, NDArray[np.float64]] = {
        "lexical": lex,
        "lexical_saturated": clamp01(saturate(lex, fc.saturation_c)),
        "bm25": bm25,
        "fuzzy": fuzzy,
        "lexical_norm": lex_norm,
        "lexical_rr": _pool_rr(lex, in_lex, ok),
        "in_lexical_pool": in_lex.astype(np.float64),
        "cosine": cos,
        "cosine_missing": cos_missing.astype(np.float64),
        "cosine_norm": cos_norm,
        "vector_rr": _pool_rr(cos, in_vec, ok),
        "in_vector_pool": in_vec.astype(np.float64),
        "rerank": np.where(rr_missing, 0.0, rr_raw),
        "rerank_missing": rr_missing.astype(np.float64),
        "log_age": np.log1p(age),
        "age_missing": age_missing.astype(np.float64),
        "recency": rec,
        "age_rel": age_rel,
        "confidence": conf,
        "confidence_missing": conf_missing.astype(np.float64),
        "stale": frame.stale[rows].astype(np.float64),
        "unverified": unverified_rows.astype(np.float64),
        **{f"kind_{k}": (kind == i).astype(np.float64) for i, k in enumerate(KIND_NAMES)},
        "past_x_recency": q.past * rec,
        "past_x_age_rel": q.past * age_rel,
        "date_x_recency": q.date * rec,
        "date_x_age_rel": q.date * age_rel,
        "present_x_recency": q.present * rec,
        "present_x_age_rel": q.present * age_rel,
        "when_x_age_rel": q.when * age_rel,
        "qlen_x_lexical_norm": qlen * lex_norm,
        "qlen_x_cosine_norm": qlen * cos_norm,
        **_context_features(frame, rows, lex_all, q.when),
        "bm25_norm": _minmax(bm25),
        "fuzzy_norm": _minmax(fuzzy),
        "rerank_norm": _minmax(np.where(rr_missing, np.nan, rr_raw)),
    }
    lex_rank = _rank_log(np.where(lex > 0, lex, np.nan), ok)
    cos_rank = _rank_log(np.where(cos_missing, np.nan, cos_raw), ok)
    cols["lexical_rank_log"], cols["cosine_rank_log"] = lex_rank, cos_rank
    cols["rrf"] = 1.0 / (60.0 + np.rint(np.exp(lex_rank))) + 1.0 / (60.0 + np.rint(np.exp(cos_rank)))
    cols["rrf_norm"] = _minmax(cols["rrf"])
    cols["wsum_norm"] = 0.5 * (lex_norm + cos_norm)
    return np.column_stack([np.asarray(cols[f], dtype=np.float64) for f in FEATURES]) if n else np.zeros((0, len(FEATURES)))


def _no_context(n: int) -> ContextColumns:
    """Context of a frame that has none: no neighbours, every document a session of its own."""
    none = np.full(n, -1, dtype=np.int64)
    return ContextColumns(none, none, np.arange(n, dtype=np.int64), np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))


def _corpus_rel(frame: SignalFrame, lexical: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``lexical / max(lexical)`` and min-max ``cosine`` over the frame's non-graph documents
    (0 for a missing cosine, a constant column or an empty corpus)."""
    docs = ~frame.is_graph
    top = float(lexical[docs].max()) if docs.any() else 0.0
    lex_rel = lexical / top if top > 0 else np.zeros_like(lexical)
    cos_rel = _minmax(np.where(docs, frame.cosine, np.nan))
    return lex_rel, cos_rel


def _session_stats(values: NDArray[np.float64], session: NDArray[np.int64], rows: NDArray[np.int64]
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per candidate ``rows``: (max, max without the candidate) of ``values`` (>= 0) over its
    session; only the candidates' sessions are aggregated."""
    if rows.size == 0:
        return np.zeros(0), np.zeros(0)
    sub = np.flatnonzero(np.isin(session, session[rows]))
    codes, g = np.unique(session[sub], return_inverse=True)
    v = values[sub]
    order = np.lexsort((-v, g))  # by session, then value descending
    gs, vs = g[order], v[order]
    first = np.r_[True, gs[1:] != gs[:-1]]
    top1 = np.zeros(codes.size)
    top1[gs[first]] = vs[first]
    second = np.flatnonzero(first) + 1
    second = second[(second < gs.size)]
    second = second[gs[second] == gs[second - 1]]
    top2 = np.zeros(codes.size)
    top2[gs[second]] = vs[second]
    cg = np.searchsorted(codes, session[rows])
    own = values[rows]
    return top1[cg], np.where(own >= top1[cg], top2[cg], top1[cg])


def _context_features(frame: SignalFrame, rows: NDArray[np.int64], lexical: NDArray[np.float64], when: float
                      ) -> dict[str, NDArray[np.float64]]:
    """The context columns of :data:`FEATURES` for candidates ``rows`` (``lexical``: every
    frame row's :func:`~memofs.ranking.pools.lexical_score`; ``when``: the query's "when" flag)."""
    ctx = frame.context if frame.context is not None else _no_context(len(frame))
    lex_rel, cos_rel = _corpus_rel(frame, lexical)

    def at(values: NDArray[np.float64], idx: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.where(idx >= 0, values[np.maximum(idx, 0)], 0.0)

    prev, nxt = ctx.prev_row[rows], ctx.next_row[rows]
    prev2 = np.where(prev >= 0, ctx.prev_row[np.maximum(prev, 0)], -1)
    next2 = np.where(nxt >= 0, ctx.next_row[np.maximum(nxt, 0)], -1)
    out: dict[str, NDArray[np.float64]] = {}
    for name, rel in (("lexical", lex_rel), ("cosine", cos_rel)):
        p1, n1 = at(rel, prev), at(rel, nxt)
        out[f"prev_{name}_rel"], out[f"next_{name}_rel"] = p1, n1
        out[f"nb1_{name}_rel"] = np.maximum(p1, n1)
        out[f"nb2_{name}_rel"] = np.maximum.reduce([p1, n1, at(rel, prev2), at(rel, next2)])
        out[f"session_max_{name}_rel"], out[f"session_other_{name}_rel"] = _session_stats(rel, ctx.session, rows)
    is_q = ctx.is_question.astype(np.float64)
    n_words, has_time = ctx.text_facts(rows)
    has_time = has_time.astype(np.float64)
    out.update({
        "log_words": np.log1p(n_words),
        "is_question": is_q[rows],
        "after_question_lexical_rel": at(is_q, prev) * at(lex_rel, prev),
        "after_question_cosine_rel": at(is_q, prev) * at(cos_rel, prev),
        "has_time": has_time,
        "when_x_has_time": when * has_time,
    })
    return out
