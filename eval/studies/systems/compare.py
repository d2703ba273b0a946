"""System runs through the harness's own measurements: per-query ranx metrics and measures
(:func:`memofs_eval.scoring.measures.per_query`, the function ``memofs-eval run`` scores with),
percentile bootstrap CIs, paired Student/Fisher tests with Holm-Bonferroni over every
comparison of the report (:mod:`memofs_eval.scoring.stats`), tie rates (:mod:`memofs_eval.scoring.ties`) and
the trivial-cutoff counts (:func:`memofs_eval.scoring.measures.trivial_queries`). Every system is
paired against the reference and against each other on the headline subset."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from memofs_eval.scoring import measures as MS
from memofs_eval.scoring import stats as S
from memofs_eval.inputs.data import EvalData
from memofs_eval.inputs.spec import Spec
from memofs_eval.studies.systems.run import SystemRun
from memofs_eval.scoring.ties import tie_rate


@dataclass
class Comparison:
    results: pd.DataFrame  # dataset, system, metric, mean, lo, hi, n_queries, n_failed
    significance: pd.DataFrame  # dataset, a, b, metric, test, p, p_holm, significant, delta (b - a)
    efficiency: pd.DataFrame  # dataset, system, ingest_s, recall_p50_ms, recall_p95_ms, ...
    trivial: pd.DataFrame  # dataset, metric, n_trivial, n_queries
    failures: pd.DataFrame  # dataset, system, query, reason
    per_query: dict[tuple[str, str], pd.DataFrame]  # (dataset, system) -> query x metric
    reference: str


def metric_names(spec: Spec) -> list[str]:
    return list(dict.fromkeys(list(spec.metrics) + list(spec.headline) + list(spec.stats.metrics)))


def compare(spec: Spec, data: list[EvalData], runs: dict[str, list[SystemRun]], reference: str) -> Comparison:
    """``runs``: system -> its run on each dataset of ``data`` (same order)."""
    names = metric_names(spec)
    st = spec.stats
    res_rows, sig_rows, eff_rows, triv_rows, fail_rows = [], [], [], [], []
    pq_all: dict[tuple[str, str], pd.DataFrame] = {}
    systems = list(runs)
    for i, d in enumerate(data):
        qids = [q.id for q in d.queries]
        facts = MS.build_facts(d.dataset, spec.default_config().kind_expiry_days, qids)
        subset = d.subsets()[d.headline_subset]
        asked: dict[str, set[str]] = {}  # a system run on a sample of scopes is scored on the queries it was asked
        for metric in names:
            triv = MS.trivial_queries(facts, metric, subset)
            triv_rows.append({"dataset": d.name, "metric": metric, "n_trivial": len(triv), "n_queries": len(subset)})
        for sname in systems:
            run = runs[sname][i]
            asked[sname] = set(qids if run.asked is None else run.asked)
            ranked = {q: run.ranked.get(q, []) for q in qids}
            pq = MS.per_query(facts, d.qrels, ranked, names)
            pq_all[(d.name, sname)] = pq
            eff = {**run.efficiency(), "system": sname}
            eff["tie_rate@10"] = tie_rate({q: run.scored[q] for q in qids if q in run.scored}) if run.scored else float("nan")
            eff_rows.append(eff)
            fail_rows += [{"dataset": d.name, "system": sname, "query": q, "reason": r} for q, r in sorted(run.failures.items())]
            mine = [q for q in subset if q in asked[sname]]
            for metric in names:
                vals = pq.loc[mine, metric].to_numpy()
                vals = vals[np.isfinite(vals)]
                lo, hi = S.bootstrap_ci(vals, st.bootstrap, spec.seed)
                res_rows.append({"dataset": d.name, "system": sname, "subset": d.headline_subset, "metric": metric,
                                 "mean": float(vals.mean()) if vals.size else float("nan"), "lo": lo, "hi": hi,
                                 "n_queries": len(mine), "n_failed": sum(q in run.failures for q in mine),
                                 "scopes": run.scopes or "all"})
        # the reference first in every pair it is part of, then every other pair
        pairs = [(reference, s) for s in systems if s != reference]
        pairs += [(a, b) for a, b in combinations([s for s in systems if s != reference], 2)]
        for a, b in pairs:
            for test in st.tests:
                both_asked = [q for q in subset if q in asked[a] and q in asked[b]]  # paired on what both ran
                for metric in st.metrics:
                    x = pq_all[(d.name, a)].loc[both_asked, metric].to_numpy()
                    y = pq_all[(d.name, b)].loc[both_asked, metric].to_numpy()
                    both = np.isfinite(x) & np.isfinite(y)  # measures are NaN where they do not apply
                    x, y = x[both], y[both]
                    p = S.paired_pvalue(x, y, test, st.n_permutations, spec.seed)
                    sig_rows.append({"dataset": d.name, "a": a, "b": b, "metric": metric, "test": test, "p": p,
                                     "delta": float(y.mean() - x.mean()) if x.size else float("nan"),
                                     "n_paired": int(x.size)})
    sig = pd.DataFrame(sig_rows, columns=["dataset", "a", "b", "metric", "test", "p", "delta", "n_paired"])
    sig["p_holm"] = float("nan")
    for test in sig["test"].unique():  # Holm over every comparison of the report, per test (as memofs-eval run)
        idx = sig.index[sig["test"] == test]
        sig.loc[idx, "p_holm"] = S.holm(sig.loc[idx, "p"].tolist())
    sig["significant"] = sig["p_holm"] < st.alpha
    return Comparison(pd.DataFrame(res_rows), sig, pd.DataFrame(eff_rows), pd.DataFrame(triv_rows),
                      pd.DataFrame(fail_rows, columns=["dataset", "system", "query", "reason"]), pq_all, reference)
