"""Peer baselines on identical inputs: bm25s BM25 alone, dense (MiniLM cosine) alone, and
ranx's fusion methods over exactly those two runs.

* BM25: ``bm25s`` with ``method="lucene"`` and the pipeline's k1/b, over the pipeline's
  own tokens (``memofs.text.tokenize.tokenize``), one index per scope corpus; docs scoring 0
  are not retrieved.
* rank_bm25: the field's BM25 (LongMemEval's ``flat-bm25``): ``rank_bm25.BM25Okapi`` with its
  defaults (k1 1.5, b 0.75, epsilon 0.25) on ``text.split(" ")`` tokens of the documents and
  the query, one index per scope corpus. Under a LongMemEval protocol preset the whole corpus
  is ranked, as ``np.argsort`` ranks it there (zero scores included); elsewhere its top ``k``.
  Ties by id rather than argsort's arbitrary order.
* dense: cos(q, d) = q . d over unit vectors from the embedding cache (same vectors as
  the pipeline), top ``k``.
* fusion (ranx ``fuse``, min-max normalised): RRF, CombSUM (``sum``), CombMNZ (``mnz``),
  weighted sum ``wsum:<dense weight>``; ``:tuned`` = ranx ``optimize_fusion`` fitted on
  each fold's training queries only (the tune split, or CV folds without a split).
Every output is tie-broken by id before it reaches the metrics.

A peer's name states its inputs: ``baseline:<method>@<query>``, ``query`` = ``raw`` (the
query as asked) or ``rewritten`` (the pipeline's rewritten text, the frames'
``query_text``); the candidates are always the two top-``k`` runs above over the query's
scope corpus. ``memofs-eval run`` and the learned-fusion study both call
:func:`baseline_runs`, so one name is one number in every report.
"""

from __future__ import annotations

import contextlib
import io
from collections import defaultdict
from collections.abc import Mapping, Sequence

import memofs_eval._env  # noqa: F401
import numpy as np
from ranx import Qrels, Run, fuse, optimize_fusion

from memofs.text.tokenize import tokenize
from memofs_datasets.protocols import PROTOCOLS

from memofs_eval.inputs.data import EvalData
from memofs_eval.runs.embed import CachedEmbedder, embedding_cache, make_embedder
from memofs_eval.runs.runner import Ranked, rank_scores

Scored = dict[str, dict[str, float]]
Top = dict[str, list[tuple[str, float]]]  # query -> (id, score) best first, tie-broken by id
RANX_METHOD = {"rrf": "rrf", "combsum": "sum", "combmnz": "mnz", "wsum": "wsum"}
TUNABLE = ("rrf", "wsum")
QUERY_TEXTS = ("raw", "rewritten")
WHOLE_RANKING_FAMILIES = ("official", "lenient")  # protocols whose published code ranks every document


def peer_label(method: str, query: str) -> str:
    """``baseline:<method>@<query>``: the name says which query text the peer ran on."""
    if query not in QUERY_TEXTS:
        raise ValueError(f"peer query text {query!r}: expected one of {', '.join(QUERY_TEXTS)}")
    return f"baseline:{method}@{query}"


def _scopes(data: EvalData):
    """Each scope's corpus with its queries, scopes in a fixed order (one index per corpus)."""
    by_scope: dict[str | None, list] = defaultdict(list)
    for q in data.queries:
        by_scope[q.scope].append(q)
    for scope in sorted(by_scope, key=lambda s: (s is not None, s or "")):
        yield data.dataset.corpus_for(by_scope[scope][0]), by_scope[scope]


def bm25_scores(data: EvalData, query_texts: Mapping[str, str], k: int, k1: float, b: float) -> Scored:
    """bm25s Lucene BM25 scores of the top ``k`` (score > 0) per query."""
    import bm25s

    out: Scored = {}
    for corpus, queries in _scopes(data):
        ids = [m.id for m in corpus]
        retriever = bm25s.BM25(method="lucene", k1=k1, b=b)
        # bm25s cannot index an all-empty corpus; an empty document gets a token no query has
        retriever.index([tokenize(m.text) or ["\x00"] for m in corpus], show_progress=False)
        for q in queries:
            toks = tokenize(query_texts[q.id])
            scores = np.asarray(retriever.get_scores(toks), dtype=np.float64) if toks else np.zeros(len(ids))
            hits = {ids[i]: float(s) for i, s in enumerate(scores) if s > 0}
            out[q.id] = {d: hits[d] for d in rank_scores(hits, k)}
    return out


def rank_bm25_scores(data: EvalData, query_texts: Mapping[str, str]) -> Scored:
    """``rank_bm25.BM25Okapi`` scores of every document of each query's scope corpus."""
    from rank_bm25 import BM25Okapi

    out: Scored = {}
    for corpus, queries in _scopes(data):
        index = BM25Okapi([m.text.split(" ") for m in corpus])
        for q in queries:
            scores = index.get_scores(query_texts[q.id].split(" "))
            out[q.id] = {m.id: float(v) for m, v in zip(corpus, scores, strict=True)}
    return out


def dense_scores(data: EvalData, query_texts: Mapping[str, str], k: int, embedder: str, cache_root) -> Scored:
    """Cosine of unit vectors, top ``k`` per query (empty when there is no embedder)."""
    inner = make_embedder(embedder, [m.text for m in data.dataset.memories])
    if inner is None:
        return {q.id: {} for q in data.queries}
    emb = CachedEmbedder(inner, embedding_cache(cache_root))
    emb.warm([m.text for m in data.dataset.memories] + [query_texts[q.id] for q in data.queries])
    out: Scored = {}
    matrices: dict[str | None, np.ndarray] = {}  # one corpus matrix per scope
    for q in data.queries:
        corpus = data.dataset.corpus_for(q)
        if q.scope not in matrices:
            matrices[q.scope] = emb.encode([m.text for m in corpus]).astype(np.float64)
        vecs = matrices[q.scope]
        qv = emb.encode([query_texts[q.id]])[0].astype(np.float64)
        cos = vecs @ qv
        scores = {m.id: float(c) for m, c in zip(corpus, cos, strict=True)}
        out[q.id] = {d: scores[d] for d in rank_scores(scores, k)}
    return out


def _top(scored: Mapping[str, Mapping[str, float]], qids: Sequence[str], k: int) -> Top:
    """Each query's top ``k`` with scores, in the pipeline's order (:func:`rank_scores`)."""
    out: Top = {}
    for q in qids:
        s = scored.get(q, {})
        out[q] = [(d, float(s[d])) for d in rank_scores(s, k)]
    return out


def top_ids(top: Top) -> Ranked:
    """The ids of a scored run (what the metrics read)."""
    return {q: [d for d, _ in pairs] for q, pairs in top.items()}


_EMPTY = "\x00empty"  # stands in for a run's empty result list; never a memory id


def _runs(bm25: Scored, dense: Scored, qids: Sequence[str]) -> list[Run]:
    """Both runs as ranx ``Run``s. ranx cannot build a run without any document (no
    embedder, an empty corpus): its queries then get a placeholder, dropped after fusion
    (a run with some documents goes in unchanged)."""
    def run(scored: Scored, name: str) -> Run:
        docs = {q: dict(scored.get(q, {})) for q in qids}
        if not any(docs.values()):
            docs = {q: {_EMPTY: 0.0} for q in qids}
        return Run(docs, name=name)

    return [run(bm25, "bm25"), run(dense, "dense")]


def fused(method: str, bm25: Scored, dense: Scored, qids: Sequence[str], k: int, params: dict | None = None) -> Ranked:
    """ranx fusion of the two runs for ``qids``, min-max normalised, tie-broken by id."""
    return top_ids(_fused_top(method, bm25, dense, qids, k, params))


def _fused_top(method: str, bm25: Scored, dense: Scored, qids: Sequence[str], k: int, params: dict | None = None) -> Top:
    if not qids:
        return {}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        run = fuse(_runs(bm25, dense, qids), norm="min-max", method=RANX_METHOD[method], params=params)
    scores = {q: {d: v for d, v in docs.items() if d != _EMPTY} for q, docs in run.to_dict().items()}
    return _top(scores, qids, k)


def tuned_params(method: str, bm25: Scored, dense: Scored, judged: Mapping[str, Mapping[str, int]], metric: str) -> dict:
    """ranx ``optimize_fusion`` on the training queries ``judged`` only."""
    qids = sorted(judged)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        params = optimize_fusion(Qrels({q: dict(judged[q]) for q in qids}), _runs(bm25, dense, qids),
                                 norm="min-max", method=RANX_METHOD[method], metric=metric)
    return {k: (tuple(float(x) for x in v) if isinstance(v, (tuple, list)) else (float(v) if isinstance(v, (np.floating, float)) else v)) for k, v in params.items()}


def baseline_runs(data: EvalData, methods: Sequence[str], query: str, query_texts: Mapping[str, str], k: int, k1: float, b: float,
                  embedder: str, cache_root, folds: Sequence[tuple[list[str], list[str]]], metric: str) -> tuple[dict[str, Ranked], dict[str, object]]:
    """Ranked runs per peer name (:func:`peer_label` of ``method`` and ``query``, the kind
    of text ``query_texts`` holds) and the tuned parameters per fold (``:tuned``: fitted on
    each fold's training queries, scored on its test queries only)."""
    tops, params = baseline_scores(data, methods, query, query_texts, k, k1, b, embedder, cache_root, folds, metric)
    return {label: top_ids(top) for label, top in tops.items()}, params


def baseline_scores(data: EvalData, methods: Sequence[str], query: str, query_texts: Mapping[str, str], k: int, k1: float, b: float,
                    embedder: str, cache_root, folds: Sequence[tuple[list[str], list[str]]], metric: str) -> tuple[dict[str, Top], dict[str, object]]:
    """:func:`baseline_runs` with each ranked id's score kept (for tie rates)."""
    bm25 = bm25_scores(data, query_texts, k, k1, b)
    dense = dense_scores(data, query_texts, k, embedder, cache_root)
    qids = [q.id for q in data.queries]
    runs: dict[str, Top] = {}
    params_used: dict[str, object] = {}
    for m in methods:
        name, _, param = m.partition(":")
        label = peer_label(m, query)
        if name == "bm25s":
            runs[label] = _top(bm25, qids, k)
        elif name == "rank_bm25":
            field = rank_bm25_scores(data, query_texts)
            # LongMemEval's code ranks the whole haystack (its turn2session grows k past any cutoff);
            # elsewhere the peer returns its top k like the others (LoCoMo's corpora, TREC run files)
            whole = PROTOCOLS[data.protocol].family in WHOLE_RANKING_FAMILIES
            runs[label] = _top(field, qids, max((len(v) for v in field.values()), default=k) if whole else k)
        elif name == "dense":
            runs[label] = _top(dense, qids, k)
        elif param == "tuned" and name in TUNABLE:
            ranked: Top = {}
            fold_params = []
            for train, test in folds:
                p = tuned_params(name, bm25, dense, {q: data.qrels[q] for q in train}, metric)
                fold_params.append(p)
                ranked.update(_fused_top(name, bm25, dense, test, k, p))
            runs[label] = ranked
            params_used[label] = fold_params
        elif name == "wsum":
            w = float(param) if param else 0.6
            runs[label] = _fused_top(name, bm25, dense, qids, k, {"weights": (1.0 - w, w)})
            params_used[label] = {"weights": [1.0 - w, w], "order": ["bm25", "dense"]}
        else:
            runs[label] = _fused_top(name, bm25, dense, qids, k)
    return runs, params_used
