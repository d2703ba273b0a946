"""One system through one dataset: ``reset``, ``open``, then per scope ``ingest`` its corpus
and ``recall`` each of its queries (the harness's scopes: :meth:`Dataset.corpus_for`).

Every call is timed and guarded: an exception, a call past ``timeout`` seconds, or an answer
naming ids outside the query's corpus is recorded against the query (``failures``) and the
run goes on; such a query is scored on an empty list (or on its known ids only), so a
failing system loses on it instead of vanishing from the paired tests. A scope whose
ingest failed has all its queries failed. A hung call is abandoned in its thread.
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memofs_eval.inputs.data import EvalData
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

    def efficiency(self) -> dict[str, Any]:
        lat = np.asarray(self.recall_s, dtype=np.float64)
        per_mem = (self.index_bytes / self.n_memories) if self.index_bytes is not None and self.n_memories else None
        return {"system": self.system, "dataset": self.dataset, "ingest_s": round(self.ingest_s, 3),
                "recall_p50_ms": round(float(np.percentile(lat, 50)) * 1e3, 2) if lat.size else float("nan"),
                "recall_p95_ms": round(float(np.percentile(lat, 95)) * 1e3, 2) if lat.size else float("nan"),
                "index_bytes_per_memory": None if per_mem is None else round(per_mem, 1),
                "peak_rss_mb": None if self.peak_rss_bytes is None else round(self.peak_rss_bytes / 2**20, 1),
                "n_failed": len(self.failures)}


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


def run_system(system: System, data: EvalData, k: int, timeout: float = DEFAULT_TIMEOUT_S) -> SystemRun:
    """Put ``system`` through ``data``'s judged queries at depth ``k``."""
    run = SystemRun(system.name, data.name, {}, {}, {})
    by_scope: dict[str | None, list] = defaultdict(list)
    for q in data.queries:
        by_scope[q.scope].append(q)
    try:
        guarded(system.reset, timeout)
        guarded(system.open, timeout, data.dataset)
    except BaseException as exc:  # noqa: BLE001
        return _all_failed(system.name, data, f"could not open: {_line(exc)}")
    for scope in sorted(by_scope, key=lambda s: (s is not None, s or "")):
        queries = by_scope[scope]
        corpus = data.dataset.corpus_for(queries[0])
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
            ask = Ask(q.id, q.text, q.task_type, data.dataset.now_for(q))
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
    return run


def _all_failed(name: str, data: EvalData, reason: str) -> SystemRun:
    return SystemRun(name, data.name, {q.id: [] for q in data.queries}, {}, {q.id: reason for q in data.queries})


def run_in_process(spec: Any, datasets: list[EvalData], k: int, timeout: float) -> list[SystemRun]:
    """``spec`` (a :class:`~memofs_eval.studies.systems.config.SystemSpec`) built and run here on
    every dataset; a system that cannot even be built (a missing package) fails every query."""
    try:
        system = spec.build()
    except Exception as exc:  # noqa: BLE001 (config errors were caught when the spec loaded)
        return [_all_failed(spec.name, d, f"could not start: {_line(exc)}") for d in datasets]
    try:
        return [run_system(system, d, k, timeout) for d in datasets]
    finally:
        try:
            system.close()
        except Exception:  # noqa: BLE001
            pass


def _child(spec: Any, refs: list, k: int, timeout: float) -> list[SystemRun]:
    from memofs_eval.inputs.data import load

    return run_in_process(spec, [EvalData(r, load(r)) for r in refs], k, timeout)


def run_isolated(spec: Any, datasets: list[EvalData], k: int, timeout: float) -> list[SystemRun]:
    """:func:`run_in_process` in a fresh (spawned) process: a crash of the system's native
    code cannot take the run down, and its peak RSS is its own."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    try:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
            return ex.submit(_child, spec, [d.ref for d in datasets], k, timeout).result()
    except Exception as exc:  # noqa: BLE001 (BrokenProcessPool: the process died)
        return [_all_failed(spec.name, d, f"system process died: {_line(exc)}") for d in datasets]
