"""Candidate pools: fusion's steps 1-3 (spec "Fusion"), shared by the fixed-weight fusion
(:mod:`memofs.ranking.fusion`) and the learned one (:mod:`memofs.ranking.learned`).

1. ``lexical = use_bm25 * bm25 + use_fuzzy * fuzzy_boost * fuzzy``
2. effective weights (``dynamic_weights``; see :mod:`memofs.ranking.fusion`)
3. top ``ceil(K * vector_pool_multiplier)`` rows by cosine and top
   ``ceil(K * lexical_pool_multiplier)`` by lexical (> 0), union by id, ties by id.
   Phrase-scan blocks of core.md / notes.md (``frame.is_phrase``; their lexical is the
   block score / 10, already cut to each file's top ``K*2``) join the lexical pool as
   upstream unions them, unless ``use_phrase_scan`` is off.

:func:`top_rows` is the reference selection (numpy, one pool at a time) and :func:`select`
builds both pools and their union with it; :func:`pools` runs that, or the same selection
compiled in one pass over the frame (:mod:`memofs.ranking.pool_kernel`) where
:func:`memofs.signals.kernels.compiled` says so; the two are tested equal, ties included.

The records here (:class:`Weights`, :class:`Fused`, :class:`Pools`) are what both fusions
return; the per-candidate terms they compute from a pool are :mod:`memofs.ranking.terms`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from memofs.ranking.config import RecallConfig
from memofs.signals import kernels
from memofs.signals.frame import SignalFrame


@dataclass(frozen=True)
class Weights:
    """The weights fusion actually used for one query, after dynamic weighting."""

    w_vec: float
    w_lex: float
    reason: str
    rerank_blend: float
    w_relevance: float
    w_recency: float
    w_confidence: float


@dataclass
class Fused:
    """Candidates of one query, fused. ``rows`` index the frame, best first, cut at K.

    ``candidate_parts`` holds per-candidate intermediate values in pool order and
    ``order`` the pool positions of ``rows``; :attr:`parts` (for explain) is built from
    them on first use, so the harness's recombination never pays for it.
    """

    rows: NDArray[np.int64]  # frame rows of the candidates, in final rank order
    scores: NDArray[np.float64]  # rounded final scores, same order
    weights: Weights
    candidate_parts: dict[str, NDArray]
    order: NDArray[np.int64]

    @cached_property
    def parts(self) -> dict[str, NDArray]:
        """Per-result intermediate values, aligned with ``rows``."""
        return {n: v[self.order] for n, v in self.candidate_parts.items()}

    def ids(self, frame: SignalFrame) -> list[str]:
        return [frame.ids[i] for i in self.rows.tolist()]


@dataclass(frozen=True)
class Pools:
    """The candidate pools of one query (spec "Fusion" step 3) and the weights behind them.

    Unpacks as ``rows, weights, lexical, member``. :attr:`lexical` (every frame row) is
    computed on first use: fusion only needs :attr:`row_lexical`, the pool's own.
    """

    rows: NDArray[np.int64]  # union of the pools, ascending frame rows
    weights: Weights
    member: dict[str, NDArray[np.bool_]]  # "vector_pool" / "lexical_pool", aligned with rows
    row_lexical: NDArray[np.float64]  # lexical score of each of ``rows`` (== lexical[rows])
    frame: SignalFrame = field(repr=False, compare=False)
    cfg: RecallConfig = field(repr=False, compare=False)

    @cached_property
    def lexical(self) -> NDArray[np.float64]:
        """Lexical score of every frame row (step 1)."""
        return lexical_score(self.frame, self.cfg)

    def __iter__(self):  # rows, weights, lexical, member = pools(...)
        return iter((self.rows, self.weights, self.lexical, self.member))


# which of bm25 and fuzzy the lexical score sums (pool_kernel's mode codes)
_LEX_NONE, _LEX_BM25, _LEX_FUZZY, _LEX_BOTH = 0, 1, 2, 3


def _lex_mode(cfg: RecallConfig) -> int:
    return (_LEX_BM25 if cfg.use_bm25 else 0) | (_LEX_FUZZY if cfg.use_fuzzy else 0)


def lexical_values(bm25: NDArray[np.float64], fuzzy: NDArray[np.float64], mode: int, boost: float) -> NDArray[np.float64]:
    """Step 1 for a lexical mode (:func:`_lex_mode`): ``bm25 + boost * fuzzy``, ``bm25``,
    ``boost * fuzzy`` or zeros (a new array)."""
    if mode == _LEX_BOTH:
        return bm25 + boost * fuzzy
    if mode == _LEX_BM25:
        return bm25.astype(np.float64, copy=True)
    if mode == _LEX_FUZZY:
        return boost * fuzzy
    return np.zeros(len(bm25))


def lexical_score(frame: SignalFrame, cfg: RecallConfig) -> NDArray[np.float64]:
    """``use_bm25 * bm25 + use_fuzzy * fuzzy_boost * fuzzy`` (step 1)."""
    return lexical_values(frame.bm25, frame.fuzzy, _lex_mode(cfg), cfg.fuzzy_boost)


def _weights(frame: SignalFrame, cfg: RecallConfig, any_vec: bool, any_lex: bool) -> tuple[float, float, str]:
    # any_vec / any_lex: some eligible row has a finite cosine / a positive lexical score
    vector_usable = cfg.use_vector and frame.vector_ok and cfg.w_vec > 0 and any_vec
    lexical_usable = (cfg.use_bm25 or (cfg.use_fuzzy and cfg.fuzzy_boost > 0)) and cfg.w_vec < 1
    lexical_hits = lexical_usable and any_lex
    if not cfg.dynamic_weights:
        wv = cfg.w_vec if vector_usable else 0.0
        wl = (1.0 - cfg.w_vec) if lexical_usable else 0.0
        return wv, wl, "fixed"
    if not vector_usable and not lexical_hits:
        return 0.0, 0.0, "no vector path and no lexical hit: no candidates"
    if not vector_usable:
        return 0.0, 1.0, "vector path unavailable: lexical only"
    if not lexical_hits:
        return 1.0, 0.0, "no lexical hit: vectors only"
    return cfg.w_vec, 1.0 - cfg.w_vec, "default split"


def top_rows(values: NDArray[np.float64], mask: NDArray[np.bool_], order_key: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    """The ``n`` masked rows with the largest values, ties by ``order_key`` (id order).
    Masked-in values must not be NaN. The reference form of the compiled selection, which is tested equal to it."""
    count = int(np.count_nonzero(mask))
    if count == 0 or n <= 0:
        return np.zeros(0, dtype=np.int64)
    if count == mask.size:  # every row (the usual vector pool): no gather
        rows, v = None, values
    else:
        rows = np.flatnonzero(mask)
        v = values[rows]
    if count > n:
        kth = np.partition(v, v.size - n)[v.size - n]  # the n-th largest masked value
        # keep every row tied with it, so the id tie-break below is exact
        keep = np.flatnonzero(v >= kth)
        rows = keep if rows is None else rows[keep]
    elif rows is None:
        rows = np.arange(count)
    return rows[np.lexsort((order_key[rows], -values[rows]))][:n]


# --- pool selection (steps 1-3) -------------------------------------------------------


def select(cosine: NDArray[np.float64], bm25: NDArray[np.float64], fuzzy: NDArray[np.float64], excluded: NDArray[np.bool_],
           order_key: NDArray[np.int64], mode: int, boost: float, include_graph: bool, n_vec: int, n_lex: int
           ) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], NDArray[np.float64], int, int, bool, bool]:
    """The two pools and their union, in numpy (the reference of
    :func:`memofs.ranking.pool_kernel.select`, which returns the same tuple):
    ``(rows, in_vec, in_lex, lexical of rows, vector pool size, lexical pool size,
    any eligible finite cosine, any eligible lexical > 0)``. Rows are eligible unless
    ``excluded`` (unless ``include_graph``); the vector pool takes finite cosines, the
    lexical pool scores > 0 under ``mode``."""
    eligible = np.ones(cosine.size, dtype=bool) if include_graph else ~excluded
    vec_ok = eligible & np.isfinite(cosine)
    vec_top = top_rows(cosine, vec_ok, order_key, n_vec)
    lex = lexical_values(bm25, fuzzy, mode, boost)
    if mode == _LEX_NONE:
        lex_top, any_lex = np.zeros(0, dtype=np.int64), False
    else:
        lex_ok = eligible & (lex > 0)
        lex_top, any_lex = top_rows(lex, lex_ok, order_key, n_lex), bool(lex_ok.any())
    rows = np.union1d(vec_top, lex_top).astype(np.int64, copy=False)
    return (rows, np.isin(rows, vec_top), np.isin(rows, lex_top), lex[rows], int(vec_top.size), int(lex_top.size),
            bool(vec_ok.any()), any_lex)


def pools(frame: SignalFrame, cfg: RecallConfig, k: int) -> Pools:
    """Candidate rows (union of the pools), the weights, and the lexical scores (steps 1-3).

    Unpacks as ``rows, weights, lexical, member``.
    """
    # A pool can only get weight when it does with both paths hit (_weights is monotone in
    # its hit flags), so pools not even then possible are not built; any that was built
    # and then gets weight 0 is dropped below.
    wv_max, wl_max, _ = _weights(frame, cfg, True, True)
    n_vec = math.ceil(k * cfg.vector_pool_multiplier) if wv_max > 0 else 0
    n_lex = math.ceil(k * cfg.lexical_pool_multiplier) if wl_max > 0 else 0
    mode = _lex_mode(cfg)
    # rows the selection skips: graph documents (unless include_graph_docs) and
    # phrase-scan blocks, which are candidates of their own (upstream unions its BM25 top
    # K*2 with each file's top K*2 blocks, already cut by the scan), added below
    excluded, include_graph = frame.is_graph, bool(cfg.include_graph_docs)
    blocks = np.zeros(0, dtype=np.int64)
    if frame.is_phrase.any():
        excluded = (frame.is_graph & (not include_graph)) | frame.is_phrase
        include_graph = False
        if cfg.use_phrase_scan and n_lex > 0:
            blocks = np.flatnonzero(frame.is_phrase)
    if kernels.compiled():
        from memofs.ranking.pool_kernel import select as run
    else:
        run = select
    rows, in_vec, in_lex, lex, got_vec, got_lex, any_vec, any_lex = run(
        frame.cosine, frame.bm25, frame.fuzzy, excluded, frame.order_key,
        mode, float(cfg.fuzzy_boost), include_graph, max(n_vec, 0), max(n_lex, 0),
    )
    if blocks.size:  # blocks follow every corpus row, so the union stays ascending
        rows = np.concatenate([rows, blocks])
        in_vec = np.concatenate([in_vec, np.zeros(blocks.size, dtype=bool)])
        in_lex = np.concatenate([in_lex, np.ones(blocks.size, dtype=bool)])
        lex = np.concatenate([lex, frame.bm25[blocks]])  # the block score / 10
        got_lex, any_lex = got_lex + blocks.size, True
    wv, wl, reason = _weights(frame, cfg, any_vec, any_lex)
    if (got_vec and not wv > 0) or (got_lex and not wl > 0):
        in_vec &= wv > 0
        in_lex &= wl > 0
        keep = in_vec | in_lex
        rows, in_vec, in_lex, lex = rows[keep], in_vec[keep], in_lex[keep], lex[keep]
    blend = cfg.rerank_blend if (cfg.use_reranker and frame.rerank_ok) else 0.0
    weights = Weights(
        w_vec=wv,
        w_lex=wl,
        reason=reason,
        rerank_blend=blend,
        w_relevance=cfg.w_relevance,
        w_recency=cfg.w_recency if cfg.use_recency else 0.0,
        w_confidence=cfg.w_confidence if cfg.use_confidence else 0.0,
    )
    return Pools(rows, weights, {"vector_pool": in_vec, "lexical_pool": in_lex}, lex, frame, cfg)

