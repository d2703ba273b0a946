"""Significance and uncertainty: paired tests (ranx Student's t, seeded Fisher
randomisation), Holm-Bonferroni, bootstrap CIs, per-query wins and losses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import memofs_eval._env  # noqa: F401
import numpy as np
import pandas as pd
from ranx import compare
from ranx.statistical_tests import paired_student_t_test

from memofs_eval.scoring.metrics import per_query, qrels, ranx_run


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1):
    sort p ascending; adj_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j)), i = 1..m."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj = np.maximum.accumulate(adj)
    out = np.empty(m)
    out[order] = adj
    return out.tolist()


def bootstrap_ci(values: Sequence[float], n: int = 1000, seed: int = 42, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over queries (resampling queries with replacement)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n, x.size))
    boots = x[idx].mean(axis=1)
    a = (1.0 - level) / 2.0
    return (float(np.quantile(boots, a)), float(np.quantile(boots, 1.0 - a)))


def fisher_randomisation(control: Sequence[float], treatment: Sequence[float], n_permutations: int = 1000, seed: int = 42) -> float:
    """Paired randomisation test (two-sided): with d = treatment - control per query,
    p = mean over permutations of [ |mean(s * d)| >= |mean(d)| ], s = random signs
    (swapping a query's two systems flips the sign of its difference).

    ranx's numba version draws in parallel worker threads whose RNG its seed never
    reaches, so its p-values change from run to run; this one is seeded numpy."""
    d = np.asarray(treatment, dtype=np.float64) - np.asarray(control, dtype=np.float64)
    if d.size == 0:
        return 1.0
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    signs = rng.integers(0, 2, size=(n_permutations, d.size), dtype=np.int8) * 2 - 1
    permuted = np.abs(signs @ d) / d.size
    return float(np.mean(permuted >= observed - 1e-12))


def paired_pvalue(control: Sequence[float], treatment: Sequence[float], test: str, n_permutations: int = 1000, seed: int = 42) -> float:
    """p-value from per-query scores already computed by ranx: ``student`` = ranx's paired
    t-test (what ``compare`` runs after evaluating), ``fisher`` = :func:`fisher_randomisation`."""
    a = np.asarray(control, dtype=np.float64)
    b = np.asarray(treatment, dtype=np.float64)
    if test == "fisher":
        return fisher_randomisation(a, b, n_permutations, seed)
    if test != "student":
        raise ValueError(f"unknown test {test!r}")
    if np.array_equal(a, b):
        return 1.0  # identical systems: scipy would return NaN
    p, _ = paired_student_t_test(a, b, 0.05)
    return float(p)


def paired_pvalues(judged: Mapping[str, Mapping[str, int]], control: Mapping[str, Sequence[str]], treatment: Mapping[str, Sequence[str]],
                   metrics: Sequence[str], test: str, n_permutations: int = 1000, seed: int = 42) -> dict[str, float]:
    """p-values of ``treatment`` vs ``control`` per metric on the ``judged`` queries:
    ``student`` = ranx ``compare`` (two-sided paired t-test), ``fisher`` =
    :func:`fisher_randomisation` on ranx per-query scores."""
    metrics = list(metrics)
    if test == "fisher":
        a = per_query(judged, control, metrics)
        b = per_query(judged, treatment, metrics)
        return {m: fisher_randomisation(a[m].to_numpy(), b[m].to_numpy(), n_permutations, seed) for m in metrics}
    if test != "student":
        raise ValueError(f"unknown test {test!r}")
    asked = metrics if len(metrics) > 1 else metrics + ["hits@1"]  # ranx single-metric KeyError trap
    q = qrels(judged)
    runs = [ranx_run({k: control.get(k, []) for k in judged}, "control"), ranx_run({k: treatment.get(k, []) for k in judged}, "treatment")]
    report = compare(q, runs, asked, stat_test="student", random_seed=seed, make_comparable=True)
    comp = report.comparisons[frozenset(("control", "treatment"))]
    return {m: float(comp[m]["p_value"]) for m in metrics}


def wins_losses(control: pd.Series, treatment: pd.Series, top: int = 5) -> dict:
    """Per-query W/T/L of ``treatment`` vs ``control`` and the largest wins and losses."""
    diff = (treatment - control).dropna()
    order = diff.sort_values(kind="stable")
    return {
        "wins": int((diff > 0).sum()),
        "ties": int((diff == 0).sum()),
        "losses": int((diff < 0).sum()),
        "worst": [(q, float(d)) for q, d in order.head(top).items() if d < 0],
        "best": [(q, float(d)) for q, d in order.iloc[::-1].head(top).items() if d > 0],
    }
