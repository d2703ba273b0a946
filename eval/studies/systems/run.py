"""One system through one dataset: ``reset``, ``open``, then per scope ``ingest`` its corpus
and ``recall`` each of its queries (the harness's scopes: :meth:`Dataset.corpus_for`).

Every call is timed and guarded: an exception, a call past ``timeout`` seconds, or an answer
naming ids outside the query's corpus is recorded against the query (``failures``) and the
run goes on; such a query is scored on an empty list (or on its known ids only), so a
failing system loses on it instead of vanishing from the paired tests. A scope whose
ingest failed has all its queries failed. A hung call is abandoned in its thread.
"""

from __future__ import annotations

import dataclasses
import resource
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memofs_datasets.format import Dataset

from memofs_eval.inputs.data import EvalData
from memofs_eval.studies.systems import embedding
from memofs_eval.studies.systems.base import UNSCOPED, Ask, Recalled, System

DEFAULT_TIMEOUT_S = 60.0


class CallTimeout(Exception):
    pass


@dataclass
class SystemRun:
    """What one system did on one dataset."""

    system: str
    dataset: str
    ranked: dict[str, list[str]]  # query -> known ids, best first
    scored: dict[str, list[tuple[str, float]]]  # query -> (id, score) when the system gave scores
    failures: dict[str, str]  # query -> one line: error, timeout or unknown ids
    ingest_s: float = 0.0
    recall_s: list[float] = field(default_factory=list)
    n_memories: int = 0
    index_bytes: int | None = None
    peak_rss_bytes: int | None = None
    asked: tuple[str, ...] | None = None  # the queries it was asked when it ran on a sample of scopes; None: all
    scopes: str = ""  # "5 of 59 scopes (seed 42)" for a sampled run
    embed_hits: int = 0  # texts the harness's embedding cache answered for this system
    embed_misses: int = 0  # texts it had to encode

    def efficiency(self) -> dict[str, Any]:
        lat = np.asarray(self.recall_s, dtype=np.float64)
        per_mem = (self.index_bytes / self.n_memories) if self.index_bytes is not None and self.n_memories else None
        return {"system": self.system, "dataset": self.dataset, "ingest_s": round(self.ingest_s, 3),
                "recall_p50_ms": round(float(np.percentile(lat, 50)) * 1e3, 2) if lat.size else float("nan"),
                "recall_p95_ms": round(float(np.percentile(lat, 95)) * 1e3, 2) if lat.size else float("nan"),
                "index_bytes_per_memory": None if per_mem is None else round(per_mem, 1),
                "peak_rss_mb": None if self.peak_rss_bytes is None else round(self.peak_rss_bytes / 2**20, 1),
                "n_failed": len(self.failures),
                "embed_cache_hit_rate": (round(self.embed_hits / (self.embed_hits + self.embed_misses), 4)
                                         if self.embed_hits + self.embed_misses else None),
                "embed_texts": self.embed_hits + self.embed_misses,
                "scopes": self.scopes or "all"}


def guarded(fn: Callable[..., Any], timeout: float, *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` in a daemon thread: (result, seconds); raises its exception, or
    :class:`CallTimeout` after ``timeout`` seconds (the thread is abandoned)."""
    box: dict[str, Any] = {}

    def target() -> None:
        t0 = time.perf_counter()
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 (a system's fault is reported, never raised here)
            box["error"] = exc
        box["seconds"] = time.perf_counter() - t0

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise CallTimeout(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"], box["seconds"]


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def peak_rss_bytes() -> int:
    """This process's peak resident set size (ru_maxrss is KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def sample_scopes(data: EvalData, n: int | None, seed: int) -> list[str | None]:
    """The scopes a system is run on: every one (``n`` None or at least their number), else
    ``n`` drawn without replacement by ``numpy.random.default_rng(seed)`` from the sorted
    scopes (the same draw for every system with the same ``n``), in sorted order."""
    scopes = sorted({q.scope for q in data.queries}, key=lambda s: (s is not None, s or ""))
    if n is None or n >= len(scopes):
        return scopes
    picked = np.random.default_rng(seed).choice(len(scopes), size=n, replace=False)
    return [scopes[i] for i in sorted(picked)]


def restrict(dataset: Dataset, scopes: list[str | None]) -> Dataset:
    """``dataset`` with only the queries of ``scopes`` and their scopes' memories (so a
    system warms and ingests no more than it is asked about)."""
    keep = set(scopes)
    queries = tuple(q for q in dataset.queries if q.scope in keep)
    if None in keep:
        memories = dataset.memories
    else:
        memories = tuple(m for m in dataset.memories if m.namespace in keep)
    qids = {q.id for q in queries}
    return dataclasses.replace(dataset, memories=memories, queries=queries,
                               qrels={q: j for q, j in dataset.qrels.items() if q in qids})


def run_system(system: System, data: EvalData, k: int, timeout: float = DEFAULT_TIMEOUT_S,
               scopes: int | None = None, seed: int = 0) -> SystemRun:
    """Put ``system`` through ``data``'s judged queries at depth ``k``; ``scopes``: only a
    seeded sample of that many scopes (:func:`sample_scopes`)."""
    run = SystemRun(system.name, data.name, {}, {}, {})
    chosen = sample_scopes(data, scopes, seed)
    n_all = len({q.scope for q in data.queries})
    dataset = data.dataset
    if len(chosen) < n_all:
        dataset = restrict(data.dataset, chosen)
        run.scopes = f"{len(chosen)} of {n_all} scopes (seed {seed})"
        run.asked = tuple(q.id for q in data.queries if q.scope in set(chosen))
    by_scope: dict[str | None, list] = defaultdict(list)
    for q in data.queries:
        if q.scope in chosen:
            by_scope[q.scope].append(q)
    before = embedding.cache_stats()
    try:
        guarded(system.reset, timeout)
        guarded(system.open, timeout * 10, dataset)  # open warms the embedding cache: a batch, not a call
    except BaseException as exc:  # noqa: BLE001
        return _all_failed(system.name, data, f"could not open: {_line(exc)}")
    for scope in sorted(by_scope, key=lambda s: (s is not None, s or "")):
        queries = by_scope[scope]
        corpus = dataset.corpus_for(queries[0])
        known = {m.id for m in corpus}
        name = UNSCOPED if scope is None else scope
        try:
            _, secs = guarded(system.ingest, timeout * max(1, len(corpus) // 100 + 1), name, corpus)
            run.ingest_s += secs
            run.n_memories += len(corpus)
        except BaseException as exc:  # noqa: BLE001
            for q in queries:
                run.ranked[q.id] = []
                run.failures[q.id] = f"ingest of scope {name!r} failed: {_line(exc)}"
            continue
        for q in queries:
            ask = Ask(q.id, q.text, q.task_type, dataset.now_for(q))
            try:
                got, secs = guarded(system.recall, timeout, name, ask, k)
                run.recall_s.append(secs)
                if not isinstance(got, Recalled):
                    raise TypeError(f"recall returned {type(got).__name__}, not Recalled")
            except BaseException as exc:  # noqa: BLE001
                run.ranked[q.id] = []
                run.failures[q.id] = _line(exc)
                continue
            ids = [str(i) for i in got.ids][:k]
            ok = [i in known or i.startswith(system.extra_id_prefixes or ("\x00",)) for i in ids]
            unknown = [i for i, good in zip(ids, ok) if not good]
            if unknown:
                run.failures[q.id] = f"{len(unknown)} unknown id(s), e.g. {unknown[0]!r}"
            keep = [j for j, i in enumerate(ids) if ok[j] and i not in ids[:j]]
            run.ranked[q.id] = [ids[j] for j in keep]
            if got.scores is not None and len(got.scores) >= len(ids):
                run.scored[q.id] = [(ids[j], float(got.scores[j])) for j in keep]
    try:
        run.index_bytes = guarded(system.index_bytes, timeout)[0]
    except BaseException:  # noqa: BLE001
        run.index_bytes = None
    run.peak_rss_bytes = peak_rss_bytes()
    after = embedding.cache_stats()
    run.embed_hits, run.embed_misses = after["hits"] - before["hits"], after["misses"] - before["misses"]
    return run


def _all_failed(name: str, data: EvalData, reason: str) -> SystemRun:
    return SystemRun(name, data.name, {q.id: [] for q in data.queries}, {}, {q.id: reason for q in data.queries})


def run_in_process(spec: Any, datasets: list[EvalData], k: int, timeout: float, seed: int = 0,
                   max_scopes: int | None = None) -> list[SystemRun]:
    """``spec`` (a :class:`~memofs_eval.studies.systems.config.SystemSpec`) built and run here on
    every dataset (on its ``scopes`` sample, capped at ``max_scopes``: a small run); a
    system that cannot even be built (a missing package) fails every query."""
    n = min((x for x in (spec.scopes, max_scopes) if x is not None), default=None)
    try:
        system = spec.build()
    except Exception as exc:  # noqa: BLE001 (config errors were caught when the spec loaded)
        return [_all_failed(spec.name, d, f"could not start: {_line(exc)}") for d in datasets]
    try:
        return [run_system(system, d, k, timeout, n, seed) for d in datasets]
    finally:
        try:
            system.close()
        except Exception:  # noqa: BLE001
            pass


def _child(spec: Any, refs: list, k: int, timeout: float, seed: int, max_scopes: int | None) -> list[SystemRun]:
    from memofs_eval.inputs.data import load

    return run_in_process(spec, [EvalData(r, load(r)) for r in refs], k, timeout, seed, max_scopes)


def run_isolated(spec: Any, datasets: list[EvalData], k: int, timeout: float, seed: int = 0,
                 max_scopes: int | None = None) -> list[SystemRun]:
    """:func:`run_in_process` in a fresh (spawned) process: a crash of the system's native
    code cannot take the run down, and its peak RSS is its own."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    try:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
            return ex.submit(_child, spec, [d.ref for d in datasets], k, timeout, seed, max_scopes).result()
    except Exception as exc:  # noqa: BLE001 (BrokenProcessPool: the process died)
        return [_all_failed(spec.name, d, f"system process died: {_line(exc)}") for d in datasets]
