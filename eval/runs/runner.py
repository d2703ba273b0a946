"""Recombine cached signal frames into ranked runs with the pipeline's own ``fuse``.

A ranked run is ``{query_id: [doc ids, best first]}``. ``fuse`` already orders by score
then id, so the order *is* the tie-broken order; ranx gets strictly decreasing scores
derived from the rank (``depth + 1 - rank``), so ranx's order equals ours exactly.
Configs fan out over a fork-based process pool (workers inherit the frames instead of
receiving pickled copies), or over a Dask cluster (:mod:`memofs_eval.execution.executor`).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from tqdm.auto import tqdm

from memofs.ranking.config import RecallConfig
from memofs.ranking.fusion import fuse
from memofs.signals.frame import SignalFrame

from memofs_eval.execution.executor import Executor

log = logging.getLogger(__name__)

Ranked = dict[str, list[str]]
_FRAMES: dict[tuple, dict[str, SignalFrame]] = {}  # set before the pool forks
_JOBS: list[tuple[str, tuple, RecallConfig]] = []
_POST: Callable[[Ranked], Any] | None = None


def fused_run(frames: Mapping[str, SignalFrame], cfg: RecallConfig, k: int) -> Ranked:
    """Top ``k`` ids per query, exactly as ``Recaller.recall`` would rank them."""
    out: Ranked = {}
    for qid, frame in frames.items():
        fused = fuse(frame, cfg, k)
        out[qid] = [frame.ids[i] for i in fused.rows.tolist()]
    return out


def fused_scores(frames: Mapping[str, SignalFrame], cfg: RecallConfig, k: int) -> dict[str, list[tuple[str, float]]]:
    """Like :func:`fused_run` with the pipeline's rounded scores kept (tie rates, explain)."""
    out = {}
    for qid, frame in frames.items():
        fused = fuse(frame, cfg, k)
        out[qid] = [(frame.ids[i], float(s)) for i, s in zip(fused.rows.tolist(), fused.scores.tolist(), strict=True)]
    return out


def fuse_configs(frames: Mapping[str, SignalFrame], post: Callable[[Ranked], Any] | None,
                 configs: Sequence[RecallConfig]) -> list[tuple[Ranked, Any]]:
    """One recombination task: each config's ranked run (depth ``config.top_k``) and
    ``post(ranked)``. Both executors run every config through this function."""
    out = []
    for cfg in configs:
        ranked = fused_run(frames, cfg, cfg.top_k)
        out.append((ranked, post(ranked) if post is not None else None))
    return out


def _work(job: int) -> tuple[int, Ranked, Any]:
    name, group, cfg = _JOBS[job]
    ((ranked, extra),) = fuse_configs(_FRAMES[group], _POST, [cfg])
    return job, ranked, extra


def _run_on(executor: Executor, jobs: Sequence[tuple[str, tuple, RecallConfig]], frames: Mapping[tuple, Any],
            post: Callable[[Ranked], Any] | None, progress: bool, desc: str) -> dict[int, tuple[Ranked, Any]]:
    """Recombination sharded by config on ``executor``: ``frames`` are the executor's
    handles of each group's frames; jobs are cut into a few parts of configs per worker."""
    post_f = executor.value(post)
    results: dict[int, tuple[Ranked, Any]] = {}
    for group in dict.fromkeys(g for _, g, _ in jobs):
        idx = [i for i, (_, g, _) in enumerate(jobs) if g == group]
        size = max(1, len(idx) // (4 * max(1, executor.n_workers())))  # a few parts per worker: balance
        parts = [idx[a:a + size] for a in range(0, len(idx), size)]
        out = executor.map(fuse_configs, [tuple(jobs[i][2] for i in part) for part in parts], frames[group],
                           post_f, desc=desc, progress=progress, weight=len)
        for part, res in zip(parts, out, strict=True):
            results.update(zip(part, res, strict=True))
    return results


def run_all(jobs: Sequence[tuple[str, tuple, RecallConfig]], frames: Mapping[tuple, dict[str, SignalFrame]],
            workers: int = 2, progress: bool = False, desc: str = "configs",
            post: Callable[[Ranked], Any] | None = None,
            executor: Executor | None = None) -> tuple[dict[str, Ranked], dict[str, Any]]:
    """Ranked runs for ``jobs`` = (name, frame group, config), depth = ``config.top_k``, and
    ``post(ranked)`` per job computed in the same worker (e.g. its metrics). Results are
    identical for any worker count and executor: each job is computed whole by one process.
    A non-local ``executor`` (Dask) runs the jobs on its workers; ``frames`` then holds its
    handles (``executor.shared``: read from the signal cache). Else a local fork pool."""
    if executor is not None and executor.name != "local":
        res = _run_on(executor, jobs, frames, post, progress, desc)
        return ({jobs[i][0]: res[i][0] for i in range(len(jobs))}, {jobs[i][0]: res[i][1] for i in range(len(jobs))})
    global _FRAMES, _JOBS, _POST
    _FRAMES, _JOBS, _POST = dict(frames), list(jobs), post
    results: dict[int, tuple[Ranked, Any]] = {}
    bar = tqdm(total=len(jobs), desc=desc, disable=not progress, leave=False)
    try:
        use_pool = workers > 1 and len(jobs) > 1 and "fork" in mp.get_all_start_methods() and os.name == "posix"
        if use_pool:
            try:
                # an executor, unlike multiprocessing.Pool, reports a dead worker instead of hanging
                with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=mp.get_context("fork")) as ex:
                    for i, ranked, extra in ex.map(_work, range(len(jobs)), chunksize=max(1, len(jobs) // (8 * workers))):
                        results[i] = (ranked, extra)
                        bar.update(1)
            except BrokenProcessPool:
                # GNU OpenMP aborts a child forked after the parent used it (torch does, e.g.
                # once MiniLM has encoded in this process): finish the remaining jobs here
                log.warning("a recombination worker died (fork after OpenMP use?); finishing serially")
        for i in range(len(jobs)):
            if i not in results:
                results[i] = _work(i)[1:]
                bar.update(1)
    finally:
        bar.close()
        _FRAMES, _JOBS, _POST = {}, [], None
    return ({jobs[i][0]: results[i][0] for i in range(len(jobs))}, {jobs[i][0]: results[i][1] for i in range(len(jobs))})


def ranx_scores(ranked: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """``{qid: {doc: depth + 1 - rank}}``: strictly decreasing, so no ties reach ranx."""
    out = {}
    for qid, docs in ranked.items():
        n = len(docs)
        out[qid] = {d: float(n - r) for r, d in enumerate(docs)}
    return out


def rank_scores(scores: Mapping[str, float], k: int) -> list[str]:
    """Ids by score descending, ties by id ascending (the pipeline's rule), cut at ``k``."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
