"""The evaluation harness end to end on datasets/tiny, and its invariants against
independent truth: the pipeline's own Recaller.recall, bm25s, zero-weight twins,
hand-built specs and fold assignments."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memofs_eval._env  # noqa: F401
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.recall import Recaller
from memofs_eval import cli
from memofs_eval.runs.baselines import bm25_scores
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.runs.embed import make_embedder
from memofs.ranking.fusion import fuse
from memofs_eval.runs.runner import fused_run, fused_scores, run_all
from memofs_eval.runs.signals_cache import SignalCache
from memofs_eval.inputs.spec import TOGGLES, SpecError, load_spec
from memofs_eval.inputs.folds import group_folds
from memofs_eval.runs.tune import select
from support import REPO_ROOT

REPO = REPO_ROOT
QUICK = REPO / "eval" / "specs" / "quick.toml"
REPORT_FILES = ("report.md", "report.html", "results.parquet", "results.csv", "manifest.json", "significance.csv",
                "figures/ablation-tiny.png", "figures/sweep-w_vec.png", "figures/sweep-saturation_c.png",
                "figures/categories-tiny.png", "runs/tiny/default.trec", "runs/tiny/tuned.trec")


@pytest.fixture(scope="module")
def tiny() -> EvalData:
    spec = load_spec(QUICK)
    return EvalData(spec.datasets[0], load(spec.datasets[0]))


def test_quick_spec_writes_every_report_file(quick_spec_runs):
    codes, (out, _) = quick_spec_runs
    for name in REPORT_FILES:
        assert (out / name).is_file(), name
    res = pd.read_parquet(out / "results.parquet")
    assert {"dataset", "method", "subset", "category", "metric", "score"} <= set(res.columns)
    assert pd.read_csv(out / "results.csv").shape == res.shape
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("spec", "configs", "datasets", "packages", "git_commit", "seed", "timings"):
        assert key in manifest
    assert manifest["datasets"]["tiny"]["content_hash"] == load(load_spec(QUICK).datasets[0]).content_hash()
    # one row per method x subset x category x metric, each cell once
    assert not res.duplicated(["dataset", "method", "subset", "category", "metric"]).any()


def test_gate_fails_below_baseline_but_report_is_written(quick_spec_runs):
    codes, (out, _) = quick_spec_runs
    assert codes == [1, 1]
    assert "FAIL" in (out / "report.md").read_text()


def test_two_runs_identical(quick_spec_runs):
    _, (a, b) = quick_spec_runs
    for name in ("results.csv", "significance.csv", "confidence_intervals.csv", "report.md", "report.html"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    for trec in sorted((a / "runs" / "tiny").glob("*.trec")):
        assert trec.read_bytes() == (b / "runs" / "tiny" / trec.name).read_bytes(), trec.name


@pytest.mark.slow  # a third run of the quick spec; the rule is unit-tested in test_gate.py, the CLI's gate exit in quick_spec_runs
def test_gate_passes_within_tolerance(quick_spec_runs, tmp_path):
    _, (out, _) = quick_spec_runs
    res = pd.read_csv(out / "results.csv")
    row = res[(res.method == "default") & (res.subset == "heldout") & (res.category == "all") & (res.metric == "ndcg@10")]
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"datasets": {"tiny": {"ndcg@10": float(row.score.iloc[0]) + 0.015}}}))
    assert cli.main(["run", str(QUICK), "--quiet", "--out", str(tmp_path / "r"), "--baseline", str(baseline)]) == 0


def test_recombination_equals_recaller_recall(tiny, tmp_path):
    """Frames cached to disk, read back and fused equal a fresh Recaller's recall: same ids,
    same scores, for configs differing in fusion fields and in signal fields."""
    spec = load_spec(QUICK)
    base = spec.default_config()
    configs = [base, base.replace(use_recency=False), base.replace(w_vec=0.3, saturation_c=0.5),
               base.replace(k1=0.9, b=0.4, use_rewrite=False), base.replace(fuzzy_partial=0.5, rerank_blend=0.25)]
    ds = tiny.dataset
    for cfg in configs:
        SignalCache(tmp_path).frames(tiny, cfg, "lsa")  # compute and store
        cache = SignalCache(tmp_path)
        fs = cache.frames(tiny, cfg, "lsa")  # a new instance reads the file
        assert cache.hits == 1 and not fs.computed
        ours = fused_scores(fs.frames, cfg, 10)
        emb = make_embedder("lsa", [m.text for m in ds.memories])
        for scope in {q.scope for q in tiny.queries}:
            qs = [q for q in tiny.queries if q.scope == scope]
            root = ds.anchor_root(scope) if scope is not None else None  # tiny mixes two namespaces
            rec = Recaller(cfg, embedder=emb, graph=EntityGraph(ds.graph_nodes, ds.graph_edges), anchor_root=root)
            rec.add(ds.corpus_for(qs[0]))
            for q in qs:
                got = [(r.id, r.score) for r in rec.recall(q.text, 10, task_type=q.task_type, now=ds.now_for(q), config=cfg)]
                assert got == ours[q.id], (cfg, q.id)


@pytest.mark.parametrize("toggle,twin", [
    ("use_vector", {"w_vec": 0.0}),
    ("use_recency", {"w_recency": 0.0}),
    ("use_confidence", {"w_confidence": 0.0}),
    ("use_reranker", {"rerank_blend": 0.0}),
    ("use_fuzzy", {"fuzzy_boost": 0.0}),
    ("use_drift", {"stale_penalty": 1.0}),
    ("use_decay", {"unverified_penalty": 1.0}),
])
def test_toggle_equals_zero_weight_twin(tiny, toggle, twin):
    base = load_spec(QUICK).default_config()
    fs = SignalCache(memofs_eval._env.cache_root()).frames(tiny, base, "lsa")
    off = fused_scores(fs.frames, base.replace(**{toggle: False}), 20)
    zero = fused_scores(fs.frames, base.replace(**twin), 20)
    assert off == zero


def test_bm25_only_config_equals_bm25s(tiny):
    """The pipeline with every signal but BM25 off ranks exactly like the bm25s baseline."""
    cfg = load_spec(QUICK).default_config().replace(**{f: False for f in TOGGLES.values()}).replace(use_bm25=True)
    fs = SignalCache(memofs_eval._env.cache_root()).frames(tiny, cfg, "none")
    ours = fused_run(fs.frames, cfg, 20)
    peer = bm25_scores(tiny, {q.id: q.text for q in tiny.queries}, 20, cfg.k1, cfg.b)
    assert ours == {q: list(d) for q, d in peer.items()}


def test_pool_results_do_not_depend_on_worker_count(tiny):
    base = load_spec(QUICK).default_config()
    fs = SignalCache(memofs_eval._env.cache_root()).frames(tiny, base, "lsa")
    jobs = [(f"w{w}", "g", base.replace(w_vec=w)) for w in (0.0, 0.3, 0.6, 1.0)]
    assert run_all(jobs, {"g": fs.frames}, workers=2) == run_all(jobs, {"g": fs.frames}, workers=1)


# --------------------------------------------------------------------------- specs


def _spec(tmp_path, body: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(body + '\n[[datasets]]\nname = "tiny"\n')
    return p


def test_spec_expansion(tmp_path):
    spec = load_spec(_spec(tmp_path, """
[ablations]
toggles = ["vector", "bm25", "recency"]
embedders = ["none"]
[ablations.sweeps]
saturation_c = { log = [0.25, 16.0], num = 7 }
w_recency = [0.0, 0.3]
w_vec = { start = 0.0, stop = 1.0, step = 0.25 }
[[ablations.grid]]
w_vec = [0.2, 0.8]
k1 = [1.0, 2.0]
"""))
    v = {x.name: x for x in spec.variants()}
    assert {"-vector", "-bm25", "-recency", "only:vector", "only:bm25", "only:recency", "embedder=none"} <= set(v)
    assert not v["-vector"].config.use_vector and v["-vector"].config.use_bm25
    only_vec = v["only:vector"].config
    assert only_vec.use_vector and not only_vec.use_bm25 and not only_vec.use_recency
    only_rec = v["only:recency"].config  # an adjustment keeps the retrieval signals
    assert only_rec.use_recency and only_rec.use_vector and only_rec.use_bm25
    sat = [x.value for x in spec.variants() if x.axis == "saturation_c"]
    assert sat == pytest.approx([0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    assert [x.value for x in spec.variants() if x.axis == "w_vec" and x.group == "sweep"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    c = v["w_recency=0.3"].config  # w_relevance absorbs the change: weights sum to 1
    assert c.w_relevance + c.w_recency + c.w_confidence == pytest.approx(1.0)
    assert sum(x.group == "grid" for x in spec.variants()) == 4
    assert v["embedder=none"].embedder == "none" and v["embedder=none"].signal_group != v["default"].signal_group


@pytest.mark.parametrize("body,needle", [
    ("[ablations]\ntoggles = [\"vectr\"]\n", "s.toml:2: ablations.toggles: unknown toggle 'vectr'"),
    ("[ablations.sweeps]\nw_vecc = [0.1]\n", "s.toml:2: ablations.sweeps.w_vecc: not a RecallConfig field"),
    ("[ablations.sweeps]\nw_vec = [1.5]\n", "w_vec must be in [0, 1]"),
    ("k = 0\n", "s.toml:1: k: expected a positive integer"),
    ("[baselines]\nmethods = [\"rrff\"]\n", "s.toml:2: baselines.methods: unknown baseline"),
    ("bogus = 1\n", "s.toml:1: bogus: unknown key"),
    ("k = [\n", "s.toml"),
])
def test_spec_errors_name_file_line_and_key(tmp_path, body, needle):
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, body))
    assert needle in str(err.value)


def test_bundled_spec_finds_every_bundled_dataset(tmp_path):
    from memofs_datasets.format import bundled_datasets

    p = tmp_path / "b.toml"
    p.write_text('[[datasets]]\nname = "bundled"\n')
    assert [d.name for d in load_spec(p).datasets] == list(bundled_datasets())


# --------------------------------------------------------------------------- CV


@settings(max_examples=60, deadline=None)
@given(groups=st.lists(st.integers(0, 6), min_size=2, max_size=40), n_folds=st.integers(2, 6), seed=st.integers(0, 10_000))
def test_cv_folds_never_split_a_group(groups, n_folds, seed):
    qids = [f"q{i}" for i in range(len(groups))]
    gmap = {q: f"g{g}" for q, g in zip(qids, groups)}
    if len(set(groups)) < 2:
        with pytest.raises(ValueError):
            group_folds(qids, gmap, n_folds, seed)
        return
    folds = group_folds(qids, gmap, n_folds, seed)
    tested = [q for _, test in folds for q in test]
    assert sorted(tested) == sorted(qids)  # every query tested exactly once
    for train, test in folds:
        assert test and not ({gmap[q] for q in train} & {gmap[q] for q in test})
        assert sorted(train + test) == sorted(qids)
    assert folds == group_folds(qids, gmap, n_folds, seed)  # fixed by the seed


def test_select_uses_training_queries_only():
    # candidate "a" wins on the training queries, "b" on the test query: "a" must be chosen
    scores = pd.DataFrame({"a": [1.0, 1.0, 0.0], "b": [0.0, 0.5, 1.0]}, index=["t1", "t2", "x"])
    chosen, info = select(scores, [(["t1", "t2"], ["x"])])
    assert chosen == {"x": "a"} and info[0]["test_mean"] == 0.0


def test_tune_learned_is_wired_and_tune_without_spec_is_refused(capsys):
    from memofs_eval import cli

    args = cli.parser().parse_args(["tune", "--learned"])
    assert args.learned and args.spec is None and args.fn is cli.cmd_tune
    with pytest.raises(SystemExit, match="tune needs a SPEC"):
        cli.main(["tune"])
