"""Where the harness's tasks run: in this process (``local``) or on a Dask cluster (``dask``).

A run has two halves, and both are plain functions the executor maps over items:

* extraction (:func:`memofs_eval.runs.signals_cache.compute_frames`): one task per embedding
  batch (``embed_batch``), then one per scope, a conversation, a haystack or a project
  (``scope_frames``);
* recombination (:func:`memofs_eval.runs.runner.run_all`): configs cut into parts, each part
  fused and scored by one task (``fuse_configs``).

The functions are the same under both executors; only the fan-out differs, so the numbers
are the same bytes. Under Dask every shared input is a *task* (the dataset loaded from its
path, the frames read from the signal cache, a value embedded in the graph), never a
scattered copy: when a worker dies the scheduler recomputes what it held and reruns its
task elsewhere. Workers read and write the content-addressed caches under the path the run
names, so that path must be one filesystem for all of them (a shared mount off one machine).
Dask is an optional extra (``pip install 'memofs[distributed]'``), imported only here and
only by :class:`DaskExecutor`. This module imports no other harness module: callers hand it
their functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from tqdm.auto import tqdm

EXECUTORS: tuple[str, ...] = ("local", "dask")


class Executor(Protocol):
    """Maps a task function over items. ``shared(obj, fn, *args)`` and ``value(obj)`` make
    an input every task reads: ``obj`` itself locally; under Dask a recomputable future of
    ``fn(*args)`` run on a worker (a dataset from its path, frames from the cache), or of
    ``obj`` embedded in the graph."""

    name: str

    def n_workers(self) -> int: ...

    def shared(self, obj: Any, fn: Callable[..., Any], *args: Any, keep: bool = True) -> Any: ...

    def value(self, obj: Any) -> Any: ...

    def map(self, fn: Callable[..., Any], items: Iterable[Any], *args: Any, desc: str = "", progress: bool = False,
            weight: Callable[[Any], int] | None = None) -> list[Any]: ...


def _bar(items: Sequence[Any], desc: str, progress: bool, weight: Callable[[Any], int] | None) -> tqdm:
    total = sum(weight(i) for i in items) if weight is not None else len(items)
    return tqdm(total=total, desc=desc, disable=not progress, leave=False)


class LocalExecutor:
    """Every task in this process, in order (recombination keeps its own fork pool)."""

    name = "local"

    def n_workers(self) -> int:
        return 1

    def shared(self, obj: Any, fn: Callable[..., Any], *args: Any, keep: bool = True) -> Any:
        return obj

    def value(self, obj: Any) -> Any:
        return obj

    def map(self, fn: Callable[..., Any], items: Iterable[Any], *args: Any, desc: str = "", progress: bool = False,
            weight: Callable[[Any], int] | None = None) -> list[Any]:
        items = list(items)
        out = []
        with _bar(items, desc, progress, weight) as bar:
            for item in items:
                out.append(fn(*args, item))
                bar.update(weight(item) if weight is not None else 1)
        return out


LOCAL = LocalExecutor()


def _identity(obj: Any) -> Any:
    return obj


class DaskExecutor:
    """Tasks on ``dask.distributed``: the scheduler at ``scheduler`` (``tcp://host:8786``),
    or a ``LocalCluster`` of ``n_workers`` single-threaded worker processes when none is
    given, or an existing ``client``. Use as a context manager (or call :meth:`close`)."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, n_workers: int = 2, client: Any = None) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:
            raise RuntimeError(f"executor 'dask' needs dask.distributed ({exc}): pip install 'memofs[distributed]'") from None
        self._cluster = None
        if client is not None:
            self.client, self._own_client = client, False
        else:
            if scheduler is None:
                # one thread per worker: each task is single-threaded numpy/torch, and the
                # local executor's numbers come from one thread too
                self._cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                             dashboard_address=None)
                scheduler = self._cluster.scheduler_address
            try:
                self.client = Client(scheduler, timeout="30s")
            except OSError as exc:
                self.close()
                raise RuntimeError(f"executor 'dask': cannot reach the scheduler at {scheduler}: {exc}") from None
            self._own_client = True
        self._shared: dict[tuple, Any] = {}

    @property
    def address(self) -> str:
        return self.client.scheduler.address

    def n_workers(self) -> int:
        return len(self.client.scheduler_info()["workers"])

    def _key(self, stem: str) -> str:
        return f"{stem}-{uuid.uuid4().hex[:12]}"

    def shared(self, obj: Any, fn: Callable[..., Any], *args: Any, keep: bool = True) -> Any:
        """A future of ``fn(*args)`` computed by a worker; a lost result is recomputed.
        ``keep``: once per (fn, args) for the executor's lifetime (a dataset), else freed
        with the caller's last reference (a signal group's frames). ``obj`` is the local value."""
        key = (fn.__module__, fn.__qualname__, repr(args))
        if keep and key in self._shared:
            return self._shared[key]
        fut = self.client.submit(fn, *args, key=self._key(fn.__name__.strip("_")))
        if keep:
            self._shared[key] = fut
        return fut

    def value(self, obj: Any) -> Any:
        """A future of ``obj``, embedded in the task graph so a lost copy is recomputed."""
        return self.client.submit(_identity, obj, key=self._key("value"))

    def map(self, fn: Callable[..., Any], items: Iterable[Any], *args: Any, desc: str = "", progress: bool = False,
            weight: Callable[[Any], int] | None = None) -> list[Any]:
        """``[fn(*args, item) for item in items]`` as one task per item, results in item
        order. A task's exception is raised here; a dead worker's tasks are rerun by the
        scheduler (up to ``distributed.scheduler.allowed-failures`` times)."""
        from dask.distributed import as_completed

        items = list(items)
        stem = self._key(getattr(fn, "__name__", "task"))
        futures = [self.client.submit(fn, *args, item, key=f"{stem}-{i}") for i, item in enumerate(items)]
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[Any] = [None] * len(items)
        try:
            with _bar(items, desc, progress, weight) as bar:
                for fut in as_completed(futures):
                    i = index[fut.key]
                    out[i] = fut.result()
                    bar.update(weight(items[i]) if weight is not None else 1)
        finally:
            for fut in futures:
                fut.release()
        return out

    def close(self) -> None:
        for fut in getattr(self, "_shared", {}).values():
            fut.release()
        self._shared = {}
        if getattr(self, "client", None) is not None and self._own_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_executor(kind: str = "local", scheduler: str | None = None, workers: int = 2) -> Executor:
    """The executor a spec or the command line names; ``local`` never imports Dask."""
    if kind == "local":
        return LOCAL
    if kind == "dask":
        return DaskExecutor(scheduler, workers)
    raise ValueError(f"unknown executor {kind!r} (expected {', '.join(EXECUTORS)})")


@contextmanager
def closing_executor(executor: Executor) -> Iterator[Executor]:
    """``executor``, closed on exit when it has a ``close`` (a Dask client and its cluster)."""
    try:
        yield executor
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
