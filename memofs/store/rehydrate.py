"""Rehydration: a store's memories, graph and stored vectors loaded into a ready
:class:`~memofs.ranking.recall.Recaller` (only new or changed texts are embedded)."""

from __future__ import annotations

import functools
import gc
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from memofs.files.memory_table import MemoryTable
from memofs.ranking.config import RecallConfig
from memofs.store.briefing import NotesHead, notes_head
from memofs.store.directory import Clock, Store

log = logging.getLogger("memofs.store")


# ---------------------------------------------------------------------- rehydration
@dataclass
class Rehydrated:
    """A ready :class:`~memofs.ranking.recall.Recaller` and what loading it found."""

    recaller: Any
    memories: MemoryTable
    warnings: list[str]
    embedded: int = 0
    loaded_vectors: int = 0

    @functools.cached_property
    def notes_head(self) -> NotesHead:
        """The briefing's notes list, ordered and rendered once per state (every briefing
        shows its head; none depends on the query)."""
        return notes_head(self.memories)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a start builds its objects: every new
    container counts toward a collection, and each full collection walks every object
    built so far, so 100k memories (records, dicts, datetimes) made a start superlinear.
    The objects built are kept, not garbage; the collector runs again afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def rehydrate(store: Store, *, embedder: Any = None, clock: Clock | None = None,
              config: RecallConfig | None = None) -> Rehydrated:
    """Load memories, graph and stored vectors into a Recaller with ``anchor_root`` = the
    project root. Stored vectors whose text hash still matches are reused; only new or
    changed texts are embedded (and written back). Without an embedder: lexical only."""
    with _collector_paused():
        return _rehydrate(store, embedder=embedder, clock=clock, config=config)


def _rehydrate(store: Store, *, embedder: Any, clock: Clock | None, config: RecallConfig | None) -> Rehydrated:
    from memofs.ranking.recall import Recaller

    store.sync_derived(wait=False)  # derived lines a machine crash lost (a no-op when the checkpoint is current)
    report = store.load()
    graph = store.load_graph()
    notes: list[str] = []
    if config is None:
        config, notes = store.recall_config_notes()
    rec = Recaller(config, embedder=embedder, graph=graph,
                   anchor_root=store.root, clock=clock or store.clock)
    rec.set_phrase_sources(store.phrase_sources())
    check = getattr(rec.reranker, "check", None)
    if check is not None:  # a model reranker the config names but cannot run: said once, at the start
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - a one-line RerankerError; recall skips the fold
            notes.append(f"{exc}; recall skips the reranker fold")
    out = Rehydrated(rec, report.memories, [*report.warnings, *notes])
    mems = report.memories
    terms = store.term_counts(mems, report.sha) if mems else None
    if embedder is None or not mems:
        if mems:
            rec.add(mems, terms=terms)
        return out
    from memofs.signals.embeddings_file import EmbeddingsFile
    from memofs.signals.vector_index import VectorIndex

    ids = mems.ids
    index: VectorIndex | None = None
    try:
        # the usual start: the stored vectors are exactly these texts' (the memories sidecar's
        # hashes say so), and the index takes the sidecar's rows without copying them
        stored = EmbeddingsFile(store.paths.embeddings)
        index = VectorIndex(embedder.dim)
        sync = stored.reuse(index, ids, report.sha, embedder) if report.sha is not None else None
        if sync is None:
            sync = stored.sync(
                index, {m.id: m.text for m in mems}, embedder, namespaces={m.id: m.namespace for m in mems},
                metadata={m.id: {"kind": m.kind} for m in mems}, hashes=report.sha)
        index = index.in_order(ids)  # the Recaller's rows follow the memories (no copy when they do)
        out.embedded, out.loaded_vectors = sync.embedded, sync.loaded
        out.warnings.extend(f"{store.paths.embeddings}:{s.line}: skipped ({s.reason})" for s in sync.skipped)
    except Exception as exc:  # zero-key tier 2: never fail recall because of vectors
        log.warning("vector rehydration failed (%s); recall continues lexical-only", exc)
        out.warnings.append(f"vector rehydration failed: {exc}")
        rec.disable_vectors()
        index = None
    rec.add(mems, index=index, terms=terms)
    return out
