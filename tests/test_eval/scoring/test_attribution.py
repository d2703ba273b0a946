"""Attribution of fused scores to signals: terms computed by hand from the fusion formula,
their sum equals the final score, carriers and rescues on hand-built frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.ranking.config import RecallConfig
from memofs.ranking.fusion import fuse
from memofs.ranking.recall import explain_row
from memofs.signals.frame import SignalFrame, kind_code
from memofs_eval.scoring import attribution as A

NAN = float("nan")


def frame(rows: list[dict], vector_ok: bool = True, rerank_ok: bool = True) -> SignalFrame:
    def col(name: str, default: float) -> np.ndarray:
        return np.array([r.get(name, default) for r in rows], dtype=np.float64)

    return SignalFrame(
        ids=tuple(r["id"] for r in rows), order_key=np.arange(len(rows), dtype=np.int64),
        bm25=col("bm25", 0.0), fuzzy=col("fuzzy", 0.0), cosine=col("cos", NAN), rerank=col("rerank", NAN),
        age_days=col("age", NAN), confidence=col("conf", NAN),
        kind=np.array([kind_code(r.get("kind", "note")) for r in rows], dtype=np.int64),
        stale=np.array([r.get("stale", False) for r in rows]), is_graph=np.zeros(len(rows), dtype=bool),
        vector_ok=vector_ok, rerank_ok=rerank_ok,
    )


ROWS = [
    {"id": "v", "cos": 0.9, "rerank": 0.2, "age": 10.0, "conf": 0.8, "kind": "decision"},          # vector only
    {"id": "l", "bm25": 6.0, "fuzzy": 0.4, "rerank": 0.7, "age": 400.0, "kind": "decision"},       # lexical only, expired
    {"id": "both", "cos": 0.5, "bm25": 2.0, "fuzzy": 1.0, "rerank": 0.1, "stale": True, "conf": 0.3},
    {"id": "weak", "cos": 0.1, "bm25": 0.5, "rerank": 0.0, "age": 1.0},
]


def test_terms_match_a_hand_computation():
    cfg = RecallConfig()
    fr = frame(ROWS)
    fused = fuse(fr, cfg, 4)
    terms = A.attribute(fused, cfg)
    ids = fused.ids(fr)
    # by hand, defaults: w_vec .6, w_lex .4, blend .5, w_rel .7, w_rec .2, w_conf .1,
    # saturation c = 2, fuzzy_boost .15, half-life 30 d, default confidence .5
    pos = ids.index("both")
    lexical = 2.0 + 0.15 * 1.0
    sat = lexical / (lexical + 2.0)
    assert terms["vector"][pos] == pytest.approx(0.7 * 0.5 * 0.6 * 0.5)
    assert terms["bm25"][pos] == pytest.approx(0.7 * 0.5 * 0.4 * sat * 2.0 / lexical)
    assert terms["fuzzy"][pos] == pytest.approx(0.7 * 0.5 * 0.4 * sat * 0.15 / lexical)
    assert terms["rerank"][pos] == pytest.approx(0.7 * 0.5 * 0.1)
    assert terms["recency"][pos] == pytest.approx(0.2 * 0.5)  # no age: recency 0.5
    assert terms["confidence"][pos] == pytest.approx(0.1 * 0.3)
    composite = sum(terms[t][pos] for t in A.SIGNALS)
    assert terms["penalty"][pos] == pytest.approx(composite * (0.5 - 1.0))  # stale anchor
    pos = ids.index("l")
    assert terms["vector"][pos] == 0.0  # no vector: clamp01(NaN) = 0
    composite = sum(terms[t][pos] for t in A.SIGNALS)
    assert terms["penalty"][pos] == pytest.approx(composite * (0.6 - 1.0))  # expired decision
    assert terms["confidence"][pos] == pytest.approx(0.1 * 0.5)  # default confidence


def _check_sum(fr: SignalFrame, cfg: RecallConfig, k: int = 10) -> None:
    fused = fuse(fr, cfg, k)
    terms = A.attribute(fused, cfg)
    total = sum(terms[t] for t in A.TERMS)
    parts = fused.parts
    np.testing.assert_allclose(total, parts["composite"] * parts["penalty"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(terms["total"], total, rtol=0, atol=1e-12)
    assert np.all(np.abs(total - fused.scores) <= 0.5 * 10 ** -cfg.round_decimals + 1e-12)
    for pos in range(len(fused.rows)):  # the explain output reports the same numbers
        ex = explain_row(fr, fused, pos)
        assert ex["components"]["final"] == pytest.approx(total[pos], abs=0.5 * 10 ** -cfg.round_decimals + 1e-12)
        assert ex["pools"] == {"vector": bool(parts["vector_pool"][pos]), "lexical": bool(parts["lexical_pool"][pos])}


@pytest.mark.parametrize("changes", [
    {}, {"use_reranker": False}, {"use_fuzzy": False}, {"use_bm25": False}, {"use_vector": False},
    {"w_vec": 1.0}, {"use_drift": False, "use_decay": False}, {"rerank_blend": 0.9, "fuzzy_boost": 2.0},
])
def test_terms_sum_to_the_final_score(changes):
    _check_sum(frame(ROWS), RecallConfig().replace(**changes))


row = st.fixed_dictionaries({
    "cos": st.one_of(st.just(NAN), st.floats(-1, 1)), "bm25": st.floats(0, 30), "fuzzy": st.floats(0, 1),
    "rerank": st.one_of(st.just(NAN), st.floats(0, 1)), "age": st.one_of(st.just(NAN), st.floats(0, 2000)),
    "conf": st.one_of(st.just(NAN), st.floats(0, 1)), "stale": st.booleans(),
    "kind": st.sampled_from(["decision", "note", "preference", "goal"]),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(row, min_size=1, max_size=12), st.floats(0, 1), st.floats(0, 1), st.booleans())
def test_terms_sum_to_the_final_score_on_random_frames(rows, w_vec, blend, rerank_ok):
    rows = [{"id": f"d{i:02d}", **r} for i, r in enumerate(rows)]
    _check_sum(frame(rows, rerank_ok=rerank_ok), RecallConfig().replace(w_vec=w_vec, rerank_blend=blend), k=5)


def test_an_unscored_candidate_keeps_its_whole_base():
    # a model reranker scores only the pool's top N; the others (rerank NaN) fold to identity
    fr = frame([{"id": "a", "bm25": 0.0, "fuzzy": 1.0, "rerank": NAN, "kind": "decision"}])
    cfg = RecallConfig().replace(w_vec=0.0, rerank_blend=1.0)
    terms = A.attribute(fuse(fr, cfg, 1), cfg)
    # by hand: lexical = .15 * 1 = .15, saturated .15 / 2.15; w_lex 1, keep 1, w_rel .7
    assert terms["fuzzy"][0] == pytest.approx(0.7 * 0.15 / 2.15)
    assert terms["rerank"][0] == 0.0
    _check_sum(fr, cfg, k=1)


def test_carriers_and_rescues():
    cfg = RecallConfig()
    fr = frame(ROWS)
    rows = {r["doc"]: r for r in A.hits(fr, fuse(fr, cfg, 4), cfg, {"v": 2, "l": 1, "both": 3}, 4)}
    assert rows["v"]["carrier"] == "vector" and rows["v"]["rescue"] == "vector"
    # "l" by hand: rerank .7 * .5 * .7 = .245 > bm25 .7 * .5 * .4 * (6.06 / 8.06) * (6 / 6.06) = .104
    assert rows["l"]["carrier"] == "rerank" and rows["l"]["rescue"] == "lexical"
    no_rerank = cfg.replace(use_reranker=False)
    assert {r["doc"]: r for r in A.hits(fr, fuse(fr, no_rerank, 4), no_rerank, {}, 4)}["l"]["carrier"] == "bm25"
    assert rows["both"]["rescue"] == ""
    # largest positive term, by hand for "both": vector .105, bm25 .063, rerank .035, recency .1
    assert rows["both"]["carrier"] == "vector"
    assert rows["weak"]["grade"] == 0
    assert A.carrier({s: 0.0 for s in A.SIGNALS}) == "none"
    assert A.carrier({**{s: 0.1 for s in A.SIGNALS}, "recency": 0.3}) == "recency"


def test_summary_shares_and_rescues():
    tab = pd.DataFrame([
        {"query": "q1", "category": "x", "grade": 2, "carrier": "vector", "rescue": "vector"},
        {"query": "q1", "category": "x", "grade": 0, "carrier": "bm25", "rescue": "lexical"},  # not relevant
        {"query": "q2", "category": "y", "grade": 1, "carrier": "bm25", "rescue": "lexical"},
        {"query": "q3", "category": "y", "grade": 3, "carrier": "bm25", "rescue": ""},
        {"query": "q4", "category": "y", "grade": 3, "carrier": "recency", "rescue": ""},
    ])
    s = A.summary(tab).set_index("category")
    assert s.loc["all", "relevant_hits"] == 4
    assert s.loc["all", "carried_bm25"] == 0.5 and s.loc["all", "carried_vector"] == 0.25
    assert s.loc["y", "carried_recency"] == pytest.approx(1 / 3)
    assert (s.loc["all", "rescued_vector"], s.loc["all", "rescued_lexical"]) == (1, 1)
    only = A.summary(tab, ["q1"]).set_index("category")
    assert list(only.index) == ["all", "x"] and only.loc["all", "relevant_hits"] == 1
    assert math.isnan(A.summary(tab, ["none"]).set_index("category").loc["all", "carried_vector"])


def test_learned_fusion_is_refused():
    cfg = RecallConfig()
    fused = fuse(frame(ROWS), cfg, 4)
    with pytest.raises(ValueError, match="formula"):
        A.attribute(fused, cfg.replace(fusion="learned", learned_model="x"))
