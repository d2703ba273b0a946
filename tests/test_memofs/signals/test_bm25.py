"""BM25 + fuzzy against hand computation, a naive reference, and bm25s."""

from __future__ import annotations

from collections import Counter

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.signals.bm25 import BM25Index
from memofs.signals.fuzzy import OverlapIndex, QueryOverlap, VocabularyMatcher, token_overlap
from memofs.ranking.terms import clamp01, saturate
from memofs.text.tokenize import tokenize
from support import naive_fuzzy, naive_scores



@pytest.fixture(scope="module", params=["numba", "numpy"], autouse=True)
def kernels_backend(request):
    """Every test here runs on both kernels (memofs.signals.kernels): the same floats."""
    import os

    old = os.environ.get("MEMOFS_KERNELS")
    os.environ["MEMOFS_KERNELS"] = request.param
    yield request.param
    if old is None:
        os.environ.pop("MEMOFS_KERNELS", None)
    else:
        os.environ["MEMOFS_KERNELS"] = old


DOCS = {"d1": "apple banana apple", "d2": "banana cherry", "d3": "cherry date elderberry fig"}


def _index(**kw) -> BM25Index:
    idx = BM25Index(**kw)
    idx.add_many(DOCS.items())
    return idx


def test_hand_computed_bm25_three_documents():
    # avgdl = (3 + 2 + 4) / 3 = 3
    s = _index(fuzzy_boost=0.0).score("apple cherry")
    got = dict(zip(s.ids, s.dense()[0]))
    idf_apple = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # df = 1
    idf_cherry = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # df = 2
    assert got["d1"] == pytest.approx(idf_apple * (2 * 2.2) / (2 + 1.2 * 1.0), abs=1e-9)
    assert got["d2"] == pytest.approx(idf_cherry * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 3)), abs=1e-9)
    assert got["d3"] == pytest.approx(idf_cherry * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 4 / 3)), abs=1e-9)


def test_hand_computed_fuzzy_and_raw():
    idx = _index()
    s = idx.score(["app", "cherry", "cherry"])  # duplicates count in numerator and denominator
    fz = dict(zip(s.ids, s.dense()[1]))
    assert fz["d1"] == pytest.approx(0.25 / 3, abs=1e-12)  # "app" is inside "apple"
    assert fz["d2"] == pytest.approx(2 / 3, abs=1e-12)
    assert fz["d3"] == pytest.approx(2 / 3, abs=1e-12)
    # the query term containing a document term also earns partial credit
    assert dict(zip(s.ids, idx.score(["figs"]).dense()[1]))["d3"] == pytest.approx(0.25)
    raw = dict(zip(s.ids, s.dense()[2]))
    bm = dict(zip(s.ids, s.dense()[0]))
    for d in DOCS:
        assert raw[d] == pytest.approx(bm[d] + 0.15 * fz[d], abs=1e-12)


def test_empty_query_and_empty_corpus():
    idx = _index()
    s = idx.score("the and of")  # only stop words: no terms
    assert not s.dense()[2].any() and idx.search("the") == []
    empty = BM25Index()
    assert empty.search("apple") == [] and len(empty.score("apple").dense()[2]) == 0


def test_empty_document_scores_zero_and_bad_input():
    idx = _index()
    idx.add("blank", "")
    idx.add("stops", "the of and")
    s = dict(zip(idx.score("apple").ids, idx.score("apple").dense()[2]))
    assert s["blank"] == 0 and s["stops"] == 0
    with pytest.raises(TypeError, match="text must be str"):
        idx.add("x", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="document id"):
        idx.add("", "text")
    with pytest.raises(ValueError, match="b must be"):
        BM25Index(b=1.5)


def test_search_ties_broken_by_id():
    idx = BM25Index()
    idx.add_many([("z", "alpha beta"), ("a", "alpha beta"), ("m", "alpha beta"), ("q", "gamma")])
    assert [d for d, _ in idx.search("alpha")] == ["a", "m", "z"]


def test_fuzzy_token_overlap_definition():
    assert token_overlap([], ["a"]) == 0 and token_overlap(["a"], []) == 0
    assert token_overlap(["auth"], ["authentication"]) == 0.25
    assert token_overlap(["jwt", "jwt"], ["jwt"]) == 1.0


def test_saturate_and_clamp():
    assert saturate(0) == 0 and saturate(-3) == 0
    assert saturate(2.0) == pytest.approx(0.5) and saturate(6.0, c=2.0) == pytest.approx(0.75)
    assert saturate(1.0, c=0.25) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        saturate(1.0, c=0)
    assert list(clamp01([-1, 0.3, 2, np.nan, np.inf])) == [0, 0.3, 1, 0, 0]


# --- property tests against the naive reference --------------------------------------------
WORDS = ["ab", "abc", "b", "bc", "cab", "db", "data", "database", "x", "xy", "auth", "authentication", "d1"]
doc_st = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8)


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(doc_st, min_size=1, max_size=7), query=st.lists(st.sampled_from(WORDS), max_size=5))
def test_vectorised_equals_naive(docs, query):
    idx = BM25Index(tokenizer=str.split)
    idx.add_many((f"d{i}", " ".join(d)) for i, d in enumerate(docs))
    s = idx.score(query)
    d_bm, d_fz, d_raw = s.dense()
    ref = naive_scores(docs, query)
    for i, (bm, fz, raw) in enumerate(ref):
        j = s.ids.index(f"d{i}")
        assert d_bm[j] == pytest.approx(bm, abs=1e-9)
        assert d_fz[j] == pytest.approx(fz, abs=1e-12)
        assert d_raw[j] == pytest.approx(raw, abs=1e-9)
        assert 0.0 <= d_fz[j] <= 1.0
    for t in set(query):
        assert idx.idf(t) >= 0


@settings(max_examples=100, deadline=None)
@given(
    docs=st.lists(doc_st, min_size=2, max_size=8),
    removed=st.sets(st.integers(0, 7)),
    updated=st.dictionaries(st.integers(0, 7), doc_st, max_size=3),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
)
def test_incremental_updates_equal_fresh_build(docs, removed, updated, query):
    inc = BM25Index(tokenizer=str.split)
    inc.add_many((f"d{i}", " ".join(d)) for i, d in enumerate(docs))
    inc.score(query)  # force a layout, then mutate
    final = {f"d{i}": " ".join(d) for i, d in enumerate(docs)}
    for i, d in updated.items():
        if i < len(docs):
            inc.add(f"d{i}", " ".join(d))
            final[f"d{i}"] = " ".join(d)
    gone = [f"d{i}" for i in removed if i < len(docs)]
    inc.remove(gone)
    for g in gone:
        final.pop(g, None)
    fresh = BM25Index(tokenizer=str.split)
    fresh.add_many(final.items())
    a, b = inc.score(query), fresh.score(query)
    assert dict(zip(a.ids, a.dense()[2].round(12))) == dict(zip(b.ids, b.dense()[2].round(12)))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=20), st.floats(0.01, 100))
def test_saturate_monotone_in_unit_interval(xs, c):
    xs = sorted(xs)
    ys = saturate(xs, c)
    assert np.all((ys >= 0) & (ys < 1))
    assert np.all(np.diff(ys) >= -1e-15)


@settings(max_examples=200, deadline=None)
@given(vocab=st.sets(st.text("abcd", min_size=1, max_size=4), min_size=1, max_size=12), q=st.text("abcd", min_size=1, max_size=5))
def test_vocabulary_matcher_equals_brute_force(vocab, q):
    terms = sorted(vocab)
    got = {terms[i] for i in VocabularyMatcher(terms).related(q)}
    assert got == {v for v in terms if v != q and (q in v or v in q)}


# --- parity with bm25s ----------------------------------------------------------------------
def test_parity_with_bm25s_lucene(real_sentences):
    bm25s = pytest.importorskip("bm25s")
    docs = real_sentences[:400]
    toks = [tokenize(d) for d in docs]
    keep = [i for i, t in enumerate(toks) if t]
    docs, toks = [docs[i] for i in keep], [toks[i] for i in keep]
    ours = BM25Index(fuzzy_boost=0.0)
    ours.add_many((f"s{i:04d}", d) for i, d in enumerate(docs))
    ref = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    vocab = sorted({t for ts in toks for t in ts})
    tid = {t: i for i, t in enumerate(vocab)}
    ref.index(bm25s.tokenization.Tokenized(ids=[[tid[t] for t in ts] for ts in toks], vocab=tid), show_progress=False)
    rng = random.Random(7)
    for _ in range(40):
        q = list(dict.fromkeys(rng.sample(toks[rng.randrange(len(toks))], k=1) + rng.sample(vocab, k=2)))
        s = ours.score(q)
        dense = s.dense()[0]
        mine = np.array([dense[s.ids.index(f"s{i:04d}")] for i in range(len(docs))])
        theirs = ref.get_scores([tid[t] for t in q])
        # bm25s' lucene variant drops the constant (k1 + 1) factor of the spec's TF_norm
        np.testing.assert_allclose(mine, (1.2 + 1) * theirs, atol=1e-6, rtol=0)
        top_ours = [d for d, _ in s.top(10)]
        order = sorted(range(len(docs)), key=lambda i: (-round(theirs[i], 9), f"s{i:04d}"))
        top_ref = [f"s{i:04d}" for i in order if theirs[i] > 0][:10]
        assert top_ours == top_ref


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(doc_st, min_size=1, max_size=12), query=st.lists(st.sampled_from(WORDS), max_size=5), k=st.integers(1, 6))
def test_compiled_search_equals_dense_ranking(docs, query, k):
    idx = BM25Index(tokenizer=str.split, fuzzy_boost=0.0)
    idx.add_many((f"d{i:02d}", " ".join(d)) for i, d in enumerate(docs))
    fast = idx.search(query, k, fuzzy=False)
    dense = idx.score(query, fuzzy=False).top(k)
    assert [d for d, _ in fast] == [d for d, _ in dense]
    np.testing.assert_allclose([s for _, s in fast], [s for _, s in dense], rtol=0, atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(["auth", "authentication", "oauth", "token", "tok", "db", "d1", "cache", "ca"]), min_size=0, max_size=6), min_size=1, max_size=12),
    query=st.lists(st.sampled_from(["auth", "oauth", "token", "db", "cache", "ca", "zz", "authentication"]), min_size=1, max_size=7),
    partial=st.sampled_from([0.25, 0.3, 0.1, 0.7]),
)
def test_index_fuzzy_equals_per_document_definition_bit_for_bit(docs, query, partial):
    """Online recall scores the rerank overlap per candidate with token_overlap while the
    harness reads it from the index: the two must be the same floats, not merely close."""
    idx = BM25Index(tokenizer=str.split, fuzzy_partial=partial)
    idx.add_many((f"d{i}", " ".join(d)) for i, d in enumerate(docs))
    s = idx.score(" ".join(query))
    got = dict(zip(s.ids, s.fuzzy.tolist()))
    assert got == {f"d{i}": token_overlap(query, d, partial) for i, d in enumerate(docs)}
    prepared = QueryOverlap(query, partial)  # the reranker's form, prepared once per query
    assert got == {f"d{i}": prepared.score(d) for i, d in enumerate(docs)}


@settings(max_examples=80, deadline=None)
@given(docs=st.lists(doc_st, min_size=1, max_size=8), removed=st.sets(st.integers(0, 7)),
       query=st.lists(st.sampled_from(WORDS), max_size=5), partial=st.sampled_from([0.25, 0.5]))
def test_overlap_index_equals_naive_reference_after_removals(docs, removed, query, partial):
    """The corpus form of the overlap (the reranker's full-corpus column and BM25's fuzzy
    term) against the plain-loop reference, on an index that was laid out then mutated."""
    idx = OverlapIndex(tokenizer=str.split, partial=partial)
    idx.add_many((f"d{i}", " ".join(d)) for i, d in enumerate(docs))
    idx.overlap(query)
    idx.remove(f"d{i}" for i in removed)
    got = dict(zip(idx.ids, idx.overlap(query).tolist()))
    want = {f"d{i}": naive_fuzzy(query, d, partial) for i, d in enumerate(docs) if i not in removed}
    assert got.keys() == want.keys()
    for d in want:
        assert got[d] == pytest.approx(want[d], abs=1e-12)
    with pytest.raises(ValueError, match="fuzzy_partial"):
        OverlapIndex(partial=1.5)


# --- issue 36 item 2: the matcher's long-word bound keeps its output -------------------------
def naive_related(terms: list[str], q: str) -> list[int]:
    """The matcher as it was before the bound (the reference): every substring of ``q``
    probed, plus the ``q in v`` scan; its own term left out."""
    if not q or "\n" in q:
        return []
    index = {t: i for i, t in enumerate(terms)}
    found = {i for i, t in enumerate(terms) if q in t}
    found |= {index[q[a:z]] for a in range(len(q)) for z in range(a + 1, len(q) + 1) if q[a:z] in index}
    found.discard(index.get(q, -1))
    return sorted(found)


def naive_query_overlap(query: list[str], doc: list[str], partial: float) -> float:
    """The reranker's prepared form before the bound: q's substrings as a set."""
    if not query or not doc:
        return 0.0
    ds = set(doc)
    total = 0.0
    for q, mult in Counter(query).items():
        subs = {q[a:z] for a in range(len(q)) for z in range(a + 1, len(q) + 1)}
        credit = 1.0 if q in ds else partial if any(q in d for d in ds) or subs & ds else 0.0
        total += mult * credit
    return total / len(query)


WORD = st.text("abc\u00e9\n", min_size=0, max_size=90)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(vocab=st.lists(WORD, max_size=14, unique=True), q=WORD)
def test_vocabulary_matcher_equals_the_unbounded_reference(vocab, q):
    assert VocabularyMatcher(vocab).related(q) == naive_related(vocab, q)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(query=st.lists(WORD, max_size=4), doc=st.lists(WORD, max_size=8), partial=st.sampled_from([0.25, 0.5]))
def test_query_overlap_equals_the_unbounded_reference(query, doc, partial):
    assert QueryOverlap(query, partial).score(doc) == naive_query_overlap(query, doc, partial)


@pytest.mark.parametrize(("vocab", "q"), [
    (["authentication", "auth", "oauth", "db", "database", "jwt"], "auth"),  # the spec's examples
    (["authentication", "auth", "oauth", "db", "database", "jwt"], "db"),
    (["authentication", "auth", "oauth", "db", "database", "jwt"], "xauthenticationx" * 8),
    (["a" * 70, "a", "b"], "a" * 200),
])
def test_vocabulary_matcher_spec_and_long_words(vocab, q):
    assert VocabularyMatcher(vocab).related(q) == naive_related(vocab, q)
    assert QueryOverlap([q, "db"]).score(vocab) == naive_query_overlap([q, "db"], vocab, 0.25)


def test_long_query_word_is_linear_not_cubic():
    """A 2 KiB word: the bounded probe visits len(q) substrings per term length (the
    unbounded one visited 2e6; a 1 MB word 5e11); checked by counting probes, not by time."""
    vocab = [f"term{i}" for i in range(300)] + ["postgres", "x" * 40]
    m = VocabularyMatcher(vocab)
    probes = 0
    real = m._index

    class Counting(dict):
        def get(self, key, default=None):
            nonlocal probes
            probes += 1
            return real.get(key, default)

    m._index = Counting()
    q = "postgres" * 256  # 2 KiB
    assert m.related(q) == [vocab.index("postgres")]
    assert probes <= len(q) * len({len(t) for t in vocab}) + 1
