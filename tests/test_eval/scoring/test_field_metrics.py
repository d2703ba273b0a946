"""The field's metrics (LongMemEval's recall_any/recall_all/ndcg_any, turn and session level)
on hand-made runs with hand-computed values, and against a transcription of LongMemEval's
published definitions (``src/retrieval/eval_utils.py``: recall over the top k, binary DCG
``g_1 + sum g_i / log2(i)``, turn2session widening k until k distinct sessions are in)."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs_eval.scoring import measures as MS


def _facts(qrels: dict[str, int], session: dict[str, str] | None = None) -> MS.QueryFacts:
    return MS.QueryFacts(qrels, session=session or {})


def _val(name: str, ranked: list[str], facts: MS.QueryFacts) -> float:
    m = MS.parse(name)
    return MS.measure_values(ranked, facts, [m])[m]


def test_hand_computed_turn_level() -> None:
    f = _facts({"a": 1, "b": 1, "z": 0})
    ranked = ["a", "x", "b", "y"]
    assert _val("recall_any@1", ranked, f) == 1.0
    assert _val("recall_all@1", ranked, f) == 0.0 and _val("recall_all@3", ranked, f) == 1.0
    # DCG@3 = 1 + 1/log2(3); ideal DCG (two relevant) = 1 + 1/log2(2) = 2
    assert _val("ndcg_any@3", ranked, f) == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert _val("ndcg_any@1", ranked, f) == 1.0
    assert _val("recall_any@10", ["x", "y"], f) == 0.0 and _val("ndcg_any@10", [], f) == 0.0


def test_ndcg_any_is_longmemevals_gain_not_ranx() -> None:
    """LongMemEval's DCG weighs ranks 1 and 2 alike (1/log2(2) = 1): one relevant memory at
    rank 2 scores 1.0, where ranx's nDCG (1/log2(i+1)) gives 1/log2(3) = 0.63."""
    assert _val("ndcg_any@10", ["x", "a"], _facts({"a": 1})) == 1.0
    assert _val("ndcg_any@10", ["x", "y", "a"], _facts({"a": 1})) == pytest.approx(1 / math.log2(3))


def test_default_cutoff_and_bad_names() -> None:
    assert MS.parse("recall_any") == MS.Measure("recall_any", 10)
    assert MS.parse("session_ndcg_any@5") == MS.Measure("session_ndcg_any", 5)
    with pytest.raises(ValueError):
        MS.parse("recall_all@0")


def test_session_level_hand_made() -> None:
    session = {"s1t0": "s1", "s1t1": "s1", "s2t3": "s2", "s3t0": "s3"}
    f = _facts({"s3t0": 1, "s1t1": 0}, session)
    ranked = ["s1t0", "s2t3", "s1t1", "s3t0"]  # sessions s1, s2, s3 (s1's best turn first)
    assert _val("session_recall_any@2", ranked, f) == 0.0
    assert _val("session_recall_any@3", ranked, f) == 1.0
    assert _val("recall_any@3", ranked, f) == 0.0  # turn level: s3t0 is 4th
    # s3 at session rank 3: DCG = 1/log2(3), ideal = 1
    assert _val("session_ndcg_any@3", ranked, f) == pytest.approx(1 / math.log2(3))
    # two relevant turns of one session lift to one relevant session
    g = _facts({"s1t0": 1, "s1t1": 1}, session)
    assert _val("session_recall_all@1", ["s1t1", "s2t3"], g) == 1.0
    assert _val("recall_all@1", ["s1t1", "s2t3"], g) == 0.0


def _published_turn2session(ranked: list[str], relevant: set[str], session: dict[str, str], k: int) -> tuple[float, float]:
    """LongMemEval's turn2session recall_any/all, transcribed from its definition: map turns
    to sessions, widen the cutoff until k distinct sessions are in (or the list ends)."""
    sess = [session[d] for d in ranked]
    correct = {session[d] for d in relevant}
    eff = k
    while eff <= len(sess) and len(set(sess[:eff])) < k:
        eff += 1
    top = set(sess[:eff])
    return float(any(c in top for c in correct)), float(all(c in top for c in correct))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=15), st.integers(1, 6), st.data())
def test_session_recall_equals_published_turn2session(turn_sessions: list[int], k: int, data) -> None:
    turns = [f"t{i}" for i in range(len(turn_sessions))]
    session = {t: f"s{s}" for t, s in zip(turns, turn_sessions)}
    ranked = data.draw(st.permutations(turns))
    relevant = set(data.draw(st.lists(st.sampled_from(turns), min_size=1, max_size=4)))
    f = _facts({d: 1 for d in relevant}, session)
    want_any, want_all = _published_turn2session(list(ranked), relevant, session, k)
    assert _val(f"session_recall_any@{k}", list(ranked), f) == want_any
    assert _val(f"session_recall_all@{k}", list(ranked), f) == want_all


@settings(max_examples=150, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=20), st.integers(1, 25))
def test_turn_metrics_equal_published_definition(rels: list[bool], k: int) -> None:
    """A naive transcription of LongMemEval's ``evaluate_retrieval`` over positional relevances."""
    ranked = [f"d{i}" for i in range(len(rels))]
    relevant = {d for d, r in zip(ranked, rels) if r}
    f = _facts({d: 1 for d in relevant})

    def dcg(gains: list[float]) -> float:
        return sum(g if i == 0 else g / math.log2(i + 1) for i, g in enumerate(gains[:k]))

    ideal = dcg(sorted((float(r) for r in rels), reverse=True))
    want_ndcg = dcg([float(r) for r in rels]) / ideal if ideal else 0.0
    top = set(ranked[:k])
    assert _val(f"recall_any@{k}", ranked, f) == float(any(d in top for d in relevant))
    assert _val(f"recall_all@{k}", ranked, f) == float(all(d in top for d in relevant)) * float(bool(relevant))
    assert _val(f"ndcg_any@{k}", ranked, f) == pytest.approx(want_ndcg)


def test_trivial_queries_when_k_covers_the_scope() -> None:
    facts = MS.Facts(texts={}, superseded=frozenset(), current_of={}, stale=frozenset(), expired={},
                     corpus={"small": frozenset({"a", "b", "c"}), "big": frozenset(f"m{i}" for i in range(20))},
                     session=MappingProxyType({"a": "s1", "b": "s1", "c": "s2"}))
    assert MS.trivial_queries(facts, "recall_any@3", ["small", "big"]) == ["small"]
    assert MS.trivial_queries(facts, "recall_any@2", ["small", "big"]) == []
    assert MS.trivial_queries(facts, "session_recall_all@2", ["small", "big"]) == ["small"]  # 2 sessions
    assert MS.trivial_queries(facts, "recall@20", ["small", "big"]) == ["small", "big"]  # ranx names too
    assert MS.trivial_queries(facts, "mrr", ["small"]) == []
    assert MS.trivial_queries(facts, "ndcg@10", ["small"]) == []  # not forced to 1 by the cutoff
