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

The query cues, the features and the model-file format are modules of their own
(:mod:`memofs.ranking.query_cues`, :mod:`memofs.ranking.learned_features`,
:mod:`memofs.ranking.learned_model`), re-exported here under their old names; this module
scores candidates and falls back to the formula out of distribution.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from memofs.ranking.config import RecallConfig
from memofs.ranking.learned_features import (FEATURE_GROUPS, FEATURE_SETS, FEATURES, KIND_NAMES, FeatureParams,
                                             feature_set, features)
from memofs.ranking.learned_model import (FORMAT, MODEL_KINDS, VERSION, LambdaMartModel, LearnedModel, Model,
                                          ModelFileError, TrainingRange, load_model, model_from_json)
from memofs.ranking.pools import Fused, pools
from memofs.ranking.rounding import round_half_up
from memofs.ranking.query_cues import DATE_CUES, PAST_CUES, PRESENT_CUES, QueryCues, query_cues
from memofs.signals.frame import SignalFrame

__all__ = [
    "DATE_CUES", "FEATURES", "FEATURE_GROUPS", "FEATURE_SETS", "FORMAT", "KIND_NAMES", "MODEL_KINDS", "PAST_CUES",
    "PRESENT_CUES", "VERSION", "FeatureParams", "LambdaMartModel", "LearnedModel", "Model", "ModelFileError",
    "QueryCues", "Scored", "TrainingRange", "feature_set", "features", "fuse_learned", "load_model",
    "model_from_json", "out_of_distribution", "query_cues", "rank_order", "rrf_scores", "score",
]

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
