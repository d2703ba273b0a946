"""Fuzzy token overlap (spec "Signal 2"; upstream ``tokenOverlapScore``).

    fuzzyOverlap(Q, D) = (sum over q in Q of  1      if q in D
                                              p      elif some d in D has q in d or d in q
                                              0      otherwise) / |Q|

with the partial credit ``p = 0.25``. ``Q`` keeps duplicates (a repeated query term counts
each time, and the denominator counts it too); ``D`` is a set. An empty ``Q`` or ``D``
gives 0. The result lies in [0, 1].

:func:`token_overlap` is the per-document definition. The index computes the same number
for every document at once at the vocabulary level (see :class:`VocabularyMatcher`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence, Set as AbstractSet


def token_overlap(query_terms: Sequence[str], doc_terms: Sequence[str] | AbstractSet[str], partial: float = 0.25) -> float:
    """Per-document fuzzy overlap, written straight from the definition.

    Sums ``count(q) * credit(q)`` over the distinct query terms in first-seen order, the
    same floating-point steps the index (and :class:`QueryOverlap`) take, so they agree
    bit for bit.
    """
    if not query_terms or not doc_terms:
        return 0.0
    doc_set = doc_terms if isinstance(doc_terms, AbstractSet) else set(doc_terms)
    total = 0.0
    for q, mult in Counter(query_terms).items():
        if q in doc_set:
            credit = 1.0
        elif any(q in d or d in q for d in doc_set):
            credit = partial
        else:
            credit = 0.0
        total += mult * credit
    return total / len(query_terms)


class QueryOverlap:
    """:func:`token_overlap` with the query prepared once, for scoring many documents
    (the reranker's candidate pool): "q lies inside some d" is one substring scan of the
    document's terms joined by newlines, and "some d lies inside q" one set intersection
    with q's precomputed substrings."""

    def __init__(self, query_terms: Sequence[str], partial: float = 0.25) -> None:
        self.n = len(query_terms)
        self.partial = partial
        self.terms = [
            (q, mult, frozenset(q[a:z] for a in range(len(q)) for z in range(a + 1, len(q) + 1)))
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
            elif (q in joined if "\n" not in q else any(q in d for d in doc_set)) or not inside_q.isdisjoint(doc_set):
                credit = self.partial
            else:
                credit = 0.0
            total += mult * credit
        return total / self.n


class VocabularyMatcher:
    """Finds, for a query term, every vocabulary term related to it by containment.

    ``v`` contains ``q``: one C-level substring scan over the vocabulary joined by
    newlines, each hit mapped back to its term with a binary search over line offsets.
    ``q`` contains ``v``: every substring of ``q`` looked up in the vocabulary dict
    (at most ``len(q)*(len(q)+1)/2`` probes).
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
        for a in range(n):
            for z in range(a + 1, n + 1):
                j = index.get(q[a:z])
                if j is not None:
                    found.add(j)
        own = index.get(q)
        if own is not None:
            found.discard(own)
        return sorted(found)
