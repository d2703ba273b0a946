"""The CI gate (memofs_eval.scoring.gate, cli.check_gate): missing and stale baselines fail, the verdict
on a drop is a one-sided paired test, and the minimum detectable effect is printed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from memofs_eval import cli
from memofs_eval.scoring.gate import metric_verdict, mde


def _exp(values: list[float], content_hash: str = "h1"):
    qids = [f"q{i}" for i in range(len(values))]
    pq = pd.DataFrame({"ndcg@10": values}, index=pd.Index(qids, name="query"))
    data = SimpleNamespace(name="tiny", content_hash=content_hash, headline_subset="all", subsets=lambda: {"all": qids})
    spec = SimpleNamespace(path=Path("eval/specs/quick.toml"), headline=("ndcg@10",), tolerance={"ndcg@10": 0.02})
    return SimpleNamespace(spec=spec, datasets=[SimpleNamespace(data=data, per_query={"default": pq})])


def _baseline(path: Path, values: list[float] | None, mean: float, content_hash: str = "h1") -> Path:
    entry = {"content_hash": content_hash, "ndcg@10": mean}
    if values is not None:
        entry["per_query"] = {"ndcg@10": {f"q{i}": v for i, v in enumerate(values)}}
    path.write_text(json.dumps({"datasets": {"tiny": entry}}))
    return path


def test_missing_baseline_fails_unless_allowed(tmp_path: Path) -> None:
    exp = _exp([0.5, 0.6])
    gate = cli.check_gate(exp, tmp_path / "absent.json")
    assert not gate["ok"] and "FAIL" in gate["lines"][0]
    assert cli.check_gate(exp, tmp_path / "absent.json", allow_missing=True)["ok"]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"datasets": {"agent-memory": {"ndcg@10": 0.5}}}))
    assert not cli.check_gate(exp, other)["ok"]  # the dataset has no entry
    assert cli.check_gate(exp, other, allow_missing=True)["ok"]


def test_stale_baseline_fails_even_when_allowed(tmp_path: Path) -> None:
    b = _baseline(tmp_path / "b.json", None, 0.55, content_hash="old")
    for allow in (False, True):
        gate = cli.check_gate(_exp([0.5, 0.6]), b, allow_missing=allow)
        assert not gate["ok"] and "STALE" in gate["lines"][0]


def test_paired_verdict(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.9, 200)
    # a uniform 0.05 drop on every query: beyond tolerance and certain
    gate = cli.check_gate(_exp(list(base - 0.05)), _baseline(tmp_path / "b.json", list(base), float(base.mean())))
    assert not gate["ok"] and "FAIL" in gate["lines"][0] and "MDE" in gate["lines"][0]
    # unchanged: pass
    assert cli.check_gate(_exp(list(base)), tmp_path / "b.json")["ok"]
    # a 0.05 mean drop carried by noise on 4 queries is not significant: pass
    noisy = [0.9, 0.1, 0.8, 0.3]
    now = [0.2, 0.6, 0.3, 0.8]
    v = metric_verdict("ndcg@10", float(np.mean(now)) - 0.0, float(np.mean(noisy)), 0.02,
                       {f"q{i}": x for i, x in enumerate(now)}, {f"q{i}": x for i, x in enumerate(noisy)})
    assert v.p == pytest.approx(sps.ttest_rel(now, noisy, alternative="less").pvalue)
    assert not v.bad


def test_mean_only_without_per_query_values() -> None:
    assert metric_verdict("ndcg@10", 0.50, 0.53, 0.02).bad
    assert not metric_verdict("ndcg@10", 0.52, 0.53, 0.02).bad


def test_mde_formula() -> None:
    d = np.array([0.1, -0.1, 0.2, -0.2, 0.0])
    want = (sps.norm.ppf(0.95) + sps.norm.ppf(0.8)) * np.std(d, ddof=1) / math.sqrt(5)
    assert mde(d, np.zeros(5)) == pytest.approx(want)
    base = np.array([0.2, 0.4, 0.6])
    assert mde(np.zeros(3), base) == pytest.approx((sps.norm.ppf(0.95) + sps.norm.ppf(0.8)) * np.std(base, ddof=1)
                                                   * math.sqrt(2) / math.sqrt(3))
