"""Okapi BM25 with the spec's IDF floor, plus the fuzzy-overlap term (spec "Signal 1").

    IDF(q)      = max(0, ln(1 + (N - df(q) + 0.5) / (df(q) + 0.5)))
    TF_norm(q,D) = tf(q,D) (k1 + 1) / (tf(q,D) + k1 (1 - b + b |D| / avgdl))
    rawScore(Q,D) = sum over unique q in Q of IDF(q) TF_norm(q,D)
                    + fuzzyBoost * fuzzyOverlap(Q, D)

Defaults k1 = 1.2, b = 0.75, fuzzyBoost = 0.15. When ``avgdl`` is 0, ``|D|/avgdl`` is
taken as 1 (upstream).

Layout (after bm25s): term frequencies live per document; on the first query after a
change the index lays them out once as a term-major ``scipy.sparse`` matrix of BM25
weights, so a query is one gather-and-bincount over the postings of its terms. Adds,
updates and removals only touch the per-document rows and the df counters; the weight
matrix is refreshed lazily, which gives exactly the scores of a fresh build.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from memofs.signals.bm25_kernel import add_fuzzy_term, top_k_postings
from memofs.signals.fuzzy import VocabularyMatcher
from memofs.text.tokenize import tokenize


@dataclass(frozen=True)
class LexicalScores:
    """Per-document lexical signals for one query, aligned with ``ids``.

    :attr:`raw` ``= bm25 + fuzzy_boost * fuzzy`` is the spec's rawScore (``bm25`` alone
    when the fuzzy term was not computed: ``boost`` None). It is computed on first use:
    recall combines ``bm25`` and ``fuzzy`` itself, under its own config.
    """

    ids: tuple[str, ...]
    bm25: NDArray[np.float64]
    fuzzy: NDArray[np.float64]
    order_key: NDArray[np.int64]  # rank of each id in ascending id order, for tie-breaks
    boost: float | None = None

    @cached_property
    def raw(self) -> NDArray[np.float64]:
        return self.bm25 + self.boost * self.fuzzy if self.boost is not None else self.bm25

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best documents with ``raw > 0``: raw descending, ties by id ascending."""
        raw, n = self.raw, self.raw.size
        if k <= 0 or n == 0:
            return []
        if n > k:
            # keep everything tied with the k-th best score, so the id tie-break is exact
            kth = raw[np.argpartition(-raw, k - 1)[:k]].min()  # (-raw, k-1) selects fast even with many zeros
            hit = np.flatnonzero(raw >= max(kth, np.nextafter(0.0, 1.0)))
        else:
            hit = np.flatnonzero(raw > 0)
        order = hit[np.lexsort((self.order_key[hit], -raw[hit]))][:k]
        return [(self.ids[i], float(raw[i])) for i in order]

    def dense(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """(bm25, fuzzy, raw) aligned with ``ids``."""
        return self.bm25, self.fuzzy, self.raw


class BM25Index:
    """A mutable BM25 + fuzzy index over string documents keyed by id.

    Parameters are plain constructor arguments (scikit-learn style). ``tokenizer`` maps
    text to recall tokens; it defaults to :func:`memofs.text.tokenize.tokenize`.
    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        fuzzy_boost: float = 0.15,
        fuzzy_partial: float = 0.25,
        tokenizer=tokenize,
    ) -> None:
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b}")
        if fuzzy_boost < 0:
            raise ValueError(f"fuzzy_boost must be >= 0, got {fuzzy_boost}")
        if not 0.0 <= fuzzy_partial <= 1.0:
            raise ValueError(f"fuzzy_partial must be in [0, 1], got {fuzzy_partial}")
        self.k1, self.b = float(k1), float(b)
        self.fuzzy_boost, self.fuzzy_partial = float(fuzzy_boost), float(fuzzy_partial)
        self.tokenizer = tokenizer
        self._docs: dict[str, Counter[str]] = {}
        self._lengths: dict[str, int] = {}
        self._df: Counter[str] = Counter()
        self._total_len = 0
        self._dirty = True
        self._layout: _Layout | None = None

    # --- mutation -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def add(self, doc_id: str, text: str) -> None:
        """Insert or replace one document."""
        self.add_many([(doc_id, text)])

    def add_many(self, docs: Iterable[tuple[str, str]]) -> None:
        """Insert or replace documents; re-adding an id replaces its old text."""
        for doc_id, text in docs:
            if not isinstance(doc_id, str) or not doc_id:
                raise TypeError(f"document id must be a non-empty str, got {doc_id!r}")
            if not isinstance(text, str):
                raise TypeError(f"document {doc_id!r}: text must be str, got {type(text).__name__}")
            if doc_id in self._docs:
                self._drop(doc_id)
            tf = Counter(self.tokenizer(text))
            self._docs[doc_id] = tf
            self._lengths[doc_id] = sum(tf.values())
            self._total_len += self._lengths[doc_id]
            self._df.update(tf.keys())
        self._dirty = True

    def remove(self, ids: Iterable[str]) -> None:
        """Remove documents by id; unknown ids are ignored."""
        for doc_id in ids:
            if doc_id in self._docs:
                self._drop(doc_id)
        self._dirty = True

    def _drop(self, doc_id: str) -> None:
        tf = self._docs.pop(doc_id)
        self._total_len -= self._lengths.pop(doc_id)
        for term in tf:
            self._df[term] -= 1
            if self._df[term] <= 0:
                del self._df[term]

    # --- statistics -----------------------------------------------------------
    @property
    def avgdl(self) -> float:
        return self._total_len / len(self._docs) if self._docs else 0.0

    def idf(self, term: str) -> float:
        """``max(0, ln(1 + (N - df + 0.5) / (df + 0.5)))``."""
        n, df = len(self._docs), self._df.get(term, 0)
        return max(0.0, float(np.log1p((n - df + 0.5) / (df + 0.5))))

    # --- scoring --------------------------------------------------------------
    def _refresh(self) -> _Layout:
        if self._dirty or self._layout is None:
            self._layout = _Layout.build(self)
            self._dirty = False
        return self._layout

    @property
    def ids(self) -> tuple[str, ...]:
        return self._refresh().ids

    def score(self, query: str | Sequence[str], *, fuzzy: bool = True) -> LexicalScores:
        """BM25, fuzzy overlap and rawScore of every document for ``query``.

        ``query`` is text (tokenized here) or an already tokenized term list.
        """
        terms = self.tokenizer(query) if isinstance(query, str) else list(query)
        return self._refresh().score(terms, fuzzy, self.fuzzy_partial, self.fuzzy_boost)

    def search(self, query: str | Sequence[str], top_k: int = 10, *, fuzzy: bool = True) -> list[tuple[str, float]]:
        """Top ``top_k`` (id, rawScore) with rawScore > 0, ties broken by id.

        Without the fuzzy term this runs the compiled postings kernel and never touches
        documents outside the query's postings.
        """
        if fuzzy and self.fuzzy_boost > 0:
            return self.score(query, fuzzy=True).top(top_k)
        if top_k <= 0:
            return []
        lay = self._refresh()
        terms = self.tokenizer(query) if isinstance(query, str) else list(query)
        cols = np.array([lay.vocab[t] for t in dict.fromkeys(terms) if t in lay.vocab], dtype=np.int64)
        if cols.size == 0:
            return []
        w = lay.weights
        rows, scores = top_k_postings(w.indptr, w.indices, w.data, cols, len(lay.ids), top_k, lay.order_key)
        return [(lay.ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]


class _Layout:
    """Immutable term-major snapshot of the index used for scoring."""

    def __init__(self, ids, order_key, vocab, weights, matcher) -> None:
        self.ids: tuple[str, ...] = ids
        self.order_key: NDArray[np.int64] = order_key
        self.vocab: dict[str, int] = vocab
        # docs x terms, BM25 term contributions; its sparsity pattern is "tf > 0"
        self.weights: sp.csc_matrix = weights
        self.matcher = matcher
        self._related: dict[str, NDArray[np.int64]] = {}

    @classmethod
    def build(cls, index: BM25Index) -> _Layout:
        ids = tuple(index._docs)
        n = len(ids)
        order_key = np.empty(n, dtype=np.int64)
        order_key[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(n)
        vocab = {t: j for j, t in enumerate(index._df)}
        rows, cols, tfs = [], [], []
        for i, doc_id in enumerate(ids):
            tf = index._docs[doc_id]
            if tf:
                rows.append(np.full(len(tf), i, dtype=np.int64))
                cols.append(np.fromiter((vocab[t] for t in tf), dtype=np.int64, count=len(tf)))
                tfs.append(np.fromiter(tf.values(), dtype=np.float64, count=len(tf)))
        if rows:
            r, c, f = np.concatenate(rows), np.concatenate(cols), np.concatenate(tfs)
        else:
            r = c = np.zeros(0, dtype=np.int64)
            f = np.zeros(0)
        df = np.fromiter(index._df.values(), dtype=np.float64, count=len(vocab))
        idf = np.maximum(0.0, np.log1p((n - df + 0.5) / (df + 0.5)))
        lengths = np.fromiter((index._lengths[d] for d in ids), dtype=np.float64, count=n)
        avgdl = index.avgdl
        rel_len = lengths / avgdl if avgdl > 0 else np.ones(n)
        k1, b = index.k1, index.b
        w = idf[c] * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * rel_len[r]))
        weights = sp.csc_matrix((w, (r, c)), shape=(n, len(vocab)))
        return cls(ids, order_key, vocab, weights, VocabularyMatcher(list(vocab)))

    def _postings(self, cols: NDArray[np.int64]) -> NDArray[np.int64]:
        """Positions in ``weights.indices``/``.data`` of every posting of ``cols`` (vectorised)."""
        ptr = self.weights.indptr
        starts, lengths = ptr[cols], ptr[cols + 1] - ptr[cols]
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64)
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        return offsets + np.arange(total)

    def related(self, term: str) -> NDArray[np.int64]:
        hit = self._related.get(term)
        if hit is None:
            hit = np.asarray(self.matcher.related(term), dtype=np.int64)
            self._related[term] = hit
        return hit

    def score(self, terms: Sequence[str], fuzzy: bool, partial: float, boost: float) -> LexicalScores:
        """BM25 over unique terms; fuzzy overlap over all terms, duplicates included."""
        n = len(self.ids)
        w = self.weights
        bm25 = np.zeros(n)
        for t in dict.fromkeys(terms):
            j = self.vocab.get(t)
            if j is not None:
                a, z = w.indptr[j], w.indptr[j + 1]
                bm25[w.indices[a:z]] += w.data[a:z]  # a column has no repeated rows
        fz = np.zeros(n)
        if fuzzy and terms and n:
            # sum of count(q) * credit(q) per document, in the steps token_overlap takes,
            # visiting only the documents with a (related) posting
            credit, seen, touched = np.zeros(n), np.zeros(n, dtype=bool), np.empty(n, dtype=np.int64)
            for term, mult in Counter(terms).items():
                j = self.vocab.get(term)
                add_fuzzy_term(w.indptr, w.indices, self.related(term), -1 if j is None else j, float(partial),
                               float(mult), fz, credit, seen, touched)
            fz /= len(terms)
        return LexicalScores(self.ids, bm25, fz, self.order_key, boost if fuzzy else None)
