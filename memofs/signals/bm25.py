"""Okapi BM25 with the spec's IDF floor, plus the fuzzy-overlap term (spec "Signal 1").

    IDF(q)      = max(0, ln(1 + (N - df(q) + 0.5) / (df(q) + 0.5)))
    TF_norm(q,D) = tf(q,D) (k1 + 1) / (tf(q,D) + k1 (1 - b + b |D| / avgdl))
    rawScore(Q,D) = sum over unique q in Q of IDF(q) TF_norm(q,D)
                    + fuzzyBoost * fuzzyOverlap(Q, D)

Defaults k1 = 1.2, b = 0.75, fuzzyBoost = 0.15. When ``avgdl`` is 0, ``|D|/avgdl`` is
taken as 1 (upstream).

Layout (after bm25s): the index is a :class:`memofs.signals.fuzzy.OverlapIndex` (term
frequencies per document, laid out term-major on the first query after a change) whose
snapshot adds a ``scipy.sparse`` matrix of BM25 weights, so a query is one
gather-and-bincount over the postings of its terms. The fuzzy term is the overlap index's
own (one implementation of the fuzzy overlap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from memofs.signals import kernels
from memofs.signals.fuzzy import OverlapIndex, Postings, Tokenizer
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


class _Layout(Postings):
    """The overlap snapshot plus the BM25 weight of every posting."""

    def __init__(self, *args, weights: sp.csc_matrix) -> None:
        super().__init__(*args)
        # docs x terms, BM25 term contributions, same pattern as the tf matrix
        self.weights: sp.csc_matrix = weights

    @classmethod
    def build(cls, index: BM25Index) -> _Layout:
        ids, order_key, vocab, tf, lengths = cls.collect(index)
        n = len(ids)
        df = np.diff(tf.indptr).astype(np.float64)  # documents holding each term
        idf = np.maximum(0.0, np.log1p((n - df + 0.5) / (df + 0.5)))
        avgdl = index.avgdl
        rel_len = lengths / avgdl if avgdl > 0 else np.ones(n)
        k1, b = index.k1, index.b
        f = tf.data
        # w = idf * f * (k1 + 1) / (f + k1 * (1 - b + b * rel_len)) per posting, computed in
        # place, operation for operation (the same floats): a start builds it for every
        # posting, and each temporary of that size costs as much as the arithmetic
        denom = rel_len[tf.indices]
        denom *= b
        denom += 1.0 - b
        denom *= k1
        denom += f
        w = np.repeat(idf, np.diff(tf.indptr))
        w *= f
        w *= k1 + 1.0
        w /= denom
        weights = sp.csc_matrix((w, tf.indices, tf.indptr), shape=tf.shape)
        return cls(ids, order_key, vocab, tf, lengths, weights=weights)

    def bm25(self, terms: Sequence[str]) -> NDArray[np.float64]:
        """BM25 of every document over the unique ``terms``."""
        w = self.weights
        out = np.zeros(len(self.ids))
        for t in dict.fromkeys(terms):
            j = self.vocab.get(t)
            if j is not None:
                a, z = w.indptr[j], w.indptr[j + 1]
                out[w.indices[a:z]] += w.data[a:z]  # a column has no repeated rows
        return out


class BM25Index(OverlapIndex):
    """A mutable BM25 + fuzzy index over string documents keyed by id.

    Parameters are plain constructor arguments (scikit-learn style). ``tokenizer`` maps
    text to recall tokens; it defaults to :func:`memofs.text.tokenize.tokenize`.
    Mutation (``add``, ``add_many``, ``remove``) is :class:`OverlapIndex`'s.
    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        fuzzy_boost: float = 0.15,
        fuzzy_partial: float = 0.25,
        tokenizer: Tokenizer = tokenize,
    ) -> None:
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b}")
        if fuzzy_boost < 0:
            raise ValueError(f"fuzzy_boost must be >= 0, got {fuzzy_boost}")
        super().__init__(tokenizer, fuzzy_partial)
        self.k1, self.b = float(k1), float(b)
        self.fuzzy_boost = float(fuzzy_boost)

    snapshot_type = _Layout

    @property
    def fuzzy_partial(self) -> float:
        """The fuzzy term's partial credit (the overlap index's ``partial``)."""
        return self.partial

    # --- statistics -----------------------------------------------------------
    @property
    def avgdl(self) -> float:
        n = len(self)
        return self.total_length / n if n else 0.0

    def idf(self, term: str) -> float:
        """``max(0, ln(1 + (N - df + 0.5) / (df + 0.5)))``."""
        n, df = len(self), self.df(term)
        return max(0.0, float(np.log1p((n - df + 0.5) / (df + 0.5))))

    # --- scoring --------------------------------------------------------------
    def score(self, query: str | Sequence[str], *, fuzzy: bool = True) -> LexicalScores:
        """BM25, fuzzy overlap and rawScore of every document for ``query``.

        ``query`` is text (tokenized here) or an already tokenized term list.
        """
        terms = self._terms(query)
        lay = self._refresh()
        fz = lay.overlap(terms, self.partial) if fuzzy else np.zeros(len(lay.ids))
        return LexicalScores(lay.ids, lay.bm25(terms), fz, lay.order_key, self.fuzzy_boost if fuzzy else None)

    def search(self, query: str | Sequence[str], top_k: int = 10, *, fuzzy: bool = True) -> list[tuple[str, float]]:
        """Top ``top_k`` (id, rawScore) with rawScore > 0, ties broken by id.

        Without the fuzzy term, when :func:`memofs.signals.kernels.compiled`, this runs the
        compiled postings kernel and never touches documents outside the query's postings
        (the same sums in the same order as :meth:`score`, so the same list).
        """
        fuzzy = fuzzy and self.fuzzy_boost > 0
        if fuzzy or not kernels.compiled():
            return self.score(query, fuzzy=fuzzy).top(top_k)
        if top_k <= 0:
            return []
        lay = self._refresh()
        cols = np.array([lay.vocab[t] for t in dict.fromkeys(self._terms(query)) if t in lay.vocab], dtype=np.int64)
        if cols.size == 0:
            return []
        from memofs.signals.bm25_kernel import top_k_postings

        w = lay.weights
        rows, scores = top_k_postings(w.indptr, w.indices, w.data, cols, len(lay.ids), top_k, lay.order_key)
        return [(lay.ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]
