"""Learned fusion (an option beyond the spec, whose limitation 3 is "no learned reranking").

The candidates are the formula's own pools (:func:`memofs.ranking.pools.pools`); only their scoring
changes. Each candidate gets a feature vector computed from the :class:`SignalFrame` alone
(no new extraction), and a linear model trained *pairwise* scores it:

    z_j   = (x_j - mean_j) / scale_j                    (standardisation from training)
    s     = sum_j coef_j * z_j                          (no intercept: pairwise differences cancel it)
    score = round_half_up(1 / (1 + exp(-s)), round_decimals)    (squashed into (0, 1) like the formula's)

Order: score descending, then id ascending (the pipeline's rule); cut at K.

Query-level features (query length, "asks about the past / the present" flags) cancel in a
pairwise linear model, so they enter only as interactions with candidate features (e.g.
``past * recency``): whether recency helps becomes a property of the query.

Context features read the frame's :class:`~memofs.signals.frame.ContextColumns`: the relevance of
the memories remembered next to a candidate in its session (an answer often sits next to
the turn that matches the question's words), the session's best relevance, and
facts about the candidate's text (length, "is a question", "mentions a moment").

Model files are small versioned JSON (:data:`FORMAT`, :data:`VERSION`); never pickle.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.files import safe_json
from memofs.files.records import MEMORY_KINDS
from memofs.ranking.config import DEFAULT_KIND_EXPIRY_DAYS, RecallConfig
from memofs.ranking.pools import Fused, lexical_score, pools
from memofs.ranking.terms import clamp01, confidence, recency, round_half_up, saturate, unverified
from memofs.signals.frame import ContextColumns, SignalFrame
from memofs.text.tokenize import tokenize_simple

FORMAT = "memofs-learned-fusion"
VERSION = 1

# --------------------------------------------------------------------------- query cues

_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
#: cues that a query asks about a past moment rather than the latest state
PAST_CUES = re.compile(
    r"\b(when\s+did|when\s+was|when\s+were|last\s+time|used\s+to|before|ago|previous(ly)?|earlier|originally|"
    r"at\s+first|back\s+(then|in)|in\s+the\s+past|first\s+time|did|was|were|had|went|"
    r"yesterday|last\s+(week|month|year|summer|winter|spring|fall|weekend)|\w{3,}ed)\b",
    re.I,
)
#: explicit dates: month or weekday names, years
DATE_CUES = re.compile(rf"\b({_MONTHS}|({_WEEKDAYS})s?|(19|20)\d\d)\b", re.I)
#: cues that a query asks about the present / latest state
PRESENT_CUES = re.compile(
    r"\b(now|current(ly)?|latest|these\s+days|still|today|right\s+now|most\s+recent(ly)?|newest|"
    r"at\s+present|any\s*more|nowadays|up\s+to\s+date)\b",
    re.I,
)


@dataclass(frozen=True)
class QueryCues:
    """Query-level flags (regex on the query text) and its length in words."""

    past: float
    date: float
    present: float
    when: float
    n_words: int


def query_cues(text: str) -> QueryCues:
    t = text or ""
    return QueryCues(
        past=float(PAST_CUES.search(t) is not None),
        date=float(DATE_CUES.search(t) is not None),
        present=float(PRESENT_CUES.search(t) is not None),
        when=float(re.match(r"\s*when\b", t, re.I) is not None),
        n_words=len(tokenize_simple(t)),
    )


# --------------------------------------------------------------------------- features


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
    has_time = ctx.has_time[rows].astype(np.float64)
    out.update({
        "log_words": np.log1p(ctx.n_words[rows]),
        "is_question": is_q[rows],
        "after_question_lexical_rel": at(is_q, prev) * at(lex_rel, prev),
        "after_question_cosine_rel": at(is_q, prev) * at(cos_rel, prev),
        "has_time": has_time,
        "when_x_has_time": when * has_time,
    })
    return out


# --------------------------------------------------------------------------- model


class ModelFileError(ValueError):
    """A defective model file: names the file, the line (JSON syntax errors) and the field."""

    def __init__(self, path: str | os.PathLike, field_name: str, message: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {field_name}: {message}")


@dataclass(frozen=True)
class TrainingRange:
    """The signal distribution a model was trained on: per feature (the model's order) the
    ``QUANTILES`` of its training candidates' values.

    A query's candidates are *out of distribution* when the mean over features of the share
    of candidate values outside ``[lo - w, hi + w]`` (``lo``, ``hi``: the 1st and 99th
    percentile, ``w = WIDEN * (hi - lo)``) exceeds the config's ``learned_ood_threshold``; a
    constant training feature counts a value as outside when it differs from that constant."""

    lo: NDArray[np.float64]
    hi: NDArray[np.float64]

    QUANTILES = (0.01, 0.99)
    WIDEN = 0.25

    @classmethod
    def of(cls, X: NDArray[np.float64]) -> TrainingRange:
        lo, hi = np.quantile(X, cls.QUANTILES, axis=0) if len(X) else (np.zeros(X.shape[1]), np.zeros(X.shape[1]))
        return cls(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64))

    def outside_share(self, X: NDArray[np.float64]) -> float:
        """Mean over features of the share of rows of ``X`` outside the widened range (0 for no rows)."""
        if len(X) == 0:
            return 0.0
        w = self.WIDEN * (self.hi - self.lo)
        eps = 1e-9 * np.maximum(1.0, np.abs(self.hi))
        out = (X < self.lo - w - eps) | (X > self.hi + w + eps)
        return float(out.mean())

    def to_json(self, names: tuple[str, ...]) -> dict[str, Any]:
        return {"quantiles": list(self.QUANTILES), "widen": self.WIDEN,
                "features": {f: [float(a), float(b)] for f, a, b in zip(names, self.lo, self.hi, strict=True)}}


@dataclass
class LearnedModel:
    """A linear pairwise model: ``s = coef . ((x - mean) / scale)`` over ``features``."""

    features: tuple[str, ...]
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    coef: NDArray[np.float64]
    params: FeatureParams = field(default_factory=FeatureParams)
    kind: str = "pairwise-logistic"
    training: dict[str, Any] = field(default_factory=dict)
    cv: dict[str, Any] = field(default_factory=dict)
    range: TrainingRange | None = None  # the training distribution (v3 files; None: never out of distribution)

    def __post_init__(self) -> None:
        n = len(self.features)
        for name in ("mean", "scale", "coef"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (n,):
                raise ValueError(f"LearnedModel.{name}: expected {n} values (one per feature), got shape {arr.shape}")
            if not np.isfinite(arr).all():
                raise ValueError(f"LearnedModel.{name}: values must be finite")
            setattr(self, name, arr)
        if (self.scale <= 0).any():
            raise ValueError("LearnedModel.scale: values must be > 0")

    def raw_scores(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """``coef . ((X - mean) / scale)`` per row (ranking is invariant to the squash)."""
        return ((X - self.mean) / self.scale) @ self.coef

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "model": self.kind,
            "formula": "score = 1 / (1 + exp(-sum_j coef[j] * (x[j] - mean[j]) / scale[j]))",
            "feature_params": self.params.to_dict(),
            "features": [
                {"name": f, "mean": float(m), "scale": float(s), "coef": float(c)}
                for f, m, s, c in zip(self.features, self.mean, self.scale, self.coef, strict=True)
            ],
            **_range_json(self.range, self.features),
            "training": self.training,
            "cv": self.cv,
        }

    def save(self, path: str | os.PathLike) -> Path:
        return _save(self.to_json(), path)

    def file_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class LambdaMartModel:
    """LightGBM ``lambdarank`` (LambdaMART) trees over ``features``, kept as LightGBM's text
    model format (``Booster.model_to_string``) inside the JSON file; the score is the
    booster's raw output ``s`` (a sum of tree leaves), squashed like the linear model's."""

    features: tuple[str, ...]
    booster_text: str
    params: FeatureParams = field(default_factory=FeatureParams)
    kind: str = "lambdamart"
    training: dict[str, Any] = field(default_factory=dict)
    cv: dict[str, Any] = field(default_factory=dict)
    range: TrainingRange | None = None

    def __post_init__(self) -> None:
        import lightgbm

        self._booster = lightgbm.Booster(model_str=self.booster_text)
        if self._booster.num_feature() != len(self.features):
            raise ValueError(f"LambdaMartModel: the booster has {self._booster.num_feature()} features, the file lists {len(self.features)}")

    def raw_scores(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        if len(X) == 0:
            return np.zeros(0)
        return np.asarray(self._booster.predict(X, raw_score=True, num_threads=1), dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "model": self.kind,
                "formula": "score = 1 / (1 + exp(-s)), s = LightGBM lambdarank raw score (sum of leaf values)",
                "feature_params": self.params.to_dict(), "features": [{"name": f} for f in self.features],
                **_range_json(self.range, self.features), "lightgbm_model": self.booster_text,
                "training": self.training, "cv": self.cv}

    def save(self, path: str | os.PathLike) -> Path:
        return _save(self.to_json(), path)

    def file_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


Model = LearnedModel | LambdaMartModel
MODEL_KINDS = ("pairwise-logistic", "lambdamart")


def _range_json(rng: TrainingRange | None, names: tuple[str, ...]) -> dict[str, Any]:
    return {} if rng is None else {"training_range": rng.to_json(names)}


def _save(doc: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a model document as indented JSON (floats round-trip exactly)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    _CACHE.pop(str(p.resolve()), None)
    return p


def model_from_json(data: Any, path: str | os.PathLike = "<model>") -> Model:
    """Validate and build a model; errors name ``path`` and the offending field."""
    if not isinstance(data, dict):
        raise ModelFileError(path, "<root>", "expected a JSON object")
    if data.get("format") != FORMAT:
        raise ModelFileError(path, "format", f"expected {FORMAT!r}, got {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise ModelFileError(path, "version", f"this memofs reads version {VERSION}, got {data.get('version')!r}")
    kind = data.get("model")
    if kind not in MODEL_KINDS:
        raise ModelFileError(path, "model", f"unknown model kind {kind!r} (expected one of {', '.join(map(repr, MODEL_KINDS))})")
    feats = data.get("features")
    if not isinstance(feats, list) or not feats:
        raise ModelFileError(path, "features", "expected a non-empty list")
    names, mean, scale, coef = [], [], [], []
    for i, f in enumerate(feats):
        if not isinstance(f, dict):
            raise ModelFileError(path, f"features[{i}]", "expected an object")
        name = f.get("name")
        if name not in FEATURES:
            raise ModelFileError(path, f"features[{i}].name", f"unknown feature {name!r}")
        if name in names:
            raise ModelFileError(path, f"features[{i}].name", f"duplicate feature {name!r}")
        names.append(name)
        if kind == "lambdamart":
            continue
        for key, out in (("mean", mean), ("scale", scale), ("coef", coef)):
            v = f.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ModelFileError(path, f"features[{i}].{key}", f"expected a finite number, got {v!r}")
            if key == "scale" and not v > 0:
                raise ModelFileError(path, f"features[{i}].scale", f"must be > 0, got {v!r}")
            out.append(float(v))
    fp = data.get("feature_params", {})
    if not isinstance(fp, dict):
        raise ModelFileError(path, "feature_params", "expected an object")
    try:
        params = FeatureParams(**{**FeatureParams().to_dict(), **fp})
    except TypeError as exc:
        raise ModelFileError(path, "feature_params", str(exc)) from None
    for key in ("fuzzy_boost", "saturation_c", "half_life_days", "default_confidence"):
        v = getattr(params, key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ModelFileError(path, f"feature_params.{key}", f"expected a finite number >= 0, got {v!r}")
    if not isinstance(params.kind_expiry_days, dict):
        raise ModelFileError(path, "feature_params.kind_expiry_days", "expected an object of kind -> days")
    try:
        params.config()  # the features run under it: a constant it rejects is the file's error
    except ValueError as exc:
        raise ModelFileError(path, "feature_params", str(exc)) from None
    rng = _range_from_json(data.get("training_range"), names, path)
    meta = {"training": dict(data.get("training") or {}), "cv": dict(data.get("cv") or {}), "range": rng}
    if kind == "lambdamart":
        text = data.get("lightgbm_model")
        if not isinstance(text, str) or not text.startswith("tree"):
            raise ModelFileError(path, "lightgbm_model", "expected LightGBM's text model format (Booster.model_to_string)")
        try:
            return LambdaMartModel(tuple(names), text, params, **meta)
        except (ValueError, Exception) as exc:  # lightgbm raises its own LightGBMError on a bad model string
            raise ModelFileError(path, "lightgbm_model", str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    return LearnedModel(tuple(names), np.array(mean), np.array(scale), np.array(coef), params, **meta)


def _range_from_json(doc: Any, names: list[str], path: str | os.PathLike) -> TrainingRange | None:
    """``training_range`` of a model file (absent in v2 files: None)."""
    if doc is None:
        return None
    per = doc.get("features") if isinstance(doc, dict) else None
    if not isinstance(per, dict):
        raise ModelFileError(path, "training_range.features", "expected an object of feature -> [lo, hi]")
    lo, hi = [], []
    for f in names:
        v = per.get(f)
        if (not isinstance(v, list) or len(v) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v) or v[0] > v[1]):
            raise ModelFileError(path, f"training_range.features.{f}", f"expected [lo, hi] with lo <= hi, got {v!r}")
        lo.append(float(v[0]))
        hi.append(float(v[1]))
    return TrainingRange(np.array(lo), np.array(hi))


_CACHE: dict[str, tuple[float, int, Model]] = {}


def load_model(path: str | os.PathLike) -> Model:
    """Read a model file (memoised per path, reloaded when the file changes)."""
    p = Path(path)
    key = os.path.abspath(p)  # not resolve(): a symlink loop raises RuntimeError there
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ModelFileError(p, "learned_model", "file not found") from None
    except OSError as exc:  # a symlink loop, a permission
        raise ModelFileError(p, "learned_model", f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == st.st_mtime and hit[1] == st.st_size:
        return hit[2]
    try:  # the store's reader: a FIFO or directory is refused, never opened; depth and UTF-8 checked
        data = safe_json.load_file(p)
    except safe_json.JSONFileError as exc:
        raise ModelFileError(exc.where, "json", exc.reason) from None
    except OSError as exc:
        raise ModelFileError(p, "learned_model", f"cannot be read ({exc})") from None
    model = model_from_json(data, p)
    _CACHE[key] = (st.st_mtime, st.st_size, model)
    return model


# --------------------------------------------------------------------------- fusion


def out_of_distribution(model: Model, X: NDArray[np.float64]) -> float | None:
    """The share of the candidates' model-feature values outside the model's training range
    (:meth:`TrainingRange.outside_share`); None when the file records no range (v2 files)."""
    return None if model.range is None else model.range.outside_share(X)


def rrf_scores(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """The fallback fusion: the ``rrf`` feature (lexical and cosine ranks within the candidates, k = 60)."""
    return X[:, FEATURES.index("rrf")]


@dataclass(frozen=True)
class Scored:
    """One query's candidates scored by a model (or its fallback): rounded ``final`` scores,
    the ``raw`` score they come from, the unrounded ``composite``, the out-of-distribution
    ``share`` (None without a training range) and the ``note`` explain shows."""

    final: NDArray[np.float64]
    raw: NDArray[np.float64]
    composite: NDArray[np.float64]
    share: float | None
    fell_back: bool
    note: str


def score(model: Model, X: NDArray[np.float64], cfg: RecallConfig) -> Scored:
    """Score candidates whose :data:`FEATURES` matrix is ``X``: ``1 / (1 + exp(-raw))``
    rounded half up to ``cfg.round_decimals``, or the RRF fallback on out-of-distribution
    candidates (see :func:`fuse_learned`). The one scorer of the online path and the study."""
    cols = [FEATURES.index(f) for f in model.features]
    share = out_of_distribution(model, X[:, cols])
    ood = share is not None and share > cfg.learned_ood_threshold
    if ood and cfg.learned_fallback == "rrf":
        raw = rrf_scores(X)
        composite = raw
        note = (f"learned model out of distribution ({share:.3f} of feature values outside its training range "
                f"> {cfg.learned_ood_threshold}): fell back to rrf")
    else:
        raw = model.raw_scores(X[:, cols])
        composite = 1.0 / (1.0 + np.exp(-np.clip(raw, -500.0, 500.0)))
        if ood:
            note = f"learned model ({model.kind}); out of distribution ({share:.3f} > {cfg.learned_ood_threshold}), kept (learned_fallback='none')"
        else:
            note = f"learned model ({model.kind})" + ("" if share is None else f"; in distribution ({share:.3f} outside its training range)")
    return Scored(round_half_up(composite, cfg.round_decimals), raw, composite, share, ood and cfg.learned_fallback == "rrf", note)


def rank_order(final: NDArray[np.float64], order_key: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    """Candidate positions best first: score descending, then id ascending (the pipeline's rule); cut at ``k``."""
    return np.lexsort((order_key, -final))[:k]


def fuse_learned(frame: SignalFrame, cfg: RecallConfig, k: int, model: Model | None = None, candidates=None):
    """The formula's pools scored by ``model`` (default: ``cfg.learned_model``); returns a
    :class:`memofs.ranking.pools.Fused` whose ``parts`` hold the features and the raw score.
    ``candidates``: ``pools(frame, cfg, k)`` when the caller already has it.

    Safe fallback: when the candidates are out of the model's training distribution
    (:func:`out_of_distribution` > ``cfg.learned_ood_threshold``) and ``cfg.learned_fallback``
    is ``"rrf"``, they are ranked by :func:`rrf_scores` instead; explain's ``weights.dynamic``
    says which happened, and ``parts["learned_ood_share"]`` holds the share."""

    if model is None:
        if cfg.learned_model is None:
            raise ValueError("fusion='learned' needs RecallConfig.learned_model")
        model = load_model(cfg.learned_model)
    pool = candidates if candidates is not None else pools(frame, cfg, k)
    rows, w, member = pool.rows, pool.weights, pool.member
    X = features(frame, rows, member, model.params, cfg)
    sc = score(model, X, cfg)
    final, raw, composite = sc.final, sc.raw, sc.composite
    order = rank_order(final, frame.order_key[rows], k)
    parts: dict[str, NDArray] = {f: X[:, j] for j, f in enumerate(FEATURES)}
    nan = np.full(rows.size, np.nan)
    ones = np.ones(rows.size)
    # the keys explain_row reads: raw signals as extracted; formula-only components are
    # absent (NaN); penalties are not applied by the model (stale/unverified are features)
    parts.update({
        "cosine": frame.cosine[rows], "rerank": frame.rerank[rows], "stale": frame.stale[rows].copy(),
        "unverified": parts["unverified"].astype(bool), "stale_factor": ones, "unverified_factor": ones, "penalty": ones,
        "base_before_rerank": nan, "base": nan, "composite": composite,
        "learned_raw": raw, "learned_ood_share": np.full(rows.size, np.nan if sc.share is None else sc.share),
    })
    parts.update(member)
    return Fused(rows=rows[order], scores=final[order], weights=replace(w, reason=f"{w.reason}; {sc.note}"),
                 candidate_parts=parts, order=order)
