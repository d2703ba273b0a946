"""Harness metrics and statistics against independent truth: pytrec_eval (trec_eval) on
runs whose ties are broken by id, hand-computed Holm adjustments, numpy bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

import memofs_eval._env  # noqa: F401
from memofs_eval.scoring import metrics as M
from memofs_eval.scoring import stats as S
from memofs_eval.runs.runner import rank_scores, ranx_scores

pytrec_eval = pytest.importorskip("pytrec_eval")

METRICS = ["ndcg@5", "ndcg@10", "mrr@10", "recall@5", "recall@10", "recall@20", "map@100", "precision@5"]


def _random_case(seed: int, n_queries: int = 40, n_docs: int = 60):
    """Graded qrels and runs whose scores come from a tiny value set, so ties abound."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03d}" for i in range(n_docs)]
    qrels, scored = {}, {}
    for q in range(n_queries):
        qid = f"q{q:02d}"
        judged = rng.choice(n_docs, size=rng.integers(1, 12), replace=False)
        rels = {docs[i]: int(rng.integers(0, 4)) for i in judged}
        if not any(r > 0 for r in rels.values()):
            rels[docs[int(judged[0])]] = 1
        qrels[qid] = rels
        retrieved = rng.choice(n_docs, size=rng.integers(0, 45), replace=False)
        scored[qid] = {docs[i]: float(rng.integers(0, 4)) / 2 for i in retrieved}
    return qrels, scored


def _trec_values(qrels, ranked, cutoff_mrr: int = 10):
    """trec_eval measures on the same ranked lists (scores depth+1-rank, no ties)."""
    run = ranx_scores(ranked)
    run_mrr = ranx_scores({q: d[:cutoff_mrr] for q, d in ranked.items()})  # recip_rank has no cutoff
    measures = {M.trec_name(m) for m in METRICS if not m.startswith("mrr")}
    ev = pytrec_eval.RelevanceEvaluator(qrels, measures)
    out = ev.evaluate({q: run.get(q, {}) or {"__none__": 0.0} for q in qrels})
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate({q: run_mrr.get(q, {}) or {"__none__": 0.0} for q in qrels})
    for q in out:
        out[q]["recip_rank"] = rr[q]["recip_rank"]
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_equal_pytrec_eval_with_ties_broken_by_id(seed):
    qrels, scored = _random_case(seed)
    ranked = {q: rank_scores(s, 100) for q, s in scored.items()}
    ours = M.per_query(qrels, ranked, METRICS)
    trec = _trec_values(qrels, ranked)
    for m in METRICS:
        for q in qrels:
            assert ours.at[q, m] == pytest.approx(trec[q][M.trec_name(m)], abs=1e-12), (seed, q, m)


def test_single_metric_with_cutoff_works():
    """ranx 0.3.21 raises KeyError for one metric with a cutoff and return_mean=False."""
    qrels, scored = _random_case(5, n_queries=5)
    ranked = {q: rank_scores(s, 20) for q, s in scored.items()}
    one = M.per_query(qrels, ranked, ["ndcg@10"])
    both = M.per_query(qrels, ranked, ["ndcg@10", "recall@5"])
    assert list(one.columns) == ["ndcg@10"]
    assert np.allclose(one["ndcg@10"], both["ndcg@10"])


def test_rank_scores_breaks_ties_by_id():
    assert rank_scores({"b": 1.0, "a": 1.0, "c": 2.0, "d": 0.5}, 3) == ["c", "a", "b"]


def test_ranx_scores_strictly_decreasing():
    s = ranx_scores({"q": ["z", "a", "m"]})["q"]
    assert list(s) == ["z", "a", "m"] and s["z"] > s["a"] > s["m"] > 0


def test_empty_result_scores_zero():
    ours = M.per_query({"q1": {"a": 1}, "q2": {"b": 2}}, {"q1": ["a"], "q2": []}, ["ndcg@10", "recall@5"])
    assert ours.loc["q1"].tolist() == [1.0, 1.0]
    assert ours.loc["q2"].tolist() == [0.0, 0.0]


def test_holm_matches_hand_computation():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> monotone 0.06
    assert S.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # capped at 1, and ties keep their order
    assert S.holm([0.5, 0.5, 0.9]) == pytest.approx([1.0, 1.0, 1.0])
    assert S.holm([0.01]) == pytest.approx([0.01])
    assert S.holm([]) == []


def test_bootstrap_ci_seeded_and_sane():
    x = np.random.default_rng(3).random(200)
    a = S.bootstrap_ci(x, n=500, seed=11)
    assert a == S.bootstrap_ci(x, n=500, seed=11)
    assert a[0] < x.mean() < a[1]
    # the percentile interval of resampled means: compare with a direct numpy computation
    rng = np.random.default_rng(11)
    boots = x[rng.integers(0, x.size, size=(500, x.size))].mean(axis=1)
    assert a == pytest.approx((np.quantile(boots, 0.025), np.quantile(boots, 0.975)))
    assert S.bootstrap_ci([0.5] * 10, n=50) == (0.5, 0.5)


def test_paired_pvalues_match_scipy_and_are_seeded():
    from scipy.stats import ttest_rel

    qrels, scored = _random_case(8, n_queries=30)
    a = {q: rank_scores(s, 20) for q, s in scored.items()}
    b = {q: list(reversed(d)) for q, d in a.items()}
    p = S.paired_pvalues(qrels, a, b, ["ndcg@10"], "student")
    pa, pb = M.per_query(qrels, a, ["ndcg@10"]), M.per_query(qrels, b, ["ndcg@10"])
    assert p["ndcg@10"] == pytest.approx(ttest_rel(pa["ndcg@10"], pb["ndcg@10"]).pvalue, rel=1e-6)
    f1 = S.paired_pvalues(qrels, a, b, ["ndcg@10"], "fisher", n_permutations=300, seed=4)
    assert f1 == S.paired_pvalues(qrels, a, b, ["ndcg@10"], "fisher", n_permutations=300, seed=4)
    assert 0.0 <= f1["ndcg@10"] <= 1.0


def test_fisher_randomisation_against_exact_enumeration():
    """With few queries every sign pattern can be enumerated: the exact p-value."""
    import itertools

    control = np.array([0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.8])
    treatment = np.array([0.6, 0.4, 0.5, 1.0, 0.7, 0.3, 0.9])
    d = treatment - control
    pats = np.array(list(itertools.product([-1, 1], repeat=d.size)))
    exact = float(np.mean(np.abs(pats @ d) / d.size >= abs(d.mean()) - 1e-12))
    approx = S.fisher_randomisation(control, treatment, n_permutations=20000, seed=1)
    assert approx == pytest.approx(exact, abs=0.01)
    assert S.fisher_randomisation(control, control) == 1.0


def test_pvalue_from_scores_equals_ranx_compare():
    """The report tests per-query scores it already has; the p-value must be ranx compare's."""
    qrels, scored = _random_case(9, n_queries=30)
    a = {q: rank_scores(s, 20) for q, s in scored.items()}
    b = {q: d[1:] + d[:1] for q, d in a.items()}
    pa, pb = M.per_query(qrels, a, ["ndcg@10"]), M.per_query(qrels, b, ["ndcg@10"])
    via_compare = S.paired_pvalues(qrels, a, b, ["ndcg@10"], "student")["ndcg@10"]
    assert S.paired_pvalue(pa["ndcg@10"], pb["ndcg@10"], "student") == pytest.approx(via_compare, rel=1e-12)
    assert S.paired_pvalue(pa["ndcg@10"], pa["ndcg@10"], "student") == 1.0
