"""Training the learned fusion (``memofs_eval.studies.learned_training``): a query's block, the
pairwise logistic ranker and LambdaMART, each against a ranker planted in synthetic data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memofs.ranking.config import RecallConfig
from memofs.ranking.learned import FEATURES, FeatureParams, ModelFileError, feature_set, load_model, model_from_json
from memofs_eval.studies.learned_training import Block, query_block, train, train_lambdamart
from support import frame


def _blocks(rng: np.random.Generator, n_queries: int = 12, n: int = 30) -> list[Block]:
    """Synthetic candidates whose relevance is ``lexical_norm > 0.8`` (a known ground truth)."""
    out = []
    for i in range(n_queries):
        X = rng.uniform(0, 1, size=(n, len(FEATURES)))
        y = (X[:, FEATURES.index("lexical_norm")] > 0.8).astype(float)
        out.append(Block(f"q{i}", np.arange(n), {"vector_pool": np.ones(n, bool), "lexical_pool": np.ones(n, bool)}, X, y))
    return out


def test_query_block_is_the_pools_with_their_judgements():
    """Candidates are the reference pools (a memory in neither pool is not one), labelled by
    the judgements, 0 where unjudged; one feature row per candidate."""
    rows = [{"id": "a", "bm25": 3.0, "cos": 0.9}, {"id": "b", "bm25": 1.0, "cos": 0.2}, {"id": "c", "bm25": 0.0, "cos": 0.5},
            {"id": "d", "bm25": 0.0, "cos": 0.1}]
    cfg = RecallConfig(use_fuzzy=False, top_k=1)  # pools: top 3 by cosine (a, c, b), top 2 by lexical (a, b)
    b = query_block("q", frame(rows, query="x"), {"b": 2, "c": 1, "d": 1}, cfg, FeatureParams.from_config(cfg))
    ids = [("a", "b", "c", "d")[r] for r in b.rows.tolist()]
    assert sorted(ids) == ["a", "b", "c"]  # d, judged relevant, is in neither pool
    assert dict(zip(ids, b.y.tolist(), strict=True)) == {"a": 0.0, "b": 2.0, "c": 1.0}
    assert b.X.shape == (3, len(FEATURES)) and b.qid == "q"


def test_pairwise_training_recovers_a_planted_ranker():
    """Relevance planted as 'highest cosine_norm wins': the model must rank by it."""
    rng = np.random.default_rng(5)
    blocks = []
    j = FEATURES.index("cosine_norm")
    for qi in range(40):
        X = rng.normal(size=(12, len(FEATURES)))
        y = np.zeros(12)
        y[np.argmax(X[:, j])] = 1
        blocks.append(Block(f"q{qi}", np.arange(12), {}, X, y))
    m = train(blocks)
    assert int(np.argmax(np.abs(m.coef))) == j and m.coef[j] > 0
    assert m.training["pairs"] == 40 * 11 and len(m.training["data_sha256_16"]) == 16


def test_lambdamart_file_round_trip_and_errors(tmp_path):
    rng = np.random.default_rng(0)
    bl = _blocks(rng)
    names = feature_set("portable")
    m = train_lambdamart(bl, names, FeatureParams(), [1.0] * len(bl))
    path = m.save(tmp_path / "lm.json")
    doc = json.loads(path.read_text())
    assert doc["model"] == "lambdamart" and doc["lightgbm_model"].startswith("tree")
    back = load_model(path)
    X = bl[0].X[:, [FEATURES.index(f) for f in names]]
    np.testing.assert_array_equal(back.raw_scores(X), m.raw_scores(X))
    # the model learned the ground truth: relevant candidates (lexical_norm > 0.8) score above the rest
    s = back.raw_scores(X)
    assert s[bl[0].y == 1].min() > s[bl[0].y == 0].max()
    # deterministic: same data, same trees
    assert train_lambdamart(bl, names, FeatureParams(), [1.0] * len(bl)).booster_text == m.booster_text
    bad = dict(doc, lightgbm_model="not a model")
    with pytest.raises(ModelFileError, match="lightgbm_model"):
        model_from_json(bad, "x.json")
    bad = dict(doc, training_range={"features": {names[0]: [1.0, 0.0]}})
    with pytest.raises(ModelFileError, match=f"training_range.features.{names[0]}"):
        model_from_json(bad, "x.json")
