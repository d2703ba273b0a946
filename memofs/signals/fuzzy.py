"""Fuzzy token overlap (spec "Signal 2"; upstream ``tokenOverlapScore``).

    fuzzyOverlap(Q, D) = (sum over q in Q of  1      if q in D
                                              p      elif some d in D has q in d or d in q
                                              0      otherwise) / |Q|

with the partial credit ``p = 0.25``. ``Q`` keeps duplicates (a repeated query term counts
each time, and the denominator counts it too); ``D`` is a set. An empty ``Q`` or ``D``
gives 0. The result lies in [0, 1].

The one definition has two forms, equal bit for bit (both sum ``count(q) * credit(q)`` over
the distinct query terms in first-seen order, then divide once):

* per document: :func:`token_overlap`, prepared once per query as :class:`QueryOverlap`
  (the reranker scoring a candidate pool);
* every document at once: :class:`OverlapIndex`, documents' terms by id laid out
  term-major, credits found at the vocabulary level (:class:`VocabularyMatcher`). BM25's
  fuzzy column (:class:`memofs.signals.bm25.BM25Index` extends it) and the deterministic
  reranker's full-corpus column (``Recaller.signals``) both come from it. Its per-term
  step runs compiled (:func:`memofs.signals.bm25_kernel.add_fuzzy_term`) or in numpy
  (:func:`add_term_credit`), as :func:`memofs.signals.kernels.compiled` says; the floats are
  the same.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence, Set as AbstractSet

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from memofs.signals import kernels
from memofs.signals.term_counts import TermCounts, Tokenizer
from memofs.text.tokenize import tokenize


def _check_partial(partial: float) -> float:
    if not 0.0 <= partial <= 1.0:
        raise ValueError(f"fuzzy_partial must be in [0, 1], got {partial}")
    return float(partial)


SUBSTRING_SET_CHARS = 64
"""Longest query term whose substrings :class:`QueryOverlap` precomputes as a set (a term
of ``n`` characters has up to ``n(n+1)/2`` of them); a longer term is tested against each
document term with ``d in q`` instead: the same credit, in time linear in ``n``."""


class QueryOverlap:
    """:func:`token_overlap` with the query prepared once, for scoring many documents:
    "q lies inside some d" is one substring scan of the document's terms joined by
    newlines, and "some d lies inside q" one set intersection with q's precomputed
    substrings (for terms up to :data:`SUBSTRING_SET_CHARS` characters; a longer one
    scans the document's terms, so a hostile long word costs linear, not cubic, time)."""

    def __init__(self, query_terms: Sequence[str], partial: float = 0.25) -> None:
        self.n = len(query_terms)
        self.partial = partial
        self.terms = [
            (q, mult, frozenset(q[a:z] for a in range(len(q)) for z in range(a + 1, len(q) + 1))
             if len(q) <= SUBSTRING_SET_CHARS else None)
            for q, mult in Counter(query_terms).items()
        ]

    def score(self, doc_terms: Sequence[str] | AbstractSet[str]) -> float:
        if not self.n or not doc_terms:
            return 0.0
        doc_set = doc_terms if isinstance(doc_terms, AbstractSet) else set(doc_terms)
        joined = "\n".join(doc_set)
        total = 0.0
        for q, mult, inside_q in self.terms:
            if q in doc_set:
                credit = 1.0
            elif ((q in joined if "\n" not in q else any(q in d for d in doc_set))
                  or (not inside_q.isdisjoint(doc_set) if inside_q is not None else any(d in q for d in doc_set if d))):
                credit = self.partial
            else:
                credit = 0.0
            total += mult * credit
        return total / self.n


def token_overlap(query_terms: Sequence[str], doc_terms: Sequence[str] | AbstractSet[str], partial: float = 0.25) -> float:
    """Fuzzy overlap of one document (the module's definition)."""
    return QueryOverlap(query_terms, partial).score(doc_terms)


class VocabularyMatcher:
    """Finds, for a query term, every vocabulary term related to it by containment.

    ``v`` contains ``q``: one C-level substring scan over the vocabulary joined by
    newlines, each hit mapped back to its term with a binary search over line offsets.
    ``q`` contains ``v``: the substrings of ``q`` of the lengths vocabulary terms have
    looked up in the vocabulary dict (at most ``len(q)`` probes per distinct term length,
    so a long query word costs linear time, not the cube of its length as probing every
    substring did).
    """

    def __init__(self, terms: Sequence[str]) -> None:
        self._terms = list(terms)
        self._index = {t: i for i, t in enumerate(self._terms)}
        self._joined = "\n".join(self._terms)
        starts, pos = [], 0
        for t in self._terms:
            starts.append(pos)
            pos += len(t) + 1
        self._starts = starts
        self._lengths = sorted({len(t) for t in self._terms if t})

    def related(self, q: str) -> list[int]:
        """Term ids ``i`` with ``terms[i] != q`` and (``q in terms[i]`` or ``terms[i] in q``)."""
        if not q or "\n" in q:
            return []
        found: set[int] = set()
        joined, find, starts = self._joined, self._joined.find, self._starts
        pos = find(q)
        while pos != -1:
            i = bisect_right(starts, pos) - 1
            found.add(i)
            # jump to the next term: one hit per term is enough
            nxt = starts[i + 1] if i + 1 < len(starts) else len(joined)
            pos = find(q, nxt)
        n = len(q)
        index = self._index
        for size in self._lengths:  # only lengths some term has can name a term
            if size > n:
                break
            for a in range(n - size + 1):
                j = index.get(q[a:a + size])
                if j is not None:
                    found.add(j)
        own = index.get(q)
        if own is not None:
            found.discard(own)
        return sorted(found)


class Postings:
    """Immutable term-major snapshot of an :class:`OverlapIndex`: ids, their id order, the
    vocabulary, and a docs x terms ``scipy.sparse`` CSC matrix of term frequencies (its
    sparsity pattern is "d holds the term")."""

    def __init__(self, ids: tuple[str, ...], order_key: NDArray[np.int64], vocab: dict[str, int],
                 tf: sp.csc_matrix, lengths: NDArray[np.float64]) -> None:
        self.ids = ids
        self.order_key = order_key
        self.vocab = vocab
        self.tf = tf
        self.lengths = lengths  # tokens per document, duplicates counted
        self.matcher = VocabularyMatcher(list(vocab))
        self._related: dict[str, NDArray[np.int64]] = {}

    @classmethod
    def collect(cls, index: OverlapIndex) -> tuple[tuple[str, ...], NDArray[np.int64], dict[str, int], sp.csc_matrix, NDArray[np.float64]]:
        """The constructor's arguments for the current documents of ``index``: its adopted
        base's live rows (:meth:`OverlapIndex.add_counts`, sliced as a matrix), then the
        documents added one by one; terms no live document holds are left out."""
        base = index._base
        vocab: dict[str, int] = {} if base is None else {t: j for j, t in enumerate(base.vocab)}
        for t in index._df:
            vocab.setdefault(t, len(vocab))
        own = tuple(index._docs)
        rows, cols, tfs = [], [], []
        for i, doc_id in enumerate(own):
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
        lengths = np.fromiter((index._lengths[d] for d in own), dtype=np.float64, count=len(own))
        ids = own
        if base is None:
            tf_matrix = sp.csc_matrix((f, (r, c)), shape=(len(own), len(vocab)))
        else:
            live = index._alive
            all_live = bool(live.all())
            head = base.counts if all_live else base.counts[np.flatnonzero(live)]
            head = sp.csr_matrix((head.data.astype(np.float64), head.indices, head.indptr), shape=(head.shape[0], len(vocab)))
            if own:  # stacked as rows (CSR blocks join without a sort), then one transpose
                head = sp.vstack([head, sp.csr_matrix((f, (r, c)), shape=(len(own), len(vocab)))], format="csr")
            tf_matrix = head.tocsc()
            base_ids = base.ids if all_live else tuple(d for d, keep in zip(base.ids, live.tolist()) if keep)
            ids = base_ids + own
            base_len = index._base_len if all_live else index._base_len[live]
            lengths = np.concatenate([base_len.astype(np.float64), lengths])
            held = np.diff(tf_matrix.indptr) > 0
            if not held.all():  # a base term only removed or replaced documents held
                keep = np.flatnonzero(held)
                tf_matrix = tf_matrix[:, keep]
                terms = list(vocab)
                vocab = {terms[j]: k for k, j in enumerate(keep.tolist())}
        n = len(ids)
        order_key = np.empty(n, dtype=np.int64)
        order_key[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(n)
        return ids, order_key, vocab, tf_matrix, lengths

    @classmethod
    def build(cls, index: OverlapIndex) -> Postings:
        return cls(*cls.collect(index))

    def related(self, term: str) -> NDArray[np.int64]:
        hit = self._related.get(term)
        if hit is None:
            hit = np.asarray(self.matcher.related(term), dtype=np.int64)
            self._related[term] = hit
        return hit

    def overlap(self, terms: Sequence[str], partial: float) -> NDArray[np.float64]:
        """Fuzzy overlap of every document, aligned with :attr:`ids`: the sum of
        ``count(q) * credit(q)`` per document, in the steps :class:`QueryOverlap` takes,
        visiting only the documents with an exact or related posting."""
        n = len(self.ids)
        fz = np.zeros(n)
        if not terms or not n:
            return fz
        m = self.tf
        if kernels.compiled():
            from memofs.signals.bm25_kernel import add_fuzzy_term

            credit, seen, touched = np.zeros(n), np.zeros(n, dtype=bool), np.empty(n, dtype=np.int64)
            for term, mult in Counter(terms).items():
                j = self.vocab.get(term)
                add_fuzzy_term(m.indptr, m.indices, self.related(term), -1 if j is None else j, float(partial),
                               float(mult), fz, credit, seen, touched)
        else:
            for term, mult in Counter(terms).items():
                add_term_credit(m, self.related(term), self.vocab.get(term), float(partial), float(mult), fz)
        fz /= len(terms)
        return fz


def add_term_credit(tf: sp.csc_matrix, related: NDArray[np.int64], exact: int | None, partial: float, mult: float,
                    fz: NDArray[np.float64]) -> None:
    """``fz += mult * credit`` for one distinct query term, in numpy: ``credit`` is 1 for a
    document holding term column ``exact``, ``partial`` for one holding any ``related``
    column, else 0 (adding ``mult * 0.0`` leaves a non-negative float as it was, so this
    equals the compiled kernel's visit of the postings only, bit for bit)."""
    credit = np.zeros(fz.size)
    if related.size:
        credit[tf[:, related].indices] = partial
    if exact is not None:
        credit[tf.indices[tf.indptr[exact]:tf.indptr[exact + 1]]] = 1.0
    fz += mult * credit


class OverlapIndex:
    """A mutable index of documents' terms keyed by id, scored with the fuzzy overlap of
    every document at once (:meth:`overlap`).

    ``tokenizer`` maps text to terms (default :func:`memofs.text.tokenize.tokenize`, the
    recall tokens; the deterministic reranker passes its own). Adds, updates and removals
    touch the per-document term counts and the df counters; the term-major
    :class:`Postings` snapshot is rebuilt lazily on the next query, giving exactly the
    scores of a fresh build. Subclasses extend the snapshot (``snapshot_type``).

    A whole corpus tokenized beforehand (:class:`~memofs.signals.term_counts.TermCounts`,
    e.g. a store's sidecar) is adopted by :meth:`add_counts` as the index's *base*: its rows
    stay one sparse matrix (no per-document objects; a removed or replaced document only
    marks its row dead), and later documents are added one by one beside it.
    """

    snapshot_type: type[Postings] = Postings

    def __init__(self, tokenizer: Tokenizer = tokenize, partial: float = 0.25) -> None:
        self.tokenizer = tokenizer
        self.partial = _check_partial(partial)
        self._docs: dict[str, Counter[str]] = {}
        self._lengths: dict[str, int] = {}
        self._df: Counter[str] = Counter()
        self._total_len = 0
        self._base: TermCounts | None = None
        self._base_row: dict[str, int] = {}
        self._alive = np.zeros(0, dtype=bool)
        self._base_len = np.zeros(0, dtype=np.int64)
        self._base_live = 0  # live base rows
        self._base_total = 0  # tokens in live base rows
        self._base_df: NDArray[np.int64] | None = None  # live rows per base term, on first use
        self._base_col: dict[str, int] = {}  # base term -> column, with _base_df
        self._dirty = True
        self._snapshot: Postings | None = None

    def __len__(self) -> int:
        return len(self._docs) + self._base_live

    def __contains__(self, doc_id: object) -> bool:
        if doc_id in self._docs:
            return True
        row = self._base_row.get(doc_id)  # type: ignore[call-overload]
        return row is not None and bool(self._alive[row])

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
            self._put(doc_id, Counter(self.tokenizer(text)))
        self._dirty = True

    def add_counts(self, counts: TermCounts) -> None:
        """Insert or replace the documents of ``counts`` (which must come from this index's
        tokenizer). An empty index adopts them as its base in O(1) Python work; otherwise
        they are added one by one, as :meth:`add_many` would."""
        if len(set(counts.ids)) != len(counts.ids):
            raise ValueError("term counts repeat a document id")
        if len(self) == 0 and self._base is None:
            self._base = counts
            self._base_row = dict(zip(counts.ids, range(len(counts.ids))))
            self._alive = np.ones(len(counts.ids), dtype=bool)
            self._base_len = counts.lengths
            self._base_live = len(counts.ids)
            self._base_total = int(self._base_len.sum())
            self._base_df = None
        else:
            m, vocab = counts.counts, counts.vocab
            for i, doc_id in enumerate(counts.ids):
                a, z = m.indptr[i], m.indptr[i + 1]
                self._put(doc_id, Counter(dict(zip([vocab[j] for j in m.indices[a:z].tolist()], m.data[a:z].tolist()))))
        self._dirty = True

    def _put(self, doc_id: str, tf: Counter[str]) -> None:
        if doc_id in self:
            self._drop(doc_id)
        self._docs[doc_id] = tf
        self._lengths[doc_id] = sum(tf.values())
        self._total_len += self._lengths[doc_id]
        self._df.update(tf.keys())

    def remove(self, ids: Iterable[str]) -> None:
        """Remove documents by id; unknown ids are ignored."""
        for doc_id in ids:
            if doc_id in self:
                self._drop(doc_id)
        self._dirty = True

    def _drop(self, doc_id: str) -> None:
        if doc_id not in self._docs:  # a live base row: marked dead
            row = self._base_row[doc_id]
            self._alive[row] = False
            self._base_live -= 1
            self._base_total -= int(self._base_len[row])
            self._base_df = None
            return
        tf = self._docs.pop(doc_id)
        self._total_len -= self._lengths.pop(doc_id)
        for term in tf:
            self._df[term] -= 1
            if self._df[term] <= 0:
                del self._df[term]

    def df(self, term: str) -> int:
        """How many documents hold ``term``."""
        n = self._df.get(term, 0)
        if self._base is not None:
            if self._base_df is None:
                m = self._base.counts
                rows = np.repeat(self._alive, np.diff(m.indptr))
                self._base_df = np.bincount(m.indices[rows], minlength=len(self._base.vocab))
                self._base_col = {t: k for k, t in enumerate(self._base.vocab)}
            j = self._base_col.get(term)
            if j is not None:
                n += int(self._base_df[j])
        return n

    @property
    def total_length(self) -> int:
        """Tokens in all documents, duplicates counted."""
        return self._total_len + self._base_total

    def _refresh(self) -> Postings:
        if self._dirty or self._snapshot is None:
            self._snapshot = self.snapshot_type.build(self)
            self._dirty = False
        return self._snapshot

    def _terms(self, query: str | Sequence[str]) -> list[str]:
        return self.tokenizer(query) if isinstance(query, str) else list(query)

    @property
    def ids(self) -> tuple[str, ...]:
        return self._refresh().ids

    def overlap(self, query: str | Sequence[str]) -> NDArray[np.float64]:
        """Fuzzy overlap of every document for ``query`` (text, tokenized here, or a term
        list), aligned with :attr:`ids`."""
        return self._refresh().overlap(self._terms(query), self.partial)
