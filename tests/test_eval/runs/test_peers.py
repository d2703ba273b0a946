"""One implementation of each peer and of the folds: the learned-fusion study's peers are
``memofs-eval run``'s, name for name and query for query, and the ranx fusions agree with
hand-computed RRF and min-max weighted sums."""

from __future__ import annotations

from pathlib import Path

import pytest

import memofs_eval._env  # noqa: F401
from memofs_eval.runs.baselines import baseline_runs, fused, peer_label
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.experiments.experiment import run_experiment
from memofs_eval.inputs.folds import check_grouped, evaluation_folds, leave_one_group_out
from memofs_eval.studies.learned_bench import Bench, frames_for, ndcg
from memofs_eval.studies.learned_peers import peer_runs, pipeline_configs
from memofs_eval.inputs.spec import load_spec

SPEC = """name = "peers"
seed = 3
k = 10
embedder = "{embedder}"
workers = 1
metrics = ["ndcg@10"]
headline = ["ndcg@10"]
[[datasets]]
name = "tiny"
[baselines]
methods = ["bm25s", "dense", "rrf", "rrf:tuned", "combsum", "wsum:0.4", "wsum:tuned"]
query = "{query}"
[ablations]
toggles = ["vector", "bm25", "fuzzy", "recency", "decay", "rewrite"]  # rewrite: a signal field
embedders = []
[stats]
tests = ["student"]
n_permutations = 10
bootstrap = 10
[tune]
folds = 2
[tune.grid]
w_vec = [0.4, 0.6]
"""


def _spec(tmp_path: Path, query: str, embedder: str = "lsa"):
    p = tmp_path / f"peers-{query}.toml"
    p.write_text(SPEC.format(query=query, embedder=embedder))
    return load_spec(p)


@pytest.mark.parametrize("query", ["raw", "rewritten"])
def test_study_peers_are_the_harness_peers(tmp_path, query):
    """Same name, same ranked lists: the study computes its peers with the harness's code."""
    spec = _spec(tmp_path, query)
    exp = run_experiment(spec, progress=False, cache_root=tmp_path)
    dr = exp.datasets[0]
    data = EvalData(spec.datasets[0], load(spec.datasets[0]))
    frames = frames_for(data, spec.embedder, tmp_path, cfg=spec.default_config())
    bench = Bench("tiny", frames, data.qrels, data.category, data.group, data.split, data, spec, tmp_path)
    peers, _ = peer_runs(bench, (query,))
    names = [n for n in dr.runs if n.startswith("baseline:")]
    assert sorted(names) == sorted(peers) and all(n.endswith(f"@{query}") for n in names)
    assert len(names) == len(spec.baselines)
    assert all(0.0 <= dr.tie_rates[n] <= 1.0 for n in names)  # every peer reports its tie rate
    for n in names:
        assert {q: peers[n][q] for q in dr.runs[n]} == dr.runs[n], n
    for n, cfg in pipeline_configs(spec, ("default", "-recency", "-decay", "only:bm25", "only:vector")).items():
        from memofs_eval.runs.runner import fused_run

        assert fused_run(bench.frames_of(cfg), cfg, spec.k) == dr.runs[n], n
    # and the study's own peer runs give the harness's figure for every shared name
    from memofs_eval.studies.learned_lodo import Lab
    from memofs_eval.studies.learned_transfer import peer_block

    lab = Lab({"tiny": bench}, log=lambda m: None)
    qids = lab.test_qids("tiny")
    runs = peer_block(lab, "tiny", qids)
    res = dr.per_query
    assert {"default", "only:bm25", "only:vector"} <= set(runs) & set(res)
    for n, run in runs.items():
        if n in res:
            assert ndcg(bench, run).mean() == pytest.approx(res[n].loc[qids, "ndcg@10"].mean(), abs=1e-12), n


def test_peer_names_state_the_query_text():
    assert peer_label("wsum:tuned", "raw") == "baseline:wsum:tuned@raw"
    assert peer_label("rrf", "rewritten") == "baseline:rrf@rewritten"
    with pytest.raises(ValueError, match="expected one of raw, rewritten"):
        peer_label("rrf", "expanded")


BM25 = {"q": {"a": 9.0, "b": 5.0, "c": 4.0, "d": 1.0}}
DENSE = {"q": {"c": 0.9, "e": 0.8, "a": 0.5, "b": 0.1}}


def test_rrf_by_hand():
    """RRF(d) = sum over runs of 1 / (60 + rank); absent from a run adds nothing."""
    ranks = {"bm25": ["a", "b", "c", "d"], "dense": ["c", "e", "a", "b"]}
    score = {}
    for lst in ranks.values():
        for r, d in enumerate(lst, 1):
            score[d] = score.get(d, 0.0) + 1.0 / (60 + r)
    expected = sorted(score, key=lambda d: (-score[d], d))
    assert expected == ["a", "c", "b", "e", "d"]  # a: 1/61 + 1/63, c: 1/63 + 1/61 tie, broken by id
    assert fused("rrf", BM25, DENSE, ["q"], 10) == {"q": expected}
    assert fused("rrf", BM25, DENSE, ["q"], 2) == {"q": expected[:2]}


@pytest.mark.parametrize("w", [0.0, 0.4, 0.75, 1.0])
def test_wsum_by_hand(w):
    """wsum = (1 - w) * minmax(bm25) + w * minmax(dense); absent from a run counts 0."""
    def minmax(run):
        lo, hi = min(run.values()), max(run.values())
        return {d: (s - lo) / (hi - lo) for d, s in run.items()}

    b, d = minmax(BM25["q"]), minmax(DENSE["q"])
    score = {x: (1 - w) * b.get(x, 0.0) + w * d.get(x, 0.0) for x in set(b) | set(d)}
    expected = sorted(score, key=lambda x: (-round(score[x], 12), x))
    assert fused("wsum", BM25, DENSE, ["q"], 10, {"weights": (1 - w, w)}) == {"q": expected}


def test_tuned_peer_scores_only_test_queries(tmp_path):
    """A tuned peer covers exactly the test side of the harness's folds."""
    spec = _spec(tmp_path, "raw", embedder="none")
    data = EvalData(spec.datasets[0], load(spec.datasets[0]))
    folds, name = evaluation_folds(data, 2, spec.seed)
    assert name == "heldout"  # tiny fixes a split
    texts = {q.id: q.text for q in data.queries}
    runs, params = baseline_runs(data, ["wsum:tuned", "rrf"], "raw", texts, 10, 1.2, 0.75, "none", tmp_path, folds, "ndcg@10")
    assert set(runs["baseline:wsum:tuned@raw"]) == set(folds[0][1])
    assert set(runs["baseline:rrf@raw"]) == {q.id for q in data.queries}
    assert len(params["baseline:wsum:tuned@raw"]) == 1


def test_leave_one_group_out_by_hand():
    groups = {"a1": "A", "a2": "A", "b1": "B", "b2": "B", "c1": "C"}
    split = {"a1": "tune", "a2": "heldout", "b1": "tune", "b2": "heldout", "c1": "tune"}
    assert leave_one_group_out(list(groups), groups) == [
        ("A", ["b1", "b2", "c1"], ["a1", "a2"]), ("B", ["a1", "a2", "c1"], ["b1", "b2"]), ("C", ["a1", "a2", "b1", "b2"], ["c1"])]
    # with the split: train on the others' tune queries, test on the group's heldout; C has none
    fs = leave_one_group_out(list(groups), groups, split)
    assert fs == [("A", ["b1", "c1"], ["a2"]), ("B", ["a1", "c1"], ["b2"])]
    check_grouped(groups, fs)
    with pytest.raises(AssertionError, match="groups in train and test"):
        check_grouped(groups, [("A", ["a1"], ["a2"])])
    with pytest.raises(ValueError, match="1 group"):
        leave_one_group_out(["a1", "a2"], groups)


def test_pipeline_variant_names_follow_the_spec_grammar(tmp_path):
    from memofs_eval.inputs.spec import expand_variants

    spec = _spec(tmp_path, "raw")
    own = {v.name: v.config for v in expand_variants(spec)}
    got = pipeline_configs(spec, ("only:bm25", "-recency", "only:bm25,fuzzy", "-recency,-decay"))
    assert got["only:bm25"] == own["only:bm25"] and got["-recency"] == own["-recency"]
    # two toggles: the one-toggle rule applied to both
    assert got["only:bm25,fuzzy"] == own["only:bm25"].replace(use_fuzzy=True)
    assert got["-recency,-decay"] == own["-recency"].replace(use_decay=False)
    for bad in ("only:nope", "-x,-decay", "foo"):
        with pytest.raises(ValueError, match="unknown pipeline variant"):
            pipeline_configs(spec, (bad,))


def test_peer_tie_rate_counts_equal_scores_by_hand():
    """bm25s gives two documents the same score: both positions are tie-decided. Here the
    BM25 run is {a: 2, b: 1, c: 1} (3 positions, 2 tied) and RRF over identical ranks of
    BM25 and a dense run that ties nothing gives {a, b, c} distinct scores (0 tied)."""
    from memofs_eval.scoring.ties import peer_tie_rates
    tops = {"baseline:bm25s@raw": {"q": [("a", 2.0), ("b", 1.0), ("c", 1.0)], "r": [("x", 1.0)]},
            "baseline:rrf@raw": {"q": [("a", 0.3), ("b", 0.2), ("c", 0.1)]}}
    assert peer_tie_rates(tops) == {"baseline:bm25s@raw": 2 / 4, "baseline:rrf@raw": 0.0}


def test_baseline_scores_order_matches_baseline_runs(tmp_path):
    """The scored peers and the id-only peers are one computation: same ids, same order."""
    from memofs_eval.runs.baselines import baseline_scores, top_ids
    spec = _spec(tmp_path, "raw", embedder="none")
    data = EvalData(spec.datasets[0], load(spec.datasets[0]))
    folds, _ = evaluation_folds(data, 2, spec.seed)
    texts = {q.id: q.text for q in data.queries}
    args = (data, ["bm25s", "rrf"], "raw", texts, 10, 1.2, 0.75, "none", tmp_path, folds, "ndcg@10")
    tops, _ = baseline_scores(*args)
    runs, _ = baseline_runs(*args)
    assert {k: top_ids(v) for k, v in tops.items()} == runs
    for top in tops.values():
        for pairs in top.values():
            assert [s for _, s in pairs] == sorted((s for _, s in pairs), reverse=True)
