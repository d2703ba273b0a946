"""Recombine cached signal frames into ranked runs with the pipeline's own ``fuse``.

A ranked run is ``{query_id: [doc ids, best first]}``. ``fuse`` already orders by score
then id, so the order *is* the tie-broken order; ranx gets strictly decreasing scores
derived from the rank (``depth + 1 - rank``), so ranx's order equals ours exactly.
Configs fan out over a fork-based process pool: workers inherit the frames instead of
receiving pickled copies.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Mapping, Sequence

from tqdm.auto import tqdm

from memofs.config import RecallConfig
from memofs.fusion import fuse
from memofs.signals import SignalFrame

Ranked = dict[str, list[str]]
_FRAMES: dict[tuple, dict[str, SignalFrame]] = {}  # set before the pool forks
_JOBS: list[tuple[str, tuple, RecallConfig]] = []


def fused_run(frames: Mapping[str, SignalFrame], cfg: RecallConfig, k: int) -> Ranked:
    """Top ``k`` ids per query, exactly as ``Recaller.recall`` would rank them."""
    out: Ranked = {}
    for qid, frame in frames.items():
        fused = fuse(frame, cfg, k)
        out[qid] = [frame.ids[i] for i in fused.rows.tolist()]
    return out


def fused_scores(frames: Mapping[str, SignalFrame], cfg: RecallConfig, k: int) -> dict[str, list[tuple[str, float]]]:
    """Like :func:`fused_run` with the pipeline's rounded scores kept (for tests and explain)."""
    out = {}
    for qid, frame in frames.items():
        fused = fuse(frame, cfg, k)
        out[qid] = [(frame.ids[i], float(s)) for i, s in zip(fused.rows.tolist(), fused.scores.tolist(), strict=True)]
    return out


def _work(job: int) -> tuple[int, Ranked]:
    name, group, cfg = _JOBS[job]
    return job, fused_run(_FRAMES[group], cfg, cfg.top_k)


def run_all(jobs: Sequence[tuple[str, tuple, RecallConfig]], frames: Mapping[tuple, dict[str, SignalFrame]],
            workers: int = 2, progress: bool = False, desc: str = "configs") -> dict[str, Ranked]:
    """Ranked runs for ``jobs`` = (name, frame group, config); depth = ``config.top_k``.
    Results are identical for any worker count (each job is computed whole by one process)."""
    global _FRAMES, _JOBS
    _FRAMES, _JOBS = dict(frames), list(jobs)
    results: dict[int, Ranked] = {}
    bar = tqdm(total=len(jobs), desc=desc, disable=not progress, leave=False)
    try:
        use_pool = workers > 1 and len(jobs) > 1 and "fork" in mp.get_all_start_methods() and os.name == "posix"
        if use_pool:
            with mp.get_context("fork").Pool(min(workers, len(jobs))) as pool:
                for i, ranked in pool.imap_unordered(_work, range(len(jobs)), chunksize=max(1, len(jobs) // (8 * workers))):
                    results[i] = ranked
                    bar.update(1)
        else:
            for i in range(len(jobs)):
                results[i] = _work(i)[1]
                bar.update(1)
    finally:
        bar.close()
        _FRAMES, _JOBS = {}, []
    return {jobs[i][0]: results[i] for i in range(len(jobs))}


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
