"""Learned fusion: features by hand, model file round trip and errors, same pools as the
formula, formula path unchanged, grouped folds, a tiny end-to-end train + online recall."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from memofs.ranking.config import RecallConfig
from memofs.ranking.fusion import fuse
from memofs.ranking.pools import pools
from memofs.ranking.learned import (
    FEATURES,
    FeatureParams,
    LambdaMartModel,
    LearnedModel,
    ModelFileError,
    features,
    fuse_learned,
    load_model,
    model_from_json,
    query_cues,
)
from memofs.signals.frame import SignalFrame, context_columns, natural_key
from support import REPO_ROOT
from support import frame

REPO = REPO_ROOT
NAN = float("nan")


def random_frame(rng: np.random.Generator, n: int, query: str = "when did we move the cache") -> SignalFrame:
    rows = []
    for i in range(n):
        rows.append({
            "id": f"m{i:03d}", "bm25": float(rng.choice([0.0, rng.uniform(0, 6)])), "fuzzy": float(rng.choice([0.0, rng.uniform(0, 2)])),
            "cos": float(rng.uniform(-0.2, 0.9)) if rng.random() > 0.1 else NAN, "rerank": float(rng.uniform(0, 1)),
            "age": float(rng.uniform(0, 500)) if rng.random() > 0.1 else NAN, "conf": float(rng.uniform(0, 1)) if rng.random() > 0.5 else NAN,
            "kind": str(rng.choice(["decision", "constraint", "note", "preference", "goal"])), "stale": bool(rng.random() < 0.1),
            "graph": bool(rng.random() < 0.05),
        })
    return frame(rows, query)


def random_model(rng: np.random.Generator) -> LearnedModel:
    n = len(FEATURES)
    return LearnedModel(FEATURES, rng.normal(size=n), rng.uniform(0.5, 2.0, size=n), rng.normal(size=n))


# --------------------------------------------------------------------------- features


def test_features_by_hand():
    f = frame([
        {"id": "a", "bm25": 2.0, "fuzzy": 0.0, "cos": 0.5, "rerank": 0.3, "age": 30.0, "conf": 0.9, "kind": "decision"},
        {"id": "b", "bm25": 0.0, "fuzzy": 1.0, "cos": 0.8, "age": 400.0, "kind": "note", "stale": True},
        {"id": "c", "bm25": 1.0, "fuzzy": 0.5, "age": NAN, "kind": "goal"},
    ], query="When did Alice move to Paris in May 2023?")
    rows = np.array([0, 1, 2])
    member = {"vector_pool": np.array([True, True, False]), "lexical_pool": np.array([True, False, True])}
    X = features(f, rows, member, FeatureParams())
    v = {name: X[:, j] for j, name in enumerate(FEATURES)}
    lex = [2.0, 0.15, 1.075]
    assert v["lexical"].tolist() == pytest.approx(lex)
    assert v["lexical_saturated"].tolist() == pytest.approx([x / (x + 2) for x in lex])
    assert v["lexical_norm"].tolist() == pytest.approx([1.0, 0.0, (1.075 - 0.15) / (2.0 - 0.15)])
    assert v["lexical_rr"].tolist() == [1.0, 0.0, 0.5]  # a (2.0) then c (1.075); b outside the pool
    assert v["vector_rr"].tolist() == [0.5, 1.0, 0.0]  # b (0.8) then a (0.5)
    assert v["cosine"].tolist() == [0.5, 0.8, 0.0] and v["cosine_missing"].tolist() == [0, 0, 1]
    assert v["cosine_norm"].tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert v["rerank"].tolist() == [0.3, 0.0, 0.0] and v["rerank_missing"].tolist() == [0, 1, 1]
    assert v["log_age"].tolist() == pytest.approx([math.log(31), math.log(401), 0.0])
    assert v["recency"].tolist() == pytest.approx([0.5, 0.5 ** (400 / 30), 0.5])
    assert v["age_rel"].tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert v["confidence"].tolist() == [0.9, 0.5, 0.5] and v["confidence_missing"].tolist() == [0, 1, 1]
    assert v["stale"].tolist() == [0, 1, 0]
    assert v["unverified"].tolist() == [0, 1, 0]  # a note past 30 days; a 30-day decision is not; no age -> never
    assert v["kind_decision"].tolist() == [1, 0, 0] and v["kind_note"].tolist() == [0, 1, 0] and v["kind_goal"].tolist() == [0, 0, 1]
    # the query asks about the past ("when did", "moved"?) with a month and a year
    assert v["past_x_recency"].tolist() == pytest.approx(v["recency"].tolist())
    assert v["date_x_age_rel"].tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert v["when_x_age_rel"].tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert v["present_x_recency"].tolist() == [0, 0, 0]
    qlen = math.log1p(9)  # When did Alice move to Paris in May 2023
    assert v["qlen_x_lexical_norm"].tolist() == pytest.approx([qlen * x for x in v["lexical_norm"]])


def test_context_columns_sessions_and_neighbours():
    day = 86400.0
    ids = ["D1:10", "D1:2", "D1:1", "D2:1", "g", "x", "other"]
    ns = ["c", "c", "c", "c", None, "c", "d"]
    ts = np.array([day, day, day, 3 * day, NAN, NAN, day])
    texts = ["fine, thanks", "how was the race?", "I ran a charity race last weekend", "hi", "", "no date", "other namespace"]
    c = context_columns(ids, ns, ts, texts)
    assert natural_key("D1:2") < natural_key("D1:10")
    # session (c, day 1) in natural id order: D1:1, D1:2, D1:10; everything else alone
    assert c.prev_row.tolist() == [1, 2, -1, -1, -1, -1, -1]
    assert c.next_row.tolist() == [-1, 0, 1, -1, -1, -1, -1]
    assert c.session[0] == c.session[1] == c.session[2] and len(set(c.session[3:].tolist())) == 4
    assert c.is_question.tolist() == [False, True, False, False, False, False, False]
    assert c.has_time.tolist() == [False, False, True, False, False, False, False]
    assert c.n_words.tolist() == [2, 4, 7, 1, 0, 2, 2]
    # restricting a frame drops neighbours left out
    sub = c.take(np.array([0, 2]), len(ids))
    assert sub.prev_row.tolist() == [-1, -1] and sub.next_row.tolist() == [-1, -1]


def test_context_features_by_hand():
    day = 86400.0
    rows_ = [
        {"id": "t1", "bm25": 0.0, "fuzzy": 0.0, "cos": 0.0},  # "How was the race?"
        {"id": "t2", "bm25": 4.0, "fuzzy": 0.0, "cos": 0.5},  # the question's words
        {"id": "t3", "bm25": 0.0, "fuzzy": 0.0, "cos": 1.0},  # the answer, next to it
        {"id": "u1", "bm25": 2.0, "fuzzy": 0.0, "cos": 0.25},  # another session
    ]
    f = frame(rows_, query="When was the race?")
    f.context = context_columns(f.ids, ["c"] * 4, np.array([day, day, day, 5 * day]),
                                ["How was the race?", "the charity race", "great, I ran it yesterday", "race day"])
    rows = np.array([0, 1, 2, 3])
    X = features(f, rows, {"vector_pool": np.ones(4, bool), "lexical_pool": np.ones(4, bool)}, FeatureParams())
    v = {name: X[:, j] for j, name in enumerate(FEATURES)}
    assert v["prev_lexical_rel"].tolist() == [0.0, 0.0, 1.0, 0.0]  # lexical / max lexical (4.0)
    assert v["next_cosine_rel"].tolist() == [0.5, 1.0, 0.0, 0.0]  # min-max cosine over the corpus
    assert v["nb2_lexical_rel"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert v["session_max_lexical_rel"].tolist() == [1.0, 1.0, 1.0, 0.5]
    assert v["session_other_cosine_rel"].tolist() == [1.0, 1.0, 0.5, 0.0]
    assert v["session_other_lexical_rel"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert v["is_question"].tolist() == [1, 0, 0, 0]
    assert v["after_question_lexical_rel"].tolist() == [0.0, 0.0, 0.0, 0.0]  # t2 follows a question with lexical 0
    assert v["after_question_cosine_rel"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert v["has_time"].tolist() == [0, 0, 1, 0] and v["when_x_has_time"].tolist() == [0, 0, 1, 0]
    assert v["log_words"].tolist() == pytest.approx([math.log1p(4), math.log1p(3), math.log1p(5), math.log1p(2)])
    # without context columns: no neighbours, each document its own session
    f.context = None
    X0 = features(f, rows, {"vector_pool": np.ones(4, bool), "lexical_pool": np.ones(4, bool)}, FeatureParams())
    v0 = {name: X0[:, j] for j, name in enumerate(FEATURES)}
    assert v0["nb1_lexical_rel"].tolist() == [0, 0, 0, 0] and v0["session_other_cosine_rel"].tolist() == [0, 0, 0, 0]
    assert v0["session_max_lexical_rel"].tolist() == [0.0, 1.0, 0.0, 0.5]


@pytest.mark.parametrize("changes", [{}, {"use_bm25": False}, {"use_fuzzy": False}, {"use_decay": False}])
def test_features_are_the_fusion_terms_under_the_serving_switches(changes):
    """The lexical features are the formula's lexical score (switches included) and
    ``unverified`` the formula's kind-decay test; checked against the formula's own parts."""
    rng = np.random.default_rng(11)
    f = random_frame(rng, 60)
    cfg = RecallConfig(**changes)
    pool = pools(f, cfg, 10)
    rows, _w, lexical, member = pool
    v = {name: col for name, col in zip(FEATURES, features(f, rows, member, FeatureParams(), cfg).T)}
    assert v["lexical"].tolist() == lexical[rows].tolist()
    want = (cfg.use_bm25 * f.bm25 + cfg.use_fuzzy * 0.15 * f.fuzzy)[rows]  # hand form of step 1
    np.testing.assert_allclose(v["lexical"], want, rtol=0, atol=1e-12)
    assert not v["bm25"].any() if not cfg.use_bm25 else v["bm25"].tolist() == f.bm25[rows].tolist()
    parts = fuse(f, cfg, 10, candidates=pool).candidate_parts  # per candidate, in pool order
    assert v["unverified"].astype(bool).tolist() == parts["unverified"].tolist()
    assert v["recency"].tolist() == parts["recency"].tolist() and v["confidence"].tolist() == parts["confidence"].tolist()
    if not cfg.use_decay:
        assert not v["unverified"].any()


@pytest.mark.parametrize(("text", "past", "date", "present", "when"), [
    ("When did Caroline go to the support group?", 1, 0, 0, 1),
    ("what is the current retry limit", 0, 0, 1, 0),
    ("What did Mel paint last year", 1, 0, 0, 0),
    ("pgBouncer default_pool_size", 0, 0, 0, 0),
    ("decision from March 2024 about caching", 0, 1, 0, 0),
    ("which library do we use now", 0, 0, 1, 0),
    ("we used to deploy on Fridays", 1, 1, 0, 0),
])
def test_query_cues(text, past, date, present, when):
    q = query_cues(text)
    assert (q.past, q.date, q.present, q.when) == (past, date, present, when)


# --------------------------------------------------------------------------- model file


def test_model_json_round_trip_exact(tmp_path):
    rng = np.random.default_rng(7)
    m = random_model(rng)
    m.training = {"data_sha256_16": "abc"}
    path = m.save(tmp_path / "m.json")
    text = path.read_text()
    data = json.loads(text)  # plain JSON, human-readable
    assert data["format"] == "memofs-learned-fusion" and data["version"] == 1
    assert [f["name"] for f in data["features"]] == list(FEATURES)
    back = load_model(path)
    f = random_frame(rng, 80)
    cfg = RecallConfig(round_decimals=12)
    a = fuse_learned(f, cfg, 10, model=m)
    b = fuse_learned(f, cfg, 10, model=back)
    assert np.array_equal(a.rows, b.rows) and np.array_equal(a.scores, b.scores)
    assert np.array_equal(back.coef, m.coef) and np.array_equal(back.mean, m.mean)
    # the online path: RecallConfig(fusion="learned", learned_model=path) through fuse()
    c = fuse(f, cfg.replace(fusion="learned", learned_model=str(path)), 10)
    assert np.array_equal(c.rows, a.rows) and np.array_equal(c.scores, a.scores)
    # the score is the documented formula
    rows, _w, _lex, member = pools(f, cfg, 10)
    X = features(f, rows, member, FeatureParams())  # features see the whole pool (min-max, ranks)
    s = dict(zip(rows.tolist(), (((X - m.mean) / m.scale) @ m.coef).tolist(), strict=True))
    assert c.parts["learned_raw"].tolist() == pytest.approx([s[r] for r in c.rows.tolist()], rel=1e-12, abs=1e-12)
    assert c.scores.tolist() == pytest.approx([round(1 / (1 + math.exp(-s[r])), 12) for r in c.rows.tolist()], abs=1e-12)


def test_model_file_errors_name_file_line_field(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{\n "format": "memofs-learned-fusion",\n "version": 1,\n oops\n}\n')
    with pytest.raises(ModelFileError, match=r"bad\.json:4: json"):
        load_model(p)
    good = random_model(np.random.default_rng(1)).to_json()
    bad = json.loads(json.dumps(good))
    bad["features"][3]["coef"] = "x"
    with pytest.raises(ModelFileError, match=r"features\[3\]\.coef"):
        model_from_json(bad, "m.json")
    bad = json.loads(json.dumps(good))
    bad["features"][0]["name"] = "nope"
    with pytest.raises(ModelFileError, match=r"m\.json: features\[0\]\.name: unknown feature"):
        model_from_json(bad, "m.json")
    with pytest.raises(ModelFileError, match="version"):
        model_from_json({**good, "version": 99}, "m.json")
    with pytest.raises(ModelFileError, match="file not found"):
        load_model(tmp_path / "missing.json")
    # a constant the features' config rejects is the file's error, not a traceback at recall
    bad = {**good, "feature_params": {**good["feature_params"], "default_confidence": 1.5}}
    with pytest.raises(ModelFileError, match=r"m\.json: feature_params: .*default_confidence"):
        model_from_json(bad, "m.json")


def test_config_fields_validated():
    assert RecallConfig().fusion == "formula" and RecallConfig().learned_model is None
    with pytest.raises(ValueError, match="fusion must be one of"):
        RecallConfig(fusion="neural")
    with pytest.raises(ValueError, match="needs learned_model"):
        RecallConfig(fusion="learned")
    with pytest.raises(ValueError, match="learned_model"):
        RecallConfig(learned_model="")
    cfg = RecallConfig(fusion="learned", learned_model="x.json")
    assert RecallConfig.from_dict(cfg.to_dict()) == cfg
    # formula configs keep the hash they had before the fields existed (entity_match too)
    d = RecallConfig().to_dict()
    del d["fusion"], d["learned_model"], d["entity_match"], d["learned_fallback"], d["learned_ood_threshold"], d["profile"]
    del d["upstream_index_text"], d["graph_doc_aliases"], d["upstream_stop_words"], d["neutral_recency_confidence"]
    del d["reranker"], d["reranker_model"], d["rerank_top_n"], d["stem"]
    assert RecallConfig().config_hash() == hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- fusion


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_learned_fuse_uses_the_formula_pools(seed):
    rng = np.random.default_rng(seed)
    f = random_frame(rng, 120)
    m = random_model(rng)
    for k in (1, 5, 10):
        cfg = RecallConfig()
        rows, _w, _lex, _member = pools(f, cfg, k)
        out = fuse_learned(f, cfg, k, model=m)
        assert set(out.rows.tolist()) <= set(rows.tolist())
        assert len(out.rows) == min(k, len(rows))
        # ordered by score desc, ties by id
        keys = [(-s, f.ids[r]) for s, r in zip(out.scores.tolist(), out.rows.tolist(), strict=True)]
        assert keys == sorted(keys)
        # and they are the top k of the whole pool under the model (recomputed here)
        raw = m.raw_scores(features(f, rows, _member, m.params))
        sc = np.round(1 / (1 + np.exp(-raw)), cfg.round_decimals)
        expect = sorted(zip(rows.tolist(), sc.tolist(), strict=True), key=lambda t: (-t[1], f.ids[t[0]]))[:k]
        assert out.rows.tolist() == [r for r, _ in expect]


# --------------------------------------------------------------------------- CV and end to end


def test_cv_folds_are_grouped():
    """The study's within-dataset folds: one group out, by the tune/heldout split when the
    bench has one, never a group on both sides."""
    from memofs_eval.inputs.folds import check_grouped
    from memofs_eval.studies.learned_bench import Bench
    from memofs_eval.studies.learned_lodo import Lab

    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(30)]
    group = {q: f"g{i % 4}" for i, q in enumerate(qids)}
    for by_split in (False, True):
        split = {q: ("tune" if i % 3 else "heldout") if by_split else None for i, q in enumerate(qids)}
        bench = Bench("t", {q: random_frame(rng, 5) for q in qids}, {q: {"m000": 1} for q in qids}, {q: "c" for q in qids}, group, split)
        fs = Lab({"t": bench}).grouped_folds("t")
        assert len(fs) == 4
        check_grouped(group, fs)
        for g, tr, te in fs:
            assert {group[q] for q in te} == {g} and g not in {group[q] for q in tr}
            if by_split:
                assert all(split[q] == "heldout" for q in te) and all(split[q] == "tune" for q in tr)
        # every query is tested exactly once (per split rule)
        tested = [q for _, _, te in fs for q in te]
        assert len(tested) == len(set(tested))
        assert sorted(tested) == sorted(q for q in qids if split[q] in (None, "heldout"))
    bad = [("g0", ["q0", "q1"], ["q4"])]  # q0 and q4 are both in g0
    with pytest.raises(AssertionError, match="groups in train and test"):
        check_grouped(group, bad)


def test_tiny_end_to_end(tmp_path):
    """Lexical-only frames of datasets/tiny: train on tune, recall heldout online."""
    from memofs.ranking.recall import Recaller
    from memofs_datasets.format import load_dataset
    from memofs_eval.studies.learned_bench import Bench, dataset_ref, frames_for
    from memofs_eval.studies.learned_training import query_block, train
    from memofs_eval.inputs.data import EvalData

    ds = load_dataset(REPO / "datasets" / "tiny")
    data = EvalData(dataset_ref("tiny"), ds)
    frames = frames_for(data, embedder="none", root=tmp_path)
    bench = Bench("tiny", frames, data.qrels, data.category, data.group, data.split)
    tune = [q for q in bench.qids if bench.split[q] == "tune"]
    cfg = RecallConfig()
    params = FeatureParams.from_config(cfg)
    model = train([query_block(q, bench.frames[q], bench.qrels.get(q, {}), cfg, params) for q in tune])
    path = model.save(tmp_path / "tiny.json")
    lcfg = RecallConfig(fusion="learned", learned_model=str(path))
    q = next(q for q in ds.queries if q.split == "heldout" and q.id in frames)
    from memofs.graph.entity_graph import EntityGraph

    rec = Recaller(lcfg, graph=EntityGraph(*ds.graph_for(q.scope)))  # the harness's frames see the graph too
    rec.add(ds.corpus_for(q))
    got = rec.recall(q.text, task_type=q.task_type, now=ds.now_for(q), explain=True)
    f = rec.signals(q.text, task_type=q.task_type, now=ds.now_for(q))
    rows, *_ = pools(f, cfg, cfg.top_k)
    assert {r.id for r in got} <= {f.ids[i] for i in rows.tolist()}
    assert all(0.0 < r.score < 1.0 for r in got)
    assert got[0].explain["components"]["base"] is None  # formula-only parts are absent
    # online recall and the harness's cached frame rank the same way
    cached = fuse(frames[q.id], lcfg)
    assert [r.id for r in got] == [frames[q.id].ids[i] for i in cached.rows.tolist()]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "memofs" / "ranking" / "models").glob("learned-*.json")) or ["<none>"])
def test_shipped_models_load(name):
    """Every shipped model file (not the profile files beside them) loads and records how it
    was trained: the pairwise model its data hash, LambdaMART its LightGBM version and rounds."""
    if name == "<none>":
        pytest.skip("no shipped model yet")
    m = load_model(REPO / "memofs" / "ranking" / "models" / name)
    assert m.cv
    if isinstance(m, LambdaMartModel):
        assert m.training.get("lightgbm") and m.training.get("rounds") and m.training.get("queries")
    else:
        assert m.training.get("data_sha256_16")


def test_time_scan_matches_time_mention():
    """context_columns' faster scan finds exactly what TIME_MENTION finds: every character
    that can start a match (any case fold, e.g. U+017F for "s", U+212A for "k") passes its
    lookahead, and the two agree on texts made of each alternative in several spellings."""
    import re
    import sys

    from memofs.signals.frame import _TIME_SCAN, TIME_MENTION

    firsts = re.compile("y|t|a|r|w|l|n|j|f|m|s|o|d|1|2", re.I)
    look = re.compile(_TIME_SCAN.pattern[3:_TIME_SCAN.pattern.index("]") + 1], re.I)
    assert all(bool(firsts.fullmatch(c)) == bool(look.fullmatch(c)) for c in map(chr, range(sys.maxunicode + 1)))
    words = ["yesterday", "today", "tonight", "tomorrow", "ago", "recently", "weekend", "last  night", "last\tsummer",
             "next week", "this morning", "1999", "2024", "2100", "1899", "january", "may", "sunday", "August",
             "SEPTEMBER", "ſunday", "\u212aweekend", "weeKend", "yeſterday", "lastweek", "agony", "_today", "x2020",
             "20201", "ⅿay", "ｍay", "İago", "DECEMBER.", "monday's", "élast week", "9may", "a ago"]
    texts = words + [f"{a} and {b}" for a in words for b in words[::7]] + ["", "no date here", "last", "next"]
    for t in texts:
        m1, m2 = TIME_MENTION.search(t), _TIME_SCAN.search(t)
        assert (m1 and m1.span()) == (m2 and m2.span()), t


def test_lazy_text_context_equals_eager():
    """Recall's context computes word counts and time mentions only for the rows it reads; the
    values, read by rows or whole, are the eager columns'."""
    ids = [f"m{i}" for i in range(6)]
    texts = ["fine, thanks", "how was the race?", "I ran a charity race last weekend", "hi", "", "see you in May 2024"]
    ts = np.full(6, 86400.0)
    eager = context_columns(ids, ["c"] * 6, ts, texts)
    lazy = context_columns(ids, ["c"] * 6, ts, texts, lazy_text=True)
    n_words, has_time = lazy.text_facts(np.array([5, 2, 2]))
    assert n_words.tolist() == eager.n_words[[5, 2, 2]].tolist() and has_time.tolist() == [True, True, True]
    assert lazy._known.tolist() == [False, False, True, False, False, True]
    sub, esub = lazy.take(np.array([0, 1, 5]), 6), eager.take(np.array([0, 1, 5]), 6)
    for c in ("prev_row", "next_row", "session", "n_words", "is_question", "has_time"):
        assert getattr(lazy, c).tolist() == getattr(eager, c).tolist()
        assert getattr(sub, c).tolist() == getattr(esub, c).tolist()
