"""ranx metrics per query, and the tables built from them.

Runs reach ranx with ties already broken by id (see :mod:`memofs_eval.runs.runner`), so
ranx's numbers equal trec_eval's. ranx 0.3.21 raises ``KeyError`` for a single metric
with a cutoff when ``return_mean=False``, so metrics are always requested as a list of
at least two (a duplicate is added and dropped when only one is wanted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import memofs_eval._env  # noqa: F401  (NUMBA_CACHE_DIR before ranx)
import numpy as np
import pandas as pd
from ranx import Qrels, Run, evaluate

from memofs_eval.runs.runner import ranx_scores

PAD_METRIC = "hits@1"


_LAST_QRELS: list[tuple[Mapping[str, Mapping[str, int]], Qrels]] = []


def qrels(judged: Mapping[str, Mapping[str, int]]) -> Qrels:
    return Qrels({q: dict(d) for q, d in judged.items()})


def _qrels_of(judged: Mapping[str, Mapping[str, int]]) -> Qrels:
    """:func:`qrels`, reused while the same judgement object comes back: a sweep scores
    hundreds of runs against one qrels, and building ranx's typed dicts costs as much as
    the evaluation itself. Keeping a reference makes the identity check safe."""
    if _LAST_QRELS and _LAST_QRELS[0][0] is judged:
        return _LAST_QRELS[0][1]
    q = qrels(judged)
    _LAST_QRELS[:] = [(judged, q)]
    return q


def ranx_run(ranked: Mapping[str, Sequence[str]], name: str | None = None) -> Run:
    """A ranx Run of ranked id lists; queries with no result are left out (ranx scores
    them 0 through ``make_comparable``)."""
    scores = {q: s for q, s in ranx_scores(ranked).items() if s}
    run = Run(scores, name=name) if scores else Run({"__empty__": {"__none__": 1.0}}, name=name)
    return run


def per_query(judged: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]], metrics: Sequence[str]) -> pd.DataFrame:
    """Per-query values, index = query id (the judged queries), one column per metric."""
    metrics = list(dict.fromkeys(metrics))
    if not all(judged.values()):
        # a protocol that keeps questions without gold (memofs_datasets.protocols): ranx's
        # metrics are undefined there (NaN, not counted); the protocol's measures score them
        graded = {q: j for q, j in judged.items() if j}
        df = per_query(graded, ranked, metrics)
        return df.reindex(sorted(judged)).rename_axis("query")
    if not judged:
        return pd.DataFrame(columns=metrics, dtype=float)
    asked = metrics if len(metrics) > 1 else metrics + [PAD_METRIC if metrics[0] != PAD_METRIC else "precision@1"]
    q = _qrels_of(judged)
    sub = {qid: ranked.get(qid, []) for qid in judged}
    # ranx's make_comparable (add the queries a run lacks, scored 0) probes a typed dict
    # per query, a quarter of the cost of a sweep: only ask for it when a query is missing
    complete = all(sub.values())
    out = evaluate(q, ranx_run(sub), asked, return_mean=False, make_comparable=not complete)
    order = list(q.keys())  # ranx's per-query arrays follow the qrels' (sorted) key order
    df = pd.DataFrame({m: np.asarray(out[m], dtype=np.float64) for m in metrics}, index=pd.Index(order, name="query"))
    return df


def means(df: pd.DataFrame) -> dict[str, float]:
    return {m: float(df[m].mean()) if len(df) else float("nan") for m in df.columns}


def trec_name(metric: str) -> str:
    """trec_eval's measure name for a ranx metric (used by the pytrec_eval test)."""
    name, _, cut = metric.partition("@")
    table = {"ndcg": "ndcg_cut_", "recall": "recall_", "precision": "P_", "map": "map_cut_"}
    if name == "mrr":
        return "recip_rank"
    return f"{table[name]}{cut}"
