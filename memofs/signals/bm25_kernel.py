"""Compiled top-k for BM25 search (numba), used when only a ranked list is needed.

Sums the precomputed BM25 weights of the query's postings and keeps the ``k`` best touched
documents in a small sorted buffer: score descending, then id order ascending. Documents
the query does not touch score 0 and are never returned, so the work is proportional to
the postings, not to the corpus.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def top_k_postings(indptr, indices, data, cols, n, k, order_key):  # pragma: no cover - compiled
    scores = np.zeros(n)
    touched = np.empty(n, dtype=np.int64)
    m = 0
    for c in cols:
        for p in range(indptr[c], indptr[c + 1]):
            d = indices[p]
            if scores[d] == 0.0:
                touched[m] = d
                m += 1
            scores[d] += data[p]
    best = np.empty(k, dtype=np.int64)
    filled = 0
    for t in range(m):
        d = touched[t]
        s = scores[d]
        if s <= 0.0:
            continue
        if filled == k:
            w = best[k - 1]
            if s < scores[w] or (s == scores[w] and order_key[d] > order_key[w]):
                continue
            i = k - 1
        else:
            i = filled
            filled += 1
        # insertion step: shift worse entries down
        while i > 0:
            prev = best[i - 1]
            if scores[prev] > s or (scores[prev] == s and order_key[prev] < order_key[d]):
                break
            best[i] = prev
            i -= 1
        best[i] = d
    out_s = np.empty(filled)
    for i in range(filled):
        out_s[i] = scores[best[i]]
    return best[:filled], out_s


@njit(cache=True)
def add_fuzzy_term(indptr, indices, related, exact, partial, mult, fz, credit, seen, touched):  # pragma: no cover - compiled
    """``fz[d] += mult * credit(d)`` for one distinct query term, where ``credit`` is 1 for a
    document holding term column ``exact`` (-1: none), ``partial`` for one holding any of the
    ``related`` columns, else 0. Only documents with such a posting are visited; adding 0.0
    to the others would change nothing, so the floats equal the dense form's.
    ``credit``/``seen`` (length n, zero/False) and ``touched`` (length n) are scratch, left clean."""
    m = 0
    for c in related:
        for p in range(indptr[c], indptr[c + 1]):
            d = indices[p]
            if not seen[d]:
                seen[d] = True
                credit[d] = partial
                touched[m] = d
                m += 1
    if exact >= 0:
        for p in range(indptr[exact], indptr[exact + 1]):
            d = indices[p]
            if not seen[d]:
                seen[d] = True
                touched[m] = d
                m += 1
            credit[d] = 1.0  # an exact match beats partial credit
    for t in range(m):
        d = touched[t]
        fz[d] += mult * credit[d]
        credit[d] = 0.0
        seen[d] = False
