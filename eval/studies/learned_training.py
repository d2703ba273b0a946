"""Training the learned fusion's two model families on feature blocks of the reference pools.

* :class:`Block`: one query's candidates (:func:`memofs.ranking.pools.pools`, K = the
  spec's k: top 3K by cosine, top 2K by lexical), their features
  (:func:`memofs.ranking.learned.features`) and judged relevance; :func:`query_block` makes one.
* :func:`train`: scikit-learn's ``LogisticRegression`` on standardised pairwise differences
  ``x_i - x_j`` for every pair of candidates of one query with ``rel_i > rel_j`` (label 1;
  every other pair negated with label 0, the same loss), each query weighted by its
  ``query_weight`` spread over its pairs, no intercept. Linear, so the model file is a list
  of coefficients and the online scorer is a dot product.
* :func:`train_lambdamart`: LightGBM ``lambdarank``, one query group per block.

Hyperparameters are fixed a priori (:data:`C`, :data:`LGBM_PARAMS`, :data:`LGBM_ROUNDS`):
no score chose them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from memofs.ranking.config import RecallConfig
from memofs.ranking.learned import FEATURES, FeatureParams, LambdaMartModel, LearnedModel, TrainingRange, features
from memofs.ranking.pools import pools
from memofs.signals.frame import SignalFrame

C = 1.0
LGBM_PARAMS: dict[str, object] = {
    "objective": "lambdarank", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 50, "lambda_l2": 1.0,
    "lambdarank_truncation_level": 20, "eval_at": [10], "deterministic": True, "force_row_wise": True,
    "num_threads": 1, "seed": 42, "verbose": -1,
}
LGBM_ROUNDS = 150


@dataclass
class Block:
    """One query's candidates (the reference pools) with features and relevance."""

    qid: str
    rows: np.ndarray
    member: dict[str, np.ndarray]
    X: np.ndarray
    y: np.ndarray


def query_block(qid: str, frame: SignalFrame, rel: Mapping[str, int], cfg: RecallConfig, params: FeatureParams) -> Block:
    """``qid``'s reference pools at ``cfg``, their features under ``cfg``'s switches and their
    relevance in ``rel`` (0 when unjudged)."""
    rows, _w, _lex, member = pools(frame, cfg, cfg.top_k)
    y = np.array([rel.get(frame.ids[r], 0) for r in rows.tolist()], dtype=np.float64)
    return Block(qid, rows, member, features(frame, rows, member, params, cfg), y)


def pairs(blocks_: Sequence[Block], cols: Sequence[int], query_weight: Sequence[float] | None = None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairwise differences ``x_i - x_j`` (``rel_i > rel_j``, same query) with label 1, every
    other one negated with label 0, and weights ``query_weight / pairs(query)`` (default 1:
    each query counts the same)."""
    diffs, weights = [], []
    qw = list(query_weight) if query_weight is not None else [1.0] * len(blocks_)
    for b, wq in zip(blocks_, qw, strict=True):
        hi, lo = np.nonzero(b.y[:, None] > b.y[None, :])
        if hi.size == 0:
            continue
        X = b.X[:, cols]
        diffs.append(X[hi] - X[lo])
        weights.append(np.full(hi.size, wq / hi.size))
    if not diffs:
        raise ValueError("no training pair: no query has a relevant and a non-relevant candidate")
    D = np.concatenate(diffs)
    w = np.concatenate(weights)
    # without an intercept, log-loss of (d, 1) equals that of (-d, 0): flipping every other
    # pair gives sklearn its two classes at half the cost of mirroring them all
    flip = np.arange(len(D)) % 2 == 1
    return np.where(flip[:, None], -D, D), np.where(flip, 0.0, 1.0), w


def data_hash(blocks_: Sequence[Block]) -> str:
    h = hashlib.sha256()
    for b in blocks_:
        h.update(b.qid.encode())
        h.update(np.ascontiguousarray(b.X).tobytes())
        h.update(np.ascontiguousarray(b.y).tobytes())
    return h.hexdigest()[:16]


def train(blocks_: Sequence[Block], feature_names: Sequence[str] = FEATURES, C: float = C,
          params: FeatureParams | None = None, meta: Mapping | None = None,
          query_weight: Sequence[float] | None = None) -> LearnedModel:
    """Pairwise logistic regression on standardised features (see module docstring);
    ``query_weight``: per block (default 1; the study gives each dataset the same total)."""
    from sklearn import __version__ as skv
    from sklearn.linear_model import LogisticRegression

    cols = [FEATURES.index(f) for f in feature_names]
    allX = np.concatenate([b.X[:, cols] for b in blocks_])
    mean = allX.mean(axis=0)
    scale = allX.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)  # constant columns: any scale, their diffs are 0
    scaled = [Block(b.qid, b.rows, b.member, (b.X[:, cols] - mean) / scale, b.y) for b in blocks_]
    D, y, w = pairs(scaled, list(range(len(cols))), query_weight)
    clf = LogisticRegression(C=C, fit_intercept=False, solver="newton-cholesky", max_iter=200, tol=1e-8)
    clf.fit(D, y, sample_weight=w * (len(w) / w.sum()))  # weights sum to n: C keeps its usual scale
    coef = clf.coef_[0]
    # a constant column contributes nothing; pin its coefficient so the file says so
    coef = np.where(allX.std(axis=0) > 1e-12, coef, 0.0)
    training = {"sklearn": skv, "C": C, "queries": len(blocks_), "pairs": int(len(D)),
                "candidates": int(len(allX)), "data_sha256_16": data_hash(blocks_), **dict(meta or {})}
    return LearnedModel(tuple(feature_names), mean, scale, coef, params or FeatureParams(), training=training,
                        range=TrainingRange.of(allX))


def train_lambdamart(blocks_: Sequence[Block], feature_names: Sequence[str], params: FeatureParams,
                     query_weight: Sequence[float], meta: dict | None = None) -> LambdaMartModel:
    """LightGBM ``lambdarank`` on the blocks (one query group each, rows weighted by their
    query's weight), saved in LightGBM's text model format."""
    import lightgbm

    cols = [FEATURES.index(f) for f in feature_names]
    X = np.concatenate([b.X[:, cols] for b in blocks_])
    y = np.concatenate([b.y for b in blocks_]).astype(int)
    w = np.concatenate([np.full(len(b.y), qw) for b, qw in zip(blocks_, query_weight, strict=True)])
    ds = lightgbm.Dataset(X, y, group=[len(b.y) for b in blocks_], weight=w / w.mean(), feature_name=[f"f{i}" for i in range(len(cols))],
                          free_raw_data=True, params={"verbose": -1})
    booster = lightgbm.train(dict(LGBM_PARAMS), ds, num_boost_round=LGBM_ROUNDS)
    training = {"lightgbm": lightgbm.__version__, "params": {k: v for k, v in LGBM_PARAMS.items()}, "rounds": LGBM_ROUNDS,
                "queries": len(blocks_), "candidates": int(len(X)), **dict(meta or {})}
    return LambdaMartModel(tuple(feature_names), booster.model_to_string(), params, training=training, range=TrainingRange.of(X))
