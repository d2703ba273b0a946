"""Compiled candidate-pool selection (numba): :func:`memofs.ranking.pools.pools`' steps
1-3 in one pass over the frame, when :func:`memofs.signals.kernels.compiled`.

Each pool is a bounded heap whose root is its worst member under the rank order (value
descending, then order_key ascending, then row ascending: np.lexsort's stable order), so
the pools equal :func:`memofs.ranking.pools.top_rows`' exactly, ties included; the numpy
path (:func:`memofs.ranking.pools.select`) is that reference, tested equal to this one.
Lexical scores are computed with the same floating-point operations as
:func:`memofs.ranking.pools.lexical_score` (no fastmath, no FMA). Modes: 0 no lexical,
1 bm25, 2 ``boost * fuzzy``, 3 ``bm25 + boost * fuzzy``.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _lex_at(bm25, fuzzy, i, mode, boost):  # pragma: no cover - compiled
    if mode == 3:
        return bm25[i] + boost * fuzzy[i]
    if mode == 1:
        return float(bm25[i])
    if mode == 2:
        return boost * fuzzy[i]
    return 0.0


@njit(cache=True, inline="always")
def _before(va, ka, ra, vb, kb, rb):  # pragma: no cover - compiled
    """Whether (value, order_key, row) ``a`` ranks before ``b``: value descending, then id
    order, then row (np.lexsort's stable order, as :func:`memofs.ranking.pools.top_rows`)."""
    if va != vb:
        return va > vb
    if ka != kb:
        return ka < kb
    return ra < rb


@njit(cache=True, inline="always")
def _sift_down(hv, hk, hr, size, x, key, row):  # pragma: no cover - compiled
    """Move the worse child up from the root of the heap ``[:size]`` while it ranks after
    ``(x, key, row)``; returns the slot where that entry belongs (the caller writes it)."""
    j = 0
    while True:
        w = 2 * j + 1
        if w >= size:
            return j
        r = w + 1
        if r < size and _before(hv[w], hk[w], hr[w], hv[r], hk[r], hr[r]):
            w = r  # the worse child
        if _before(hv[w], hk[w], hr[w], x, key, row):
            return j
        hv[j] = hv[w]
        hk[j] = hk[w]
        hr[j] = hr[w]
        j = w


@njit(cache=True)
def _pool_block(a, b, mode, boost, positive, is_graph, include_graph, order_key, start, end, hv, hk, hr, size):  # pragma: no cover - compiled
    """Offer rows ``start:end`` to a bounded heap (root: its worst member) of capacity
    ``hv.size`` holding ``size``. A row's value is ``_lex_at(a, b, ...)`` (``a`` alone with
    mode 1); it qualifies when eligible and finite (``positive`` False) or > 0 (True).
    Returns the new size and whether any row qualified."""
    cap = hv.size
    found = False
    for i in range(start, end):
        if not include_graph and is_graph[i]:
            continue
        x = _lex_at(a, b, i, mode, boost)
        if positive:
            if not x > 0.0:
                continue
        elif not x - x == 0.0:
            continue
        found = True
        if size == cap:
            if cap == 0 or x < hv[0]:
                continue
            key = order_key[i]
            if not _before(x, key, i, hv[0], hk[0], hr[0]):
                continue
            j = _sift_down(hv, hk, hr, size, x, key, i)  # replace the root
        else:
            key = order_key[i]
            j = size  # append, sift up
            size += 1
            while j > 0:
                p = (j - 1) // 2
                if not _before(hv[p], hk[p], hr[p], x, key, i):
                    break
                hv[j] = hv[p]
                hk[j] = hk[p]
                hr[j] = hr[p]
                j = p
        hv[j] = x
        hk[j] = key
        hr[j] = i
    return size, found


@njit(cache=True)
def _drain(hv, hk, hr, size):  # pragma: no cover - compiled
    """Heap-sort a pool: its rows, best first."""
    for end in range(size - 1, 0, -1):
        x, key, row = hv[end], hk[end], hr[end]  # the root moves to ``end``; sift ``row`` down from 0
        hv[end], hk[end], hr[end] = hv[0], hk[0], hr[0]
        j = _sift_down(hv, hk, hr, end, x, key, row)
        hv[j] = x
        hk[j] = key
        hr[j] = row
    return hr[:size].copy()


_BLOCK = 64  # rows per block of the scan's vectorised pre-filter


@njit(cache=True, inline="always")
def _entry_threshold(hv, size, any_hit, thr):  # pragma: no cover - compiled
    """A pool's entry threshold after a block: a full pool's worst value (nothing below it
    enters); NaN (nothing reaches it) for a pool of capacity 0 once a hit answered its
    any_* question; else unchanged."""
    if hv.size == 0:
        return np.nan if any_hit else thr
    return hv[0] if size == hv.size else thr


@njit(cache=True)
def scan(cosine, bm25, fuzzy, is_graph, order_key, mode, boost, include_graph, n_vec, n_lex):  # pragma: no cover - compiled
    """One pass: the top ``n_vec`` eligible rows by finite cosine and the top ``n_lex`` by
    lexical score > 0, each best first (as :func:`memofs.ranking.pools.top_rows`), and whether any eligible row has
    a finite cosine / a positive lexical score.

    Rows go block by block: a branch-free count of the values that reach each pool's entry
    threshold (which the compiler vectorises) skips most blocks once the pools are full;
    the rest are offered row by row."""
    n = cosine.size
    vh = np.empty(max(0, min(n_vec, n)))
    vk = np.empty(vh.size, dtype=np.int64)
    vr = np.empty(vh.size, dtype=np.int64)
    lh = np.empty(max(0, min(n_lex, n)))
    lk = np.empty(lh.size, dtype=np.int64)
    lr = np.empty(lh.size, dtype=np.int64)
    vs = 0
    ls = 0
    # entry thresholds: a full pool's worst value (nothing below it enters); NaN, which
    # nothing reaches, once a path without a pool has answered its any_* question
    vthr = -np.inf
    lthr = 5e-324  # the least positive double: lexical > 0
    any_vec = False
    any_lex = False
    for start in range(0, n, _BLOCK):
        end = min(start + _BLOCK, n)
        hits = 0
        if vthr == vthr:
            for i in range(start, end):
                if cosine[i] >= vthr:
                    hits += 1
        if hits:
            vs, found = _pool_block(cosine, cosine, 1, 1.0, False, is_graph, include_graph, order_key, start, end, vh, vk, vr, vs)
            any_vec |= found
            vthr = _entry_threshold(vh, vs, any_vec, vthr)
        if mode == 0 or lthr != lthr:
            continue
        hits = 0
        if mode == 3:
            for i in range(start, end):
                if bm25[i] + boost * fuzzy[i] >= lthr:
                    hits += 1
        elif mode == 1:
            for i in range(start, end):
                if bm25[i] >= lthr:
                    hits += 1
        else:
            for i in range(start, end):
                if boost * fuzzy[i] >= lthr:
                    hits += 1
        if hits:
            ls, found = _pool_block(bm25, fuzzy, mode, boost, True, is_graph, include_graph, order_key, start, end, lh, lk, lr, ls)
            any_lex |= found
            lthr = _entry_threshold(lh, ls, any_lex, lthr)
    return _drain(vh, vk, vr, vs), _drain(lh, lk, lr, ls), any_vec, any_lex


@njit(cache=True)
def _union(vec_top, lex_top, bm25, fuzzy, mode, boost):  # pragma: no cover - compiled
    """Ascending union of two row sets, membership flags, and the rows' lexical scores."""
    codes = np.empty(vec_top.size + lex_top.size, dtype=np.int64)
    for j in range(vec_top.size):
        codes[j] = vec_top[j] * 2
    for j in range(lex_top.size):
        codes[vec_top.size + j] = lex_top[j] * 2 + 1
    codes.sort()
    rows = np.empty(codes.size, dtype=np.int64)
    in_vec = np.zeros(codes.size, dtype=np.bool_)
    in_lex = np.zeros(codes.size, dtype=np.bool_)
    m = -1
    for j in range(codes.size):
        r = codes[j] >> 1
        if m < 0 or rows[m] != r:
            m += 1
            rows[m] = r
        if codes[j] & 1:
            in_lex[m] = True
        else:
            in_vec[m] = True
    m += 1
    lex = np.empty(m)
    for j in range(m):
        lex[j] = _lex_at(bm25, fuzzy, rows[j], mode, boost)
    return rows[:m].copy(), in_vec[:m].copy(), in_lex[:m].copy(), lex


@njit(cache=True)
def select(cosine, bm25, fuzzy, is_graph, order_key, mode, boost, include_graph, n_vec, n_lex):  # pragma: no cover - compiled
    vec_top, lex_top, any_vec, any_lex = scan(cosine, bm25, fuzzy, is_graph, order_key, mode, boost, include_graph, n_vec, n_lex)
    rows, in_vec, in_lex, lex = _union(vec_top, lex_top, bm25, fuzzy, mode, boost)
    return rows, in_vec, in_lex, lex, vec_top.size, lex_top.size, any_vec, any_lex
