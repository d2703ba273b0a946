"""Learned fusion, the study: data, pairwise training, leave-one-group-out CV and the peer
runs it is compared with. :mod:`memofs_eval.studies.learned_report` writes it out;
``python -m memofs_eval.studies.learned`` runs both.

* Candidates: the reference pools (:func:`memofs.ranking.pools.pools`, K = the spec's k:
  top 3K by cosine, top 2K by lexical); features: :func:`memofs.ranking.learned.features`.
* Model: :func:`train` fits scikit-learn's ``LogisticRegression`` on standardised pairwise
  differences ``x_i - x_j`` for every pair of candidates of one query with ``rel_i > rel_j``
  (label 1; every other pair negated with label 0, the same loss), each query weighted
  equally (pair weight ``1 / pairs(query)``), no intercept. Linear, so the model file is a
  list of coefficients and the online scorer is a dot product.
* Folds (:func:`memofs_eval.inputs.folds.leave_one_group_out`): leave one LoCoMo conversation out;
  on agent-memory leave one project out, training on the *tune* queries of the other
  projects and scoring the *heldout* queries of the left-out one. Only held-out scores are
  results.
* Peers are the harness's own, computed by the harness's code on the harness's frames, so
  a name here is the number of the same name in ``memofs-eval run``'s report of the
  dataset's spec: pipeline variants by their spec name (:func:`memofs_eval.runs.runner.fused_run`
  on :func:`memofs_eval.inputs.spec.expand_variants` configs) and ``baseline:<method>@<raw|rewritten>``
  (:func:`memofs_eval.runs.baselines.baseline_runs`, tuned ones on the harness's
  :func:`memofs_eval.inputs.folds.evaluation_folds`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import memofs_eval._env  # noqa: F401  (cache and offline variables before ranx / torch)
import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from memofs.ranking.config import RecallConfig
from memofs.ranking.learned import FEATURES, FeatureParams, LearnedModel, TrainingRange, features, fuse_learned
from memofs.ranking.pools import pools
from memofs.signals.frame import SignalFrame
from memofs_eval._env import REPO, cache_root
from memofs_eval.runs.baselines import QUERY_TEXTS, baseline_runs
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.inputs.folds import check_grouped, evaluation_folds, leave_one_group_out
from memofs_eval.scoring.metrics import per_query
from memofs_eval.runs.runner import Ranked, fused_run
from memofs_eval.runs.signals_cache import SignalCache
from memofs_eval.inputs.spec import TOGGLES, DatasetRef, Spec, expand_variants, load_spec
from memofs_datasets.shared import locomo_path, longmemeval_dev_path

AGENT_MEMORY_PATH = REPO / "datasets" / "agent-memory"
SPECS = REPO / "eval" / "specs"
C_DEFAULT = 1.0
TIME_FEATURES = ("log_age", "age_missing", "recency", "age_rel")
CUE_FEATURES = tuple(f for f in FEATURES if "_x_" in f)
PIPELINE_PEERS = ("default", "-recency", "-decay", "-recency,-decay", "only:bm25", "only:bm25,fuzzy", "only:vector")


# --------------------------------------------------------------------------- data


def dataset_ref(name: str) -> DatasetRef:
    if name == "locomo":
        path = locomo_path()
        if path is None:
            raise SystemExit("learned fusion study: LoCoMo is not in shared data ($MEMOFS_SHARED, default ../shared)")
        # the spec's loader options, on the shared copy wherever it lives
        return DatasetRef("locomo", path, "locomo", dict(dataset_spec("locomo").datasets[0].options))
    if name == "longmemeval":
        path = longmemeval_dev_path()
        if path is None:
            raise SystemExit("learned fusion study: the LongMemEval dev sample is not in shared data ($MEMOFS_SHARED, default ../shared)")
        return DatasetRef("longmemeval", path, "longmemeval", dict(dataset_spec("longmemeval").datasets[0].options))
    if name == "agent-memory":
        return DatasetRef("agent-memory", AGENT_MEMORY_PATH, "memofs")
    if name == "tiny":
        return DatasetRef("tiny", REPO / "datasets" / "tiny", "memofs")
    raise ValueError(f"unknown dataset {name!r} (locomo | longmemeval | agent-memory | tiny)")


def dataset_spec(name: str) -> Spec:
    """The spec whose ``memofs-eval run`` report the study's peers must match."""
    return load_spec(SPECS / {"locomo": "locomo.toml", "longmemeval": "longmemeval.toml"}.get(name, "default.toml"))


def dataset_present(name: str) -> bool:
    """Whether ``name``'s data is here (shared datasets may be absent in a fresh clone)."""
    return {"locomo": locomo_path, "longmemeval": longmemeval_dev_path}.get(name, lambda: AGENT_MEMORY_PATH)() is not None


def frames_for(data: EvalData, embedder: str = "minilm", root: Path | None = None, progress: bool = False,
               cfg: RecallConfig | None = None) -> dict[str, SignalFrame]:
    """Every query's frame at ``cfg``'s signal settings (default: the spec's), from the
    harness's own signal cache (:class:`memofs_eval.runs.signals_cache.SignalCache`)."""
    return SignalCache(root or cache_root(), progress).frames(data, cfg or RecallConfig(), embedder).frames


@dataclass
class Bench:
    """One dataset ready for learning: frames, judgements and per-query facts."""

    name: str
    frames: dict[str, SignalFrame]
    qrels: dict[str, dict[str, int]]
    category: dict[str, str]
    group: dict[str, str]
    split: dict[str, str | None]
    data: EvalData | None = None  # the harness's view, for the peers
    spec: Spec | None = None
    root: Path | None = None  # cache root of the frames (default: the harness's)
    embedder: str | None = None  # default: the spec's

    @property
    def qids(self) -> list[str]:
        return list(self.frames)

    @classmethod
    def load(cls, name: str, embedder: str | None = None, progress: bool = False, root: Path | None = None) -> Bench:
        spec = dataset_spec(name)
        data = EvalData(dataset_ref(name), load(dataset_ref(name)))
        emb = embedder or spec.embedder
        frames = frames_for(data, emb, root, progress, spec.default_config())
        return cls(name, frames, data.qrels, data.category, data.group, data.split, data, spec, root, emb)

    def frames_of(self, cfg: RecallConfig) -> dict[str, SignalFrame]:
        """Frames at ``cfg``'s signal settings: the bench's own when they match the spec's
        default, else the harness's cached frames of that signal group (``only:bm25``
        switches rewriting off, which changes the signals, as in ``memofs-eval run``)."""
        spec = self.spec or dataset_spec(self.name)
        if cfg.signal_key() == spec.default_config().signal_key():
            return self.frames
        if self.data is None:
            raise ValueError(f"{self.name}: frames of another signal group need the bench's harness data (Bench.load)")
        return frames_for(self.data, self.embedder or spec.embedder, self.root, cfg=cfg)


# --------------------------------------------------------------------------- training


@dataclass
class Block:
    """One query's candidates (the reference pools) with features and relevance."""

    qid: str
    rows: np.ndarray
    member: dict[str, np.ndarray]
    X: np.ndarray
    y: np.ndarray


def blocks(bench: Bench, qids: Sequence[str], cfg: RecallConfig, params: FeatureParams) -> list[Block]:
    out = []
    for q in qids:
        f = bench.frames[q]
        rows, _w, _lex, member = pools(f, cfg, cfg.top_k)
        rel = bench.qrels.get(q, {})
        y = np.array([rel.get(f.ids[r], 0) for r in rows.tolist()], dtype=np.float64)
        out.append(Block(q, rows, member, features(f, rows, member, params), y))
    return out


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


def train(blocks_: Sequence[Block], feature_names: Sequence[str] = FEATURES, C: float = C_DEFAULT,
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


# --------------------------------------------------------------------------- runs


def run_model(bench: Bench, qids: Sequence[str], model: LearnedModel, cfg: RecallConfig) -> Ranked:
    """Held-out ranking through the online code path (``fuse_learned``)."""
    return {q: [bench.frames[q].ids[i] for i in fuse_learned(bench.frames[q], cfg, cfg.top_k, model=model).rows.tolist()] for q in qids}


def run_oracle(bench: Bench, qids: Sequence[str], cfg: RecallConfig) -> Ranked:
    """The best any reordering of the pools can do: judged relevance desc, then id."""
    out = {}
    for q in qids:
        f = bench.frames[q]
        rows, *_ = pools(f, cfg, cfg.top_k)
        rel = bench.qrels[q]
        ids = [f.ids[r] for r in rows.tolist()]
        out[q] = sorted(ids, key=lambda d: (-rel.get(d, 0), d))[: cfg.top_k]
    return out


def pipeline_configs(spec: Spec, names: Sequence[str] = PIPELINE_PEERS) -> dict[str, RecallConfig]:
    """Configs of pipeline variants by name: the spec's own (``default``, ``-X``, ``only:X``,
    ...), or two toggles at once in the same grammar: ``-X,-Y`` (both off) and ``only:X,Y``
    (X and Y on, every other toggle of the spec off, as ``only:X`` does)."""
    by_name = {v.name: v.config for v in expand_variants(spec)}
    base = spec.default_config()
    out = {}
    for n in names:
        if n in by_name:
            out[n] = by_name[n]
            continue
        only = n.startswith("only:")
        named = n[len("only:"):].split(",") if only else [t[1:] if t.startswith("-") else "" for t in n.split(",")]
        if not all(t in TOGGLES for t in named):
            raise ValueError(f"unknown pipeline variant {n!r} for spec {spec.name!r}")
        if only:
            changes = {TOGGLES[t]: (t in named) for t in (*spec.toggles, *named)}
        else:
            changes = {TOGGLES[t]: False for t in named}
        out[n] = base.replace(**changes)
    return out


def peer_runs(bench: Bench, queries: Sequence[str] = QUERY_TEXTS) -> tuple[dict[str, Ranked], dict[str, object]]:
    """The spec's baselines on each query text, exactly as ``memofs-eval run`` computes them."""
    spec, data = bench.spec, bench.data
    if spec is None or data is None:
        raise ValueError(f"{bench.name}: peers need the bench's spec and harness data (Bench.load)")
    cfg = spec.default_config()
    folds, _ = evaluation_folds(data, spec.tune.folds if spec.tune else 5, spec.seed)
    metric = spec.tune.metric if spec.tune else spec.stats.metrics[0]
    runs: dict[str, Ranked] = {}
    params: dict[str, object] = {}
    for query in queries:
        texts = {q.id: (q.text if query == "raw" else bench.frames[q.id].query_text) for q in data.queries}
        r, p = baseline_runs(data, spec.baselines, query, texts, spec.k, cfg.k1, cfg.b, bench.embedder or spec.embedder,
                             cache_root(), folds, metric)
        runs.update(r)
        params.update(p)
    return runs, params


def ndcg(bench: Bench, ranked: Ranked, metric: str = "ndcg@10") -> pd.Series:
    judged = {q: bench.qrels[q] for q in ranked}
    return per_query(judged, ranked, [metric])[metric].reindex(list(ranked))


# --------------------------------------------------------------------------- CV


def folds(bench: Bench, by_split: bool) -> list[tuple[str, list[str], list[str]]]:
    """Leave one group out over the bench's queries (:func:`memofs_eval.inputs.folds.leave_one_group_out`)."""
    fs = leave_one_group_out(bench.qids, bench.group, bench.split if by_split else None)
    check_grouped(bench.group, fs)
    return fs


def cv_learned(bench: Bench, fs, cfg: RecallConfig, feature_names: Sequence[str] = FEATURES, C: float = C_DEFAULT,
               extra: Sequence[Block] = ()) -> tuple[Ranked, list[LearnedModel]]:
    """Held-out runs of models trained fold by fold (``extra``: added training blocks from
    another dataset, for the mixed model)."""
    params = FeatureParams.from_config(cfg)
    cache: dict[str, Block] = {b.qid: b for b in blocks(bench, sorted({q for _, tr, _ in fs for q in tr}), cfg, params)}
    ranked: Ranked = {}
    models = []
    for _g, tr, te in tqdm(fs, desc="learned fusion folds", unit="fold", leave=False):
        m = train([cache[q] for q in tr] + list(extra), feature_names, C, params)
        models.append(m)
        ranked.update(run_model(bench, te, m, cfg))
    return ranked, models


@dataclass
class Study:
    """Every run of one dataset on its held-out queries, and what was chosen per fold."""

    bench: Bench
    qids: list[str]
    runs: dict[str, Ranked]
    scores: pd.DataFrame  # held-out query x run, the spec's tune metric
    peer_params: dict[str, object]
    models: list[LearnedModel]
    folds: list[tuple[str, list[str], list[str]]]

    @property
    def peers(self) -> list[str]:
        return [n for n in self.runs if n in PIPELINE_PEERS or n.startswith("baseline:")]


LEARNED_RUNS = ("learned", "learned_no_cues", "learned_no_time", "learned_mixed", "oracle_pools")


def study(bench: Bench, by_split: bool, C: float = C_DEFAULT, extra: Sequence[Block] = (),
          log: Callable[[str], None] = print, peers: bool = True) -> Study:
    """Peers and learned runs of ``bench`` on the test queries of its leave-one-group-out
    folds (``peers=False``: the learned runs only, for quick checks)."""
    spec = bench.spec or dataset_spec(bench.name)
    cfg = spec.default_config()
    fs = folds(bench, by_split)
    qids = [q for _, _, te in fs for q in te]
    runs: dict[str, Ranked] = {}
    params: dict[str, object] = {}
    if peers:
        for name, c in pipeline_configs(spec).items():
            group = bench.frames_of(c)
            runs[name] = fused_run({q: group[q] for q in qids}, c, spec.k)
        pr, params = peer_runs(bench)
        runs.update({n: {q: r[q] for q in qids} for n, r in pr.items() if all(q in r for q in qids)})
        log(f"{bench.name}: peers done")
    runs["learned"], models = cv_learned(bench, fs, cfg, FEATURES, C)
    runs["learned_no_cues"], _ = cv_learned(bench, fs, cfg, [f for f in FEATURES if f not in CUE_FEATURES], C)
    runs["learned_no_time"], _ = cv_learned(bench, fs, cfg, [f for f in FEATURES if f not in CUE_FEATURES and f not in TIME_FEATURES], C)
    if extra:
        runs["learned_mixed"], _ = cv_learned(bench, fs, cfg, FEATURES, C, extra=extra)
    runs["oracle_pools"] = run_oracle(bench, qids, cfg)
    log(f"{bench.name}: learned runs done")
    metric = spec.tune.metric if spec.tune else "ndcg@10"
    scores = pd.DataFrame({n: ndcg(bench, {q: r[q] for q in qids}, metric) for n, r in runs.items()})
    return Study(bench, qids, runs, scores, params, models, fs)
