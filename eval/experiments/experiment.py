"""One experiment end to end: datasets -> cached signals -> recombined runs, tuned runs and
baselines -> per-query metrics -> statistics. :mod:`memofs_eval.reporting.report` writes it out.

Method names: pipeline variants by their spec name (``default``, ``-vector``,
``only:bm25``, ``w_vec=0.3``, ...), ``tuned`` for the cross-validated grid choice,
``baseline:<method>@<raw|rewritten>`` for peer baselines (:mod:`memofs_eval.runs.baselines`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import memofs_eval._env  # noqa: F401
import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from memofs_eval.scoring import attribution as A
from memofs_eval.scoring import measures as MS
from memofs_eval.scoring import stats as S
from memofs_eval.runs.baselines import baseline_scores, top_ids
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.execution.executor import LOCAL, Executor, closing_executor, open_executor
from memofs_eval.inputs.folds import evaluation_folds
from memofs_eval.runs.runner import Ranked, fused_scores, run_all
from memofs_eval.runs.signals_cache import SignalCache, frames_only
from memofs_eval.inputs.spec import KEY_VARIANT_GROUPS, Spec, Variant, tune_variants
from memofs_eval.scoring.ties import peer_tie_rates, tie_rate
from memofs_eval.runs.tune import TuneResult, select, tune

TUNED = "tuned"
TIE_GROUPS = frozenset({"default", "leave_one_out", "only", "embedder"})  # methods whose tie rate is reported


@dataclass
class MethodInfo:
    name: str
    group: str  # default | leave_one_out | only | sweep | grid | embedder | tuned | baseline
    axis: str = ""
    value: object = None
    config_hash: str = ""
    embedder: str = ""


@dataclass
class DatasetResult:
    data: EvalData
    runs: dict[str, Ranked]  # method -> ranked ids per query
    per_query: dict[str, pd.DataFrame]  # method -> query x metric
    covered: dict[str, list[str]]  # method -> queries it was evaluated on
    tune: TuneResult | None = None
    baseline_params: dict = field(default_factory=dict)
    embedder_names: dict[str, str] = field(default_factory=dict)  # spec name -> resolved name
    timings: dict[str, float] = field(default_factory=dict)
    facts: MS.Facts | None = None  # superseded / stale / expired memories and texts (memofs_eval.scoring.measures)
    attribution: pd.DataFrame | None = None  # the default pipeline's top-K hits, split by signal
    tie_rates: dict[str, float] = field(default_factory=dict)  # method -> top-10 tie rate (memofs_eval.scoring.ties)


@dataclass
class Experiment:
    spec: Spec
    methods: dict[str, MethodInfo]
    datasets: list[DatasetResult]
    significance: pd.DataFrame  # dataset, method, metric, test, p, p_holm, delta
    cis: pd.DataFrame  # dataset, method, metric, mean, lo, hi
    wins: dict  # (dataset, method) -> wins_losses dict
    timings: dict[str, float]
    cache_stats: dict[str, int]


def _timer() -> callable:
    t0 = time.perf_counter()
    return lambda: round(time.perf_counter() - t0, 3)


def run_dataset(spec: Spec, data: EvalData, variants: list[Variant], tune_cands: list[Variant], cache: SignalCache,
                progress: bool) -> DatasetResult:
    timings: dict[str, float] = {}
    all_variants = variants + [v for v in tune_cands if v.name not in {x.name for x in variants}]
    groups: dict[tuple, list[Variant]] = defaultdict(list)
    for v in all_variants:
        groups[v.signal_group].append(v)
    runs: dict[str, Ranked] = {}
    per_query: dict[str, pd.DataFrame] = {}
    tie_rates: dict[str, float] = {}
    attribution: pd.DataFrame | None = None
    emb_names: dict[str, str] = {}
    default_text: dict[str, str] = {}
    metric_list = list(dict.fromkeys(list(spec.metrics) + list(spec.headline) + list(spec.stats.metrics)
                                     + ([spec.tune.metric] if spec.tune else [])))
    qids = [q.id for q in data.queries]
    facts = MS.build_facts(data.dataset, spec.default_config().kind_expiry_days, qids)

    def evaluate(ranked: Ranked, judged: dict | None = None) -> pd.DataFrame:
        # ranx metrics and the briefing/temporal measures, per query, in one frame
        return MS.per_query(facts, data.qrels if judged is None else judged, ranked, metric_list)

    evaluate({})  # load ranx's compiled kernels once, before the pool forks
    t_sig = t_fuse = 0.0
    n_jobs = 0
    for gkey, members in groups.items():
        t = _timer()
        fs = cache.frames(data, members[0].config, members[0].embedder)
        t_sig += t()
        emb_names[members[0].embedder] = fs.embedder_name
        if any(v.name == "default" for v in members):
            default_text = {q: f.query_text for q, f in fs.frames.items()}
            dcfg = next(v.config for v in members if v.name == "default")
            if dcfg.fusion == "formula":
                attribution = A.hit_table(fs.frames, dcfg, data.qrels, data.category, spec.k)
        t = _timer()
        # identical configs (a sweep value equal to the default, ...) are computed once
        first: dict[str, str] = {}
        for v in members:
            first.setdefault(v.config.config_hash(), v.name)
        jobs = [(v.name, gkey, v.config) for v in members if first[v.config.config_hash()] == v.name]
        ex = cache.executor or LOCAL  # under Dask the workers read the frames from the cache
        handles = {gkey: ex.shared(fs.frames, frames_only, str(cache.path(fs.key)), keep=False)}
        ranked, metrics = run_all(jobs, handles, workers=spec.workers, progress=progress,
                                  desc=f"fuse+metrics {data.name}", post=evaluate, executor=ex)
        del handles
        for v in members:
            src = first[v.config.config_hash()]
            runs[v.name], per_query[v.name] = ranked[src], metrics[src]
            if v.group in TIE_GROUPS and v.name not in tie_rates:  # sweeps and grids: too many to list
                tie_rates[v.name] = tie_rate(fused_scores(fs.frames, v.config, spec.k))
        n_jobs += len(jobs)
        t_fuse += t()
        del fs  # frames of one signal group at a time: large datasets would not fit otherwise
    timings["signals_s"] = round(t_sig, 3)
    timings["recombine_and_metrics_s"] = round(t_fuse, 3)
    timings["n_configs"] = len(all_variants)
    timings["n_distinct_configs"] = n_jobs
    covered = {name: qids for name in runs}

    tune_res = None
    folds, _ = evaluation_folds(data, spec.tune.folds if spec.tune else 5, spec.seed)
    if tune_cands:
        t = _timer()
        scores = pd.DataFrame({v.name: per_query[v.name][spec.tune.metric] for v in tune_cands})
        tune_res = tune(scores, spec.tune.metric, data, spec.tune.folds, spec.seed)
        if spec.tune.in_run:
            chosen, _ = select(scores, folds)  # per fold: best on its training queries only
            tuned: Ranked = {q: runs[c][q] for q, c in chosen.items()}
            runs[TUNED] = tuned
            covered[TUNED] = sorted(tuned, key=qids.index)
            per_query[TUNED] = evaluate(tuned, {q: data.qrels[q] for q in covered[TUNED]})
        for v in tune_cands:  # candidates are not methods of the report unless also variants
            if v.name not in {x.name for x in variants}:
                runs.pop(v.name), per_query.pop(v.name), covered.pop(v.name)
        timings["tune_s"] = t()

    bparams = {}
    if spec.baselines:
        t = _timer()
        dcfg = spec.default_config()
        texts = {q.id: q.text for q in data.queries} if spec.baseline_query == "raw" else default_text
        metric = spec.tune.metric if spec.tune else spec.stats.metrics[0]
        btops, bparams = baseline_scores(data, spec.baselines, spec.baseline_query, texts, spec.k, dcfg.k1, dcfg.b,
                                         spec.embedder, cache.root, folds, metric)
        tie_rates.update(peer_tie_rates(btops))
        for name, top in btops.items():
            runs[name] = ranked = top_ids(top)
            covered[name] = [q for q in qids if q in ranked]
            per_query[name] = evaluate(ranked, {q: data.qrels[q] for q in covered[name]})
        timings["baselines_s"] = t()
    return DatasetResult(data, runs, per_query, covered, tune_res, bparams, emb_names, timings, facts, attribution,
                         tie_rates)


def _significance(spec: Spec, results: list[DatasetResult], progress: bool) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    rows, ci_rows, wins = [], [], {}
    st = spec.stats
    for dr in results:
        subset = dr.data.subsets()[dr.data.headline_subset]
        base_pq = dr.per_query["default"]
        methods = [m for m in dr.runs if m != "default"]
        for m in tqdm(methods, desc=f"tests {dr.data.name}", disable=not progress, leave=False):
            if not set(subset) <= set(dr.covered[m]):
                continue
            for test in st.tests:
                for metric in st.metrics:
                    a = base_pq.loc[subset, metric].to_numpy()
                    b = dr.per_query[m].loc[subset, metric].to_numpy()
                    both = np.isfinite(a) & np.isfinite(b)  # measures are NaN where they do not apply
                    a, b = a[both], b[both]
                    pv = S.paired_pvalue(a, b, test, st.n_permutations, spec.seed)
                    rows.append({"dataset": dr.data.name, "method": m, "metric": metric, "test": test, "p": pv,
                                 "delta": float(b.mean() - a.mean())})
            wins[(dr.data.name, m)] = S.wins_losses(base_pq.loc[subset, st.metrics[0]], dr.per_query[m].loc[subset, st.metrics[0]], st.top_queries)
        for m, pq in dr.per_query.items():
            qs = [q for q in subset if q in pq.index]
            if len(qs) != len(subset):
                continue
            for metric in spec.headline:
                vals = pq.loc[qs, metric].to_numpy()
                vals = vals[np.isfinite(vals)]
                lo, hi = S.bootstrap_ci(vals, st.bootstrap, spec.seed)
                ci_rows.append({"dataset": dr.data.name, "method": m, "subset": dr.data.headline_subset, "metric": metric,
                                "mean": float(vals.mean()) if vals.size else float("nan"), "lo": lo, "hi": hi})
    sig = pd.DataFrame(rows, columns=["dataset", "method", "metric", "test", "p", "delta"])
    sig["p_holm"] = float("nan")
    for test in sig["test"].unique():  # Holm across every comparison of the report, per test
        idx = sig.index[sig["test"] == test]
        sig.loc[idx, "p_holm"] = S.holm(sig.loc[idx, "p"].tolist())
    sig["significant"] = sig["p_holm"] < st.alpha
    return sig, pd.DataFrame(ci_rows, columns=["dataset", "method", "subset", "metric", "mean", "lo", "hi"]), wins


def method_infos(spec: Spec, variants: list[Variant], results: list[DatasetResult]) -> dict[str, MethodInfo]:
    out = {v.name: MethodInfo(v.name, v.group, v.axis, v.value, v.config.config_hash(), v.embedder) for v in variants}
    for dr in results:
        for name in dr.runs:
            if name not in out:
                group = "tuned" if name == TUNED else "baseline"
                out[name] = MethodInfo(name, group, embedder=spec.embedder)
    return out


def _methods_of(data: EvalData, variants: list[Variant], tune_cands: list[Variant]) -> tuple[list[Variant], list[Variant]]:
    """The variants and tuning candidates a dataset entry runs (``methods = "key"``: the default
    pipeline and the profiles, no ablations, sweeps or tuning; the peers run either way)."""
    if data.ref.methods == "key":
        return [v for v in variants if v.group in KEY_VARIANT_GROUPS], []
    return variants, tune_cands


def run_experiment(spec: Spec, *, progress: bool = True, cache_root: Path | None = None,
                   executor: Executor | None = None) -> Experiment:
    """``executor``: where extraction and recombination run; by default the spec's
    (``executor``, ``scheduler``, ``workers``), opened and closed here."""
    from memofs_eval._env import cache_root as default_root

    if executor is None:
        with closing_executor(open_executor(spec.executor, spec.scheduler, spec.workers)) as ex:
            return run_experiment(spec, progress=progress, cache_root=cache_root, executor=ex)

    total = _timer()
    timings: dict[str, float] = {}
    t = _timer()
    datasets = [EvalData(ref, load(ref)) for ref in spec.datasets]
    timings["load_s"] = t()
    variants = spec.variants()
    tune_cands = tune_variants(spec)
    cache = SignalCache(cache_root or default_root(), progress=progress, executor=executor)
    results = [run_dataset(spec, d, *_methods_of(d, variants, tune_cands), cache, progress) for d in datasets]
    t = _timer()
    sig, cis, wins = _significance(spec, results, progress)
    timings["stats_s"] = t()
    timings["total_s"] = total()
    return Experiment(spec, method_infos(spec, variants, results), results, sig, cis, wins, timings,
                      {"signal_cache_hits": cache.hits, "signal_cache_misses": cache.misses})


def results_table(exp: Experiment) -> pd.DataFrame:
    """One row per method x dataset x subset x category x metric (``category`` "all" = every
    category). Methods only appear on subsets whose every query they were evaluated on."""
    rows = []
    for dr in exp.datasets:
        subsets = dr.data.subsets()
        for method, pq in dr.per_query.items():
            info = exp.methods[method]
            cov = set(dr.covered[method])
            for subset, qs in subsets.items():
                if not set(qs) <= cov or not qs:
                    continue
                cats = {"all": qs}
                for q in qs:
                    cats.setdefault(dr.data.category[q], []).append(q)
                for cat in sorted(cats, key=lambda c: (c != "all", c)):
                    sub = pq.loc[cats[cat]]
                    for metric in pq.columns:
                        rows.append({"dataset": dr.data.name, "protocol": dr.data.protocol, "method": method,
                                     "group": info.group, "axis": info.axis,
                                     "value": "" if info.value is None else str(info.value), "embedder": info.embedder,
                                     "config_hash": info.config_hash, "subset": subset, "category": cat, "metric": metric,
                                     "score": round(float(sub[metric].mean()), 10), "n_queries": len(sub),
                                     "n_scored": int(sub[metric].notna().sum())})
    return pd.DataFrame(rows)
