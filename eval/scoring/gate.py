"""The CI gate's verdict: the default pipeline against the committed baseline (issue 22).

A missing baseline file, a dataset the baseline lacks, or a baseline written on other data
(content hash differs: STALE) fails the gate; ``--allow-missing-baseline`` lets a first run
pass without one (never a stale one). Per headline metric with a tolerance ``tol``, when the
baseline holds per-query values the verdict is paired: d_q = now_q - base_q over the queries
both have; the gate fails when the mean drop ``-mean(d)`` exceeds ``tol`` *and* a one-sided
paired t-test (H1: mean(d) < 0, scipy ``ttest_1samp(..., alternative="less")``) gives
p < alpha. A baseline without per-query values falls back to the tolerance on the mean.
Each line prints the minimum detectable effect at the dataset's size,
MDE = (z_{1-alpha} + z_{0.8}) * sd(d) / sqrt(n) (one-sided, power 0.8); while the code is
unchanged sd(d) = 0, and sd(base) * sqrt(2) (independent queries, a conservative bound) stands in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

ALPHA = 0.05
POWER = 0.8


@dataclass(frozen=True)
class MetricVerdict:
    metric: str
    now: float
    base: float
    tolerance: float
    bad: bool
    p: float | None  # one-sided paired p; None without per-query values
    mde: float | None
    n: int

    def line(self, dataset: str) -> str:
        paired = (f", paired drop one-sided p {self.p:.3g} over {self.n} queries, MDE {self.mde:.4f}"
                  if self.p is not None else ", no per-query baseline: tolerance on the mean only")
        return (f"{dataset} {self.metric}: {self.now:.4f} vs baseline {self.base:.4f} (tolerance {self.tolerance}"
                f"{paired}){' FAIL' if self.bad else ''}")


def mde(diffs: np.ndarray, base: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable mean difference of a one-sided paired test at ``len(diffs)`` queries."""
    n = len(diffs)
    if n < 2:
        return math.inf
    sd = float(np.std(diffs, ddof=1))
    if sd < 1e-12:
        sd = float(np.std(base, ddof=1)) * math.sqrt(2.0)
    return float((sps.norm.ppf(1 - alpha) + sps.norm.ppf(power)) * sd / math.sqrt(n))


def metric_verdict(metric: str, now_mean: float, base_mean: float, tol: float,
                   now_pq: Mapping[str, float] | None = None, base_pq: Mapping[str, float] | None = None,
                   alpha: float = ALPHA) -> MetricVerdict:
    """Paired verdict when both per-query maps are given (queries in common), else mean-only."""
    drop = base_mean - now_mean
    if not now_pq or not base_pq:
        return MetricVerdict(metric, now_mean, base_mean, tol, drop > tol + 1e-12, None, None, 0)
    common = sorted(set(now_pq) & set(base_pq))
    a = np.array([base_pq[q] for q in common], dtype=float)
    b = np.array([now_pq[q] for q in common], dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    d = b - a
    if len(d) < 2 or float(np.std(d)) < 1e-12:  # constant differences: the sign decides
        p = 0.0 if len(d) and float(d.mean()) < 0 else 1.0
    else:
        p = float(sps.ttest_1samp(d, 0.0, alternative="less").pvalue)
    mean_drop = -float(d.mean()) if len(d) else 0.0
    bad = mean_drop > tol + 1e-12 and p < alpha
    return MetricVerdict(metric, now_mean, base_mean, tol, bad, p, mde(d, a, alpha), len(d))
