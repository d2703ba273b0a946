"""The briefing and temporal measures against hand-built rankings with answers worked out
from the documented briefing layout and the measures' definitions."""

from __future__ import annotations

import hashlib
import math
from datetime import timedelta

import pytest

from memofs.store.briefing import DIRECTIVE, DIRECTIVE_TITLE
from memofs.ranking.config import DEFAULT_KIND_EXPIRY_DAYS as KIND_EXPIRY_DAYS, RecallConfig
from memofs_datasets.format import bundled_datasets, load_dataset
from memofs_eval.scoring import measures as MS
from memofs_eval.scoring.measures import QueryFacts

# the documented layout: "## <title>\n\n<body>" sections joined by "\n\n";
# a recall item is "<n>. <text>\n score: <score:.4f>", items joined by "\n\n"
HEAD = f"## {DIRECTIVE_TITLE}\n\n{DIRECTIVE}\n\n## Relevant Recall\n\n"


def b(s: str) -> int:
    return len(s.encode("utf-8"))


def item(n: int, text: str, score: float) -> str:
    return f"{n}. {text}\n score: {score:.4f}"


def full_briefing(texts: list[str]) -> str:
    n = len(texts)
    return HEAD + "\n\n".join(item(i + 1, t, (n - i) / n) for i, t in enumerate(texts))


TEXTS = {"a": "alpha fact about the deploy pipeline", "b": "beta fact: ports 8080 and 8443",
         "c": "gamma fact, unrelated", "d": "delta fact about caches"}


def facts(qrels: dict[str, int], **kw) -> QueryFacts:
    return QueryFacts(qrels=qrels, texts=kw.pop("texts", TEXTS), **kw)


# --------------------------------------------------------------------------- briefing


def test_everything_fits_offsets_follow_the_layout():
    ranked = ["c", "a", "d", "b"]
    f = facts({"a": 2, "b": 1, "c": 0})
    view = MS.briefing(ranked, TEXTS, 8192)
    assert view.text == full_briefing([TEXTS[d] for d in ranked])
    # the first relevant memory is "a" at rank 2: head + item 1 + separator + "2. "
    expected = b(HEAD) + b(item(1, TEXTS["c"], 1.0)) + 2 + b("2. ")
    assert MS.bytes_to_first_relevant(view, f) == expected
    assert MS.briefing_recall(view, f) == 1.0
    assert MS.briefing_hit(view, f) == 1.0
    assert view.shown == tuple(ranked)


def test_no_relevant_memory_in_the_store():
    f = facts({"zzz": 3, "c": 0})  # judged relevant, but not a memory of the ranking
    view = MS.briefing(["a", "b", "c"], TEXTS, 4096)
    assert MS.briefing_recall(view, f) == 0.0
    assert MS.briefing_hit(view, f) == 0.0
    assert MS.bytes_to_first_relevant(view, f) == 4096.0  # the budget as the penalty
    none = facts({"c": 0})  # nothing relevant at all
    assert MS.briefing_recall(view, none) == 0.0
    assert math.isnan(MS.current_first(["a"], none))
    assert math.isnan(MS.stale_in_top_k(["a"], none, 2))
    empty = MS.briefing([], TEXTS, 4096)
    assert empty.text == f"## {DIRECTIVE_TITLE}\n\n{DIRECTIVE}" and MS.briefing_hit(empty, f) == 0.0


def test_relevant_memory_larger_than_the_budget():
    texts = {**TEXTS, "huge": "x" * 5000}
    f = facts({"huge": 3, "a": 1}, texts=texts)
    # rank 1 cannot fit: the packer takes items greedily in rank order and stops there,
    # so the small relevant memory behind it is not shown either
    view = MS.briefing(["huge", "a"], texts, 2048)
    assert b(view.text) <= 2048
    assert view.shown == ()
    assert (MS.briefing_recall(view, f), MS.briefing_hit(view, f), MS.bytes_to_first_relevant(view, f)) == (0.0, 0.0, 2048.0)
    # behind a small one it only costs its own recall
    view = MS.briefing(["a", "huge"], texts, 2048)
    assert view.shown == ("a",)
    assert MS.briefing_recall(view, f) == 0.5
    assert MS.bytes_to_first_relevant(view, f) == b(HEAD) + b("1. ")
    # with a budget that holds it, it is whole
    view = MS.briefing(["a", "huge"], texts, 8192)
    assert MS.briefing_recall(view, f) == 1.0


def _padded(prefix: str, budget: int, first: str) -> str:
    """A last memory text such that the full two-item briefing is exactly ``budget`` bytes."""
    base = full_briefing([first, prefix])
    return prefix + "x" * (budget - b(base))


@pytest.mark.parametrize("mb", ["é", "漢", "🙂"])
def test_multibyte_text_at_the_cut(mb):
    first = f"{mb * 10} first memory"
    budget = 2048
    last = _padded(mb * 200, budget, first)  # many multi-byte characters
    texts = {"p": first, "q": last}
    f = facts({"q": 2}, texts=texts)
    exact = MS.briefing(["p", "q"], texts, budget)
    assert b(exact.text) == budget and exact.shown == ("p", "q")
    assert MS.briefing_recall(exact, f) == 1.0
    # offsets count bytes, not characters: the first memory's multi-byte prefix shifts it
    assert MS.bytes_to_first_relevant(exact, f) == b(HEAD) + b(item(1, first, 1.0)) + 2 + b("2. ")
    assert MS.bytes_to_first_relevant(exact, f) > len(HEAD + item(1, first, 1.0)) + 2 + 3
    # one byte less: the last memory is no longer whole, though its characters would fit
    short = MS.briefing(["p", "q"], texts, budget - 1)
    assert len(full_briefing([first, last])) <= budget - 1 < b(full_briefing([first, last]))
    assert b(short.text) <= budget - 1
    assert "q" not in short.offsets
    assert MS.briefing_recall(short, f) == 0.0 and MS.bytes_to_first_relevant(short, f) == budget - 1
    short.text.encode("utf-8").decode("utf-8")  # whole characters only


def test_hidden_items_leave_room_for_the_expansion_footer():
    texts = {f"m{i}": f"memory number {i} " + "y" * 300 for i in range(12)}
    view = MS.briefing(list(texts), texts, 2048)
    assert b(view.text) <= 2048
    assert 0 < len(view.shown) < 12
    assert view.text.splitlines()[-1].startswith(f"↳ expand ({12 - len(view.shown)} more): memofs.context(section=\"recall\"")
    # every item shown whole is in the text, in rank order, at its offset
    raw = view.text.encode("utf-8")
    for d, off in view.offsets.items():
        assert raw[off:off + b(texts[d])].decode() == texts[d]


def test_measure_names():
    assert MS.parse("ndcg@10") is None
    assert MS.parse("briefing_recall") == MS.Measure("briefing_recall", 8192)
    assert MS.parse("briefing_hit@4096").param == 4096
    assert MS.parse("stale_in_top_k").param == 10
    assert MS.parse("current_first") == MS.Measure("current_first", None)
    for bad in ("briefing_recall@100", "current_first@3", "stale_in_top_k@0"):
        with pytest.raises(ValueError):
            MS.parse(bad)
    assert MS.lower_is_better("bytes_to_first_relevant@2048") and not MS.lower_is_better("briefing_recall")


# --------------------------------------------------------------------------- temporal

CHAIN = {"A": ["B"], "B": ["C"]}  # B supersedes A, C supersedes B: C is current


def chain_facts(qrels: dict[str, int]) -> QueryFacts:
    ends = MS.current_ends(CHAIN)
    pairs = tuple(sorted((o, c) for o, cs in ends.items() for c in cs))
    return QueryFacts(qrels=qrels, superseded=frozenset(CHAIN), pairs=pairs)


def test_current_ends_follow_chains_and_stop_at_cycles():
    assert MS.current_ends(CHAIN) == {"A": frozenset("C"), "B": frozenset("C")}
    assert MS.current_ends({"A": ["B", "D"], "B": ["C"]})["A"] == frozenset("CD")
    assert MS.current_ends({"A": ["B"], "B": ["A"]}) == {"A": frozenset(), "B": frozenset()}


@pytest.mark.parametrize("ranked,qrels,expected", [
    (["C", "A", "B"], {"C": 3, "A": 1}, 0.0),       # current first
    (["A", "C"], {"C": 3}, 1.0),                     # old above its replacement
    (["x", "B", "y", "C"], {"C": 3}, 1.0),           # B (superseded by C) above C
    (["B"], {"C": 3}, 1.0),                          # C judged but missing: ranks after all
    (["C"], {"A": 1}, 0.0),                          # A judged, C ranked, A missing
    (["x", "y"], {"C": 3}, math.nan),                # only C in play: no pair
    (["A"], {"x": 1}, math.nan),                     # C neither ranked nor judged
    (["x"], {"A": 1, "C": 3}, 0.0),                  # both judged, neither ranked: no failure
])
def test_superseded_above_current(ranked, qrels, expected):
    got = MS.superseded_above_current(ranked, chain_facts(qrels))
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_stale_in_top_k():
    f = QueryFacts(qrels={"fresh": 3, "s": 2}, stale=frozenset({"s"}), expired=frozenset({"e"}))
    assert MS.stale_in_top_k(["s", "e", "fresh", "x"], f, 4) == 0.5
    assert MS.stale_in_top_k(["s", "e", "fresh", "x"], f, 10) == 0.2  # empty slots are not stale
    assert MS.stale_in_top_k(["fresh", "x", "s", "e"], f, 2) == 0.0
    only_outdated = QueryFacts(qrels={"s": 3, "e": 1}, stale=frozenset({"s"}), expired=frozenset({"e"}))
    assert math.isnan(MS.stale_in_top_k(["s"], only_outdated, 3))


def test_current_first():
    f = QueryFacts(qrels={"new": 3, "old": 1, "st": 1, "x": 0}, superseded=frozenset({"old"}), stale=frozenset({"st"}))
    assert MS.current_first(["x", "new", "old"], f) == 1.0
    assert MS.current_first(["old", "new"], f) == 0.0
    assert MS.current_first(["st", "new"], f) == 0.0
    assert MS.current_first(["x"], f) == 0.0  # nothing relevant shown
    all_current = QueryFacts(qrels={"new": 3})
    assert math.isnan(MS.current_first(["new"], all_current))
    expired = QueryFacts(qrels={"new": 3, "e": 2}, expired=frozenset({"e"}))
    assert MS.current_first(["e", "new"], expired) == 0.0


# --------------------------------------------------------------------------- dataset facts


@pytest.fixture(scope="module")
def tiny():
    return load_dataset(bundled_datasets()["tiny"])


def test_build_facts_against_a_naive_reading_of_the_dataset(tiny):
    f = MS.build_facts(tiny, RecallConfig().kind_expiry_days)
    # the spec's floors ("decisions last 365 days, constraints 180, preferences 90, notes 30")
    assert dict(RecallConfig().kind_expiry_days) == {"decision": 365, "constraint": 180, "preference": 90, "note": 30}
    stale = set()
    for m in tiny.memories:
        for a in m.anchors:
            p = tiny.anchor_root(m.namespace) / a.path
            if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != a.sha256:
                stale.add(m.id)
    assert f.stale == stale and stale  # tiny has drifted anchors
    superseded = {s for m in tiny.memories for s in m.supersedes}
    assert f.superseded == superseded
    for q in tiny.queries:
        now = tiny.now_for(q)
        want = {m.id for m in tiny.corpus_for(q) if m.created_at is not None and m.kind in KIND_EXPIRY_DAYS
                and now - m.created_at > timedelta(days=KIND_EXPIRY_DAYS[m.kind])}
        assert f.expired[q.id] == want, q.id
        qf = f.query(q.id, tiny.qrels[q.id])
        for old, cur in qf.pairs:
            assert old in superseded and cur not in superseded


def test_per_query_puts_measures_next_to_ranx(tiny):
    f = MS.build_facts(tiny, RecallConfig().kind_expiry_days)
    judged = {q.id: dict(tiny.qrels[q.id]) for q in tiny.queries if tiny.relevant(q.id)}
    ideal = {q: sorted(j, key=lambda d: (-j[d], d)) for q, j in judged.items()}
    names = ["ndcg@10", "briefing_recall", "briefing_hit@2048", "bytes_to_first_relevant@2048", "current_first",
             "superseded_above_current", "stale_in_top_k@5"]
    df = MS.per_query(f, judged, ideal, names)
    assert list(df.columns) == names and set(df.index) == set(judged)
    assert (df["ndcg@10"] == 1.0).all()
    assert (df["briefing_recall"] == 1.0).all()  # tiny memories are short: the judged list fits
    assert (df["briefing_hit@2048"] == 1.0).all()
    assert (df["bytes_to_first_relevant@2048"] == b(HEAD) + 3).all()  # "1. " of the top item
    only = MS.per_query(f, judged, ideal, ["current_first"])
    assert only["current_first"].equals(df["current_first"])
    with pytest.raises(ValueError, match="facts"):
        MS.per_query(None, judged, ideal, ["briefing_hit"])


def test_spec_accepts_measures_and_names_the_line_of_a_bad_one(tmp_path):
    from memofs_eval.inputs.spec import SpecError, load_spec

    ok = tmp_path / "ok.toml"
    ok.write_text('metrics = ["ndcg@10", "briefing_recall@4096", "current_first"]\n[[datasets]]\nname = "tiny"\n')
    assert load_spec(ok).metrics == ("ndcg@10", "briefing_recall@4096", "current_first")
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nmetrics = ["ndcg@10", "briefing_recall@100"]\n[[datasets]]\nname = "tiny"\n')
    with pytest.raises(SpecError, match=r"bad\.toml:2: metrics: briefing_recall@100: budget"):
        load_spec(bad)
