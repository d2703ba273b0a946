"""Learned fusion v3: the training-range fallback on an out-of-distribution corpus, the new
portable features by hand, profiles, the study's cached scorer against the online path, and
the shipped -v3 models reproducing their recorded figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memofs.ranking.config import RecallConfig
from memofs.ranking.learned import (
    FEATURES,
    FeatureParams,
    LearnedModel,
    TrainingRange,
    feature_set,
    features,
    fuse_learned,
    load_model,
)
from memofs.ranking.pools import pools
from memofs.ranking.profiles import MODELS_DIR, profile_file
from support import frame
from support import REPO_ROOT

REPO = REPO_ROOT


def test_new_features_by_hand():
    rows = [{"id": "a", "bm25": 3.0, "cos": 0.1}, {"id": "b", "bm25": 1.0, "cos": 0.9}, {"id": "c", "bm25": 0.0, "cos": 0.5}]
    f = frame(rows, query="x")
    cfg = RecallConfig(use_fuzzy=False)
    p = pools(f, cfg, 10)
    X = features(f, p.rows, p.member, FeatureParams.from_config(cfg), cfg)
    col = {n: X[:, FEATURES.index(n)] for n in FEATURES}
    ids = [f.ids[r] for r in p.rows.tolist()]
    # lexical ranks a=1, b=2, c has none (last: 3); cosine ranks b=1, c=2, a=3
    lex_rank = {"a": 1, "b": 2, "c": 3}
    cos_rank = {"b": 1, "c": 2, "a": 3}
    for j, d in enumerate(ids):
        assert col["lexical_rank_log"][j] == pytest.approx(np.log(lex_rank[d]))
        assert col["cosine_rank_log"][j] == pytest.approx(np.log(cos_rank[d]))
        assert col["rrf"][j] == pytest.approx(1 / (60 + lex_rank[d]) + 1 / (60 + cos_rank[d]))
    bm = {"a": 1.0, "b": 1 / 3, "c": 0.0}
    assert [col["bm25_norm"][j] for j in range(3)] == pytest.approx([bm[d] for d in ids])
    assert set(feature_set("portable")) <= set(FEATURES) and "is_question" not in feature_set("portable")
    assert "is_question" in feature_set("portable+time+context")


def _linear(range_: TrainingRange | None) -> LearnedModel:
    """Score = lexical (absolute): a model that knows only small lexical scores."""
    return LearnedModel(("lexical", "cosine"), np.zeros(2), np.ones(2), np.array([0.05, 0.0]), range=range_)


def _rrf_order(rows: list[dict]) -> list[str]:
    """Naive RRF: ranks by lexical (bm25 + fuzzy boost 0: no fuzzy) and by cosine, k = 60."""
    lex = sorted((r for r in rows if r["bm25"] > 0), key=lambda r: (-r["bm25"], r["id"]))
    cos = sorted(rows, key=lambda r: (-r["cos"], r["id"]))
    n = len(rows)
    score = {r["id"]: 1 / (60 + (lex.index(r) + 1 if r in lex else n)) + 1 / (60 + cos.index(r) + 1) for r in rows}
    return sorted(score, key=lambda d: (-round(score[d], 4), d))


def test_out_of_distribution_corpus_falls_back_to_rrf():
    rng = TrainingRange(np.array([0.0, 0.0]), np.array([1.0, 1.0]))  # trained on lexical, cosine in [0, 1]
    cfg = RecallConfig(use_fuzzy=False)
    # in distribution: the model's order (lexical desc)
    inside = [{"id": "a", "bm25": 0.2, "cos": 0.9}, {"id": "b", "bm25": 0.9, "cos": 0.1}, {"id": "c", "bm25": 0.5, "cos": 0.5}]
    fu = fuse_learned(frame(inside, "q"), cfg, 10, model=_linear(rng))
    assert fu.ids(frame(inside, "q")) == ["b", "c", "a"]
    assert "fell back" not in fu.weights.reason and "in distribution" in fu.weights.reason
    # a corpus whose BM25 is 40x the training range: every lexical value is outside
    far = [{"id": "a", "bm25": 40.0, "cos": 0.9}, {"id": "b", "bm25": 90.0, "cos": 0.1}, {"id": "c", "bm25": 50.0, "cos": 0.5},
           {"id": "d", "bm25": 60.0, "cos": 0.7}]
    f = frame(far, "q")
    fu = fuse_learned(f, cfg, 10, model=_linear(rng))
    assert "out of distribution" in fu.weights.reason and "fell back to rrf" in fu.weights.reason
    assert fu.ids(f) == _rrf_order(far)
    assert fu.parts["learned_ood_share"][0] == pytest.approx(0.5)  # lexical all outside, cosine inside
    # the switch: keep the model's order, but say so
    keep = fuse_learned(f, cfg.replace(learned_fallback="none"), 10, model=_linear(rng))
    assert keep.ids(f) == ["b", "d", "c", "a"] and "kept" in keep.weights.reason
    # a higher threshold tolerates it; a v2 file (no range) never falls back
    assert "fell back" not in fuse_learned(f, cfg.replace(learned_ood_threshold=0.6), 10, model=_linear(rng)).weights.reason
    assert "fell back" not in fuse_learned(f, cfg, 10, model=_linear(None)).weights.reason
    with pytest.raises(ValueError, match="learned_fallback"):
        RecallConfig(learned_fallback="formula?")


def test_profiles():
    assert RecallConfig().profile == "reference"
    assert RecallConfig.from_dict({}) == RecallConfig()
    with pytest.raises(ValueError, match="profile"):
        RecallConfig.from_dict({"profile": "fast"})
    if not profile_file("robust").is_file():
        pytest.skip("robust profile not shipped in this checkout")
    cfg = RecallConfig.from_dict({"profile": "robust", "top_k": 5})
    assert cfg.profile == "robust" and cfg.fusion == "learned" and cfg.top_k == 5
    assert Path(cfg.learned_model).parent == MODELS_DIR
    load_model(cfg.learned_model)
    assert RecallConfig.from_dict(cfg.to_dict()) == cfg


def test_study_scorer_is_the_online_path(tmp_path):
    """The study scores cached feature blocks; it must rank exactly as fuse_learned does, and
    the on-disk cache must give back the same blocks."""
    from memofs_eval.studies import learned_lodo as LD
    from memofs_eval.studies import learned_bench as S

    bench = S.Bench.load("tiny", embedder="none", root=tmp_path / "sig")
    lab = LD.Lab({"tiny": bench}, cache=tmp_path / "feat", log=lambda m: None)
    for query in LD.QUERY_MODES:
        cand = LD.Candidate(query, "portable+time", "pairwise-logistic")
        parts = (("tiny", tuple(bench.qids)),)
        m = lab.train(cand, parts)
        got = lab.run(m, cand, "tiny", bench.qids)
        cfg = lab.config("tiny", query)
        frames = lab.frames("tiny", query)
        want = {q: fuse_learned(frames[q], cfg, cfg.top_k, model=m).ids(frames[q]) for q in bench.qids}
        assert got == want
        again = LD.Lab({"tiny": bench}, cache=tmp_path / "feat", log=lambda m: None)
        assert again.run(m, cand, "tiny", bench.qids) == got


@pytest.mark.parametrize("path", sorted([*MODELS_DIR.glob("*-v3.json"), *MODELS_DIR.glob("learned-recommended-*.json")]),
                         ids=lambda p: p.name)
def test_shipped_v3_model_reproduces_its_recorded_figure(path):
    """Each -v3 and recommended model file loads in the online path and gives, on its recorded
    subset, the nDCG@10 the study recorded (through fuse_learned, not the study's scorer)."""
    from memofs_eval.studies import learned_bench as S
    from memofs_eval.scoring.metrics import per_query

    model = load_model(path)
    check = model.cv.get("check") or {}
    if not check:
        pytest.skip("no recorded check figure")
    bench = S.Bench.load(check["dataset"], embedder=check["embedder"])
    cfg = bench.spec.default_config().replace(**check["settings"])
    frames = bench.frames_of(cfg)
    run = {q: fuse_learned(frames[q], cfg, cfg.top_k, model=model).ids(frames[q]) for q in check["queries"]}
    got = per_query({q: bench.qrels[q] for q in run}, run, ["ndcg@10"])["ndcg@10"].mean()
    assert got == pytest.approx(check["ndcg@10"], abs=1e-9)


def test_status_names_the_active_profile(tmp_path):
    from support import cli_json as jrun, cli_run as run

    run(tmp_path, "init")
    assert jrun(tmp_path, "status")["profile"] == "reference"
    assert "profile:    reference" in run(tmp_path, "status").output
    if not profile_file("robust").is_file():
        pytest.skip("robust profile not shipped in this checkout")
    cfg_path = tmp_path / ".memofs" / "config.json"
    doc = json.loads(cfg_path.read_text())
    doc["recall"] = {"profile": "robust"}
    cfg_path.write_text(json.dumps(doc))
    assert jrun(tmp_path, "status")["profile"] == "robust"


def test_readme_lodo_table_reads_the_summary(tmp_path):
    from memofs_eval.reporting.readme_tables import lodo_table

    assert "learned_transfer" in lodo_table(tmp_path)
    d = tmp_path / "reports" / "learned" / "lodo"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({
        "embedders": {"locomo": "minilm"}, "absent": ["longmemeval"],
        "lodo": {"locomo": {"learned": 0.5032, "reference": 0.1961, "peers": {"a": 0.4, "b": 0.4933}, "grouped_nested": 0.6077}},
        "robust": {"candidate": "lambdamart / all / raw query", "lodo": {"locomo": 0.51}}}))
    t = lodo_table(tmp_path)
    assert "| locomo (minilm) | 0.196 | 0.493 | 0.503 | 0.510 | 0.608 |" in t
    assert "Absent when generated: longmemeval" in t and "lambdamart / all / raw query" in t


def test_selection_is_maximin_over_inner_folds(monkeypatch):
    """The nested rule picks the best worst inner fold (not the best mean), ties by the mean
    and then by the space's order; hand-made fold scores."""
    from memofs_eval.studies import learned_lodo as LD

    space = [LD.Candidate("raw", "portable", "lambdamart"), LD.Candidate("raw", "portable", "pairwise-logistic"),
             LD.Candidate("raw", "all", "pairwise-logistic"), LD.Candidate("raw", "all", "lambdamart")]
    folds = {space[0].name: [0.90, 0.30],  # best mean (0.60), worst fold 0.30
             space[1].name: [0.55, 0.50],  # worst fold 0.50, mean 0.525
             space[2].name: [0.50, 0.56],  # worst fold 0.50, mean 0.53: wins the tie by its mean
             space[3].name: [0.50, 0.56]}  # same folds as space[2]: later in the space, loses the tie
    lab = LD.Lab({}, log=lambda m: None)
    monkeypatch.setattr(lab, "inner_folds", lambda c, training: folds[c.name])
    best, got = lab.select(["a", "b"], space)
    assert best == space[2] and got == folds


def test_nested_grouped_cv_selects_on_training_queries_only(tmp_path, monkeypatch):
    """Each outer fold's pick is made on its own training queries: no query of the fold it is
    scored on is ranked before that fold's final run, and the final run uses the pick."""
    from memofs_eval.studies import learned_lodo as LD
    from memofs_eval.studies import learned_bench as S

    bench = S.Bench.load("tiny", embedder="none", root=tmp_path / "sig")
    lab = LD.Lab({"tiny": bench}, cache=tmp_path / "feat", log=lambda m: None)
    space = [LD.Candidate("raw", "ranks", "pairwise-logistic"), LD.Candidate("raw", "portable", "pairwise-logistic")]
    calls: list[tuple[str, set[str]]] = []
    run = lab.run
    monkeypatch.setattr(lab, "run", lambda m, c, d, qids: (calls.append((c.name, set(qids))), run(m, c, d, qids))[1])
    ranked, picks = lab.grouped_cv_nested("tiny", space)
    folds = lab.grouped_folds("tiny")
    assert len(folds) >= 2 and set(picks) == {g for g, _, _ in folds}
    assert set(ranked) == {q for _, _, te in folds for q in te}
    i = 0
    for g, tr, te in folds:
        inner = len(group_folds_of(tr, bench)) * len(space)
        for _name, qids in calls[i:i + inner]:
            assert qids <= set(tr) and not qids & set(te)
        final_name, final_qids = calls[i + inner]
        assert final_qids == set(te) and final_name == picks[g]
        i += inner + 1
    assert i == len(calls)


def group_folds_of(qids, bench):
    from memofs_eval.inputs.folds import group_folds

    return group_folds(list(qids), bench.group, 3, 42)


def test_select_within_takes_the_best_inner_mean(monkeypatch):
    """Within one dataset the pick is the best mean over the inner folds (ties: the space's
    order); hand-made fold scores."""
    import pandas as pd

    from memofs_eval.studies import learned_lodo as LD

    space = [LD.Candidate("raw", "portable", "lambdamart"), LD.Candidate("raw", "ranks", "pairwise-logistic"),
             LD.Candidate("raw", "all", "pairwise-logistic")]
    fold_scores = {space[0].name: [0.9, 0.3], space[1].name: [0.55, 0.7], space[2].name: [0.7, 0.55]}
    bench = type("B", (), {"group": {f"q{i}": f"g{i % 2}" for i in range(6)}})()
    lab = LD.Lab({"d": bench}, log=lambda m: None)
    seen: dict[str, int] = {}
    monkeypatch.setattr(lab, "train", lambda c, parts: c)
    monkeypatch.setattr(lab, "run", lambda m, c, d, qids: {"cand": c.name})

    def fake_ndcg(b, ranked):
        n = ranked["cand"]
        seen[n] = seen.get(n, 0) + 1
        return pd.Series([fold_scores[n][seen[n] - 1]])

    monkeypatch.setattr(LD, "ndcg", fake_ndcg)
    best, means = lab.select_within("d", list(bench.group), space)
    assert means == pytest.approx({space[0].name: 0.6, space[1].name: 0.625, space[2].name: 0.625})
    assert best == space[1]  # ties with space[2] on the mean; earlier in the space


def test_pool_oracle_is_the_ideal_order_of_the_pool(tmp_path):
    """The ceiling of reranking the pools: nDCG@10 of the pool's candidates sorted by label,
    computed here by the textbook formula (linear gain, log2 discount) against every judged
    memory, and never below any model's run on the same pools."""
    import math

    from memofs_eval.studies import learned_lodo as LD
    from memofs_eval.studies import learned_bench as S

    bench = S.Bench.load("tiny", embedder="none", root=tmp_path / "sig")
    lab = LD.Lab({"tiny": bench}, cache=tmp_path / "feat", log=lambda m: None)
    got = lab.pool_oracle("tiny", "raw")
    blocks, k = lab.blocks("tiny", "raw"), lab.config("tiny", "raw").top_k
    cand = LD.Candidate("raw", "portable", "pairwise-logistic")
    model_run = S.ndcg(bench, lab.run(lab.train(cand, lab.all_parts(["tiny"])), cand, "tiny", lab.test_qids("tiny")))
    for q in lab.test_qids("tiny"):
        gains = sorted(blocks[q].y.tolist(), reverse=True)[:k]
        dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
        ideal = sorted(bench.qrels[q].values(), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        assert got[q] == pytest.approx(dcg / idcg, abs=1e-9)
        assert got[q] >= model_run[q] - 1e-12


def test_why_names_the_deciding_fold_and_the_ceiling():
    """The report's reasons, on hand-made results: the missed LODO row names the inner fold
    that decided the pick and the rank of the best held-out candidate; the missed
    in-distribution row gives the pool ceiling and both shares of it; a met row says nothing."""
    import pandas as pd

    from memofs_eval.studies import learned_lodo as LD
    from memofs_eval.studies import learned_transfer as T

    a, b = LD.Candidate("raw", "peers", "pairwise-logistic"), LD.Candidate("raw", "all", "lambdamart")
    h = T.Held("x", ["q1", "q2"], training=["y", "z"], selected=a, oracle=0.8,
               inner={a.name: [0.6, 0.4], b.name: [0.3, 0.9]},
               scores=pd.DataFrame({"only:bm25": [0.5, 0.5], "only:vector": [0.3, 0.3], "baseline:rrf@raw": [0.5, 0.7],
                                    "learned:lodo": [0.5, 0.6]}))
    h.runs = {n: {} for n in h.scores}
    tg = pd.DataFrame([{"dataset": "x", "target": "LODO >= max(...)", "needed": 0.6, "got": 0.55, "met": False},
                       {"dataset": "x", "target": "grouped CV (nested selection) >= 0.65", "needed": 0.65, "got": 0.6, "met": False},
                       {"dataset": "x", "target": "held out >= 0.5", "needed": 0.5, "got": 0.6, "met": True}])
    text = T.why({"x": h}, {"x": {a.name: 0.55, b.name: 0.62}}, tg)
    lines = text.splitlines()
    assert len(lines) == 3
    assert "worst inner fold, z (0.4000)" in lines[0] and f"{b.name} (0.6200), ranks 2 of 2" in lines[0]
    assert "at most 0.8000" in lines[1] and "asks for 81%" in lines[1] and "reaches 75%" in lines[1] and "+0.0000" in lines[1]
    assert "x 0.5000 / 0.3000" in lines[2]
    assert T.why({"x": h}, {}, tg[tg["met"]]) == "Every target is met."
