"""Derived lines: the ``memory.created`` event and graph facts each memory line implies, their
checkpoint, and their re-derivation after a crash (``sync_derived``, ``repair``; the
durability rules in :mod:`memofs.store.directory`). A mixin of
:class:`~memofs.store.directory.Store`, whose lock, paths and cursors it uses."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from filelock import FileLock

from memofs.files import safe_json
from memofs.files.atomic import atomic_write_text
from memofs.files.jsonl import AppendCursor, append_line, derived_appends, fsync_file, repair_tail
from memofs.files.layout import Paths
from memofs.files.records import Memory
from memofs.files.sidecar import PrefixStamp
from memofs.files.timestamps import iso
from memofs.graph.entity_graph import EntityGraph
from memofs.graph.extract import RuleBasedExtractor
from memofs.store.lines import memory_from_row, read_jsonl, read_jsonl_from

log = logging.getLogger("memofs.store")

SUMMARY_CHARS = 160


def fnv1a32(text: str) -> str:
    """32-bit FNV-1a of the UTF-8 bytes, as 8 hex characters (upstream event ids)."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


class DerivedLines:
    """The derived-lines half of :class:`~memofs.store.directory.Store` (its attributes below)."""

    paths: Paths
    _lock: FileLock
    _graph: EntityGraph | None
    _graph_cursors: tuple[AppendCursor, AppendCursor]
    _events_cursor: AppendCursor
    _ids_cursor: AppendCursor
    _unsynced: int
    auto_extract_graph: Callable[[], bool]  # config.json autoExtractGraph (Store)

    def _created_event(self, memory: Memory, actor: str | None = None) -> dict[str, Any]:
        """The ``memory.created`` event of ``memory`` (its id is derived, so a rebuilt
        event equals the one the write would have appended)."""
        stamp = iso(memory.created_at) if memory.created_at else ""
        title = memory.metadata.get("title")  # upstream: the title, else the text's start
        summary = title if isinstance(title, str) and title else memory.text[:SUMMARY_CHARS]
        source = self.paths.rel(self.paths.memories)
        return {
            "id": "evt_" + fnv1a32(f"memory.created:{stamp}:{source}:{summary}"),
            "type": "memory.created",
            "timestamp": stamp,
            "sourcePath": source,
            "actor": {"type": "user", "id": actor} if actor else {"type": "agent", "id": "memofs"},
            "summary": summary,
            "metadata": {"id": memory.id, "kind": memory.kind, "tags": list(memory.tags)},
        }

    @staticmethod
    def _facts(text: str) -> tuple[list[Any], list[Any]]:
        return RuleBasedExtractor().extract(text[:250_000])

    def _extract_graph(self, texts: Iterable[str]) -> None:
        """Rule-based facts of ``texts`` merged into the graph files (caller holds the lock).

        New nodes (a node keeps the first label seen) and new edges are appended; only an
        edge that changes (a retired one made active again) rewrites the files. The graph is
        kept in memory and read again only when another writer changed the files."""
        facts = [self._facts(t) for t in texts]
        if not any(nodes for nodes, _ in facts):
            return
        graph = self._current_graph()
        new_nodes: list[str] = []
        new_edges: list[tuple[str, str, str]] = []
        rewrite = False
        for nodes, edges in facts:
            n, e, changed = graph.merge_extracted(nodes, edges)
            new_nodes += n
            new_edges += e
            rewrite = rewrite or changed
        if rewrite:
            graph.save(self.paths.graph)
        elif new_nodes or new_edges:
            graph.append(self.paths.graph, new_nodes, new_edges)
        for cursor, name in zip(self._graph_cursors, ("nodes.jsonl", "edges.jsonl")):
            cursor.read(self.paths.graph / name)  # past our own lines (we hold the lock)

    def _current_graph(self) -> EntityGraph:
        """The graph as the files hold it now (caller holds the lock): the kept one unless
        another writer appended to or rewrote a graph file since this process last did."""
        changed = [cursor.read(self.paths.graph / name) for cursor, name in
                   zip(self._graph_cursors, ("nodes.jsonl", "edges.jsonl"))]
        if self._graph is None or any(data or whole for data, whole in changed):
            self._graph = self.load_graph()
        return self._graph

    # -- derived data ----------------------------------------------------------------
    def orphan_temp_files(self) -> list[Path]:
        """Temp files of rewrites that never finished (a writer killed before its rename)."""
        p = self.paths
        found = []
        for d in (p.dir, p.core.parent, p.events.parent, p.graph, p.embeddings.parent, p.tmp):
            if d.is_dir():
                found += [f for f in d.iterdir() if f.is_file() and f.name.startswith(".")
                          and (f.name.endswith(".tmp") or f.name.startswith(".embeddings-tmp-"))]
        return sorted(found)

    def missing_derived(self, memories: Sequence[Memory]) -> tuple[list[Memory], list[Memory]]:
        """``(memories without their memory.created event, memories whose graph facts are
        missing)``: what a crash between the memory append and the event/graph writes leaves."""
        rows, _ = read_jsonl(self.paths.events)
        logged = {obj.get("metadata", {}).get("id") for _, obj in rows
                  if obj.get("type") == "memory.created" and isinstance(obj.get("metadata"), dict)}
        graph = self.load_graph()
        no_event = [m for m in memories if m.id not in logged]
        no_facts = [m for m in memories if any(n.id not in graph for n in self._facts(m.text)[0])] \
            if self.auto_extract_graph() else []  # a curated graph lacks no extracted fact
        return no_event, no_facts

    # -- derived lines: checkpoint and re-derivation (issue 18) --------------------------
    def _derived_path(self) -> Path:
        return self.paths.embeddings.parent / "derived.json"

    def _checkpoint_derived(self, memory_lines: int | None = None) -> None:
        """Make every derived append so far durable and say so (caller holds the lock):
        fsync the events and graph files, then record (atomically) how far memories.jsonl
        and the events file reach, as :class:`~memofs.files.sidecar.PrefixStamp`s. Every
        memory line before the checkpoint has its event and graph facts on disk."""
        p = self.paths
        for f in (p.events, p.graph / "nodes.jsonl", p.graph / "edges.jsonl"):
            fsync_file(f)
        stamps = {}
        for name, f in (("memories", p.memories), ("events", p.events)):
            size = f.stat().st_size if f.exists() else 0
            # line numbers only name lines in errors: counted when the caller does not know
            # them, by this process's cursors, which read only what was appended since the
            # last count (a replaced or edited file is counted again whole)
            if name == "events":
                self._events_cursor.read(f)
                lines = self._events_cursor.lines
            elif memory_lines is not None:
                lines = memory_lines
            else:
                self._known_ids()
                lines = self._ids_cursor.lines
            stamp = PrefixStamp.take(f, size, lines) if size else None
            stamps[name] = asdict(stamp) if stamp is not None else None
        atomic_write_text(self._derived_path(), json.dumps(stamps) + "\n", cache=True)
        self._unsynced = 0

    def checkpoint_derived(self) -> None:
        """:meth:`_checkpoint_derived` under the lock: declares every memory so far complete
        (for a bulk loader that writes memories.jsonl itself and derives nothing)."""
        with self.lock():
            self._checkpoint_derived()

    def sync_derived(self, *, wait: bool = True) -> list[str]:
        """Re-derive what a machine crash lost (events and graph facts are appended without
        their own fsync, :func:`~memofs.files.jsonl.derived_appends`): the memories after the
        last checkpoint are checked against the events after it and the graph, the missing
        lines appended, and a new checkpoint written. Costs what was written since the
        checkpoint (a changed or missing checkpoint: the whole store, once; a store without
        one was written with a fsync per line, so it starts from its current state).
        ``wait=False``: do nothing if a writer holds the lock. Returns what was done."""
        from filelock import Timeout

        p = self.paths
        try:
            lock = self._lock.acquire(timeout=None if wait else 0)
        except Timeout:
            return []
        except OSError as exc:  # a read-only store: nothing can be re-derived here
            log.warning("could not check the derived lines of %s (%s)", self.paths.dir, exc)
            return []
        with lock:
            try:
                saved = safe_json.load_file(self._derived_path(), expect=dict)
            except FileNotFoundError:
                self._checkpoint_derived()
                return []
            except (safe_json.JSONFileError, OSError):
                saved = {}

            def stamp(name: str, path: Path) -> PrefixStamp | None:
                try:
                    got = PrefixStamp(**saved[name]) if saved.get(name) else None
                except TypeError:
                    return None
                return got if got is not None and got.covers(path) else None

            mem_stamp = stamp("memories", p.memories)
            rows, _, read_to = read_jsonl_from(p.memories, mem_stamp)
            if not rows:
                return []
            after = [memory_from_row(row, f"{p.memories}:{n}") for n, row in rows]
            events, _, _ = read_jsonl_from(p.events, stamp("events", p.events) if mem_stamp is not None else None)
            logged = {obj.get("metadata", {}).get("id") for _, obj in events
                      if obj.get("type") == "memory.created" and isinstance(obj.get("metadata"), dict)}
            no_event = [m for m in after if m.id not in logged]
            graph = self._current_graph()
            no_facts = [m for m in after if any(n.id not in graph for n in self._facts(m.text)[0])] \
                if self.auto_extract_graph() else []
            done = []
            if no_event:
                repair_tail(p.events, p.tmp)
                with derived_appends():
                    for m in no_event:
                        append_line(p.events, self._created_event(m))
                done.append(f"appended {len(no_event)} missing memory.created event(s)")
            if no_facts:
                with derived_appends():
                    self._extract_graph(m.text for m in no_facts)
                done.append(f"re-extracted graph facts of {len(no_facts)} memory(ies)")
            for msg in done:
                log.warning("%s (lost by a crash before the checkpoint)", msg)
            whole = read_to is not None and read_to.offset == p.memories.stat().st_size
            self._checkpoint_derived(read_to.lineno if whole else None)
            return done

    def repair(self) -> list[str]:
        """Rebuild derived data from the durable record (memories.jsonl), under the lock:
        remove orphan temp files, append missing ``memory.created`` events, merge missing
        graph facts. Returns what was done, one line each."""
        done: list[str] = []
        with self.lock():
            for f in self.orphan_temp_files():
                size = f.stat().st_size
                f.unlink()
                done.append(f"removed orphan temp file {self.paths.rel(f)} ({size} bytes)")
            memories = self.load().memories
            no_event, no_facts = self.missing_derived(memories)
            if no_event:
                repair_tail(self.paths.events, self.paths.tmp)
                for m in no_event:
                    append_line(self.paths.events, self._created_event(m))
                done.append(f"appended {len(no_event)} missing memory.created event(s)")
            if no_facts:
                self._extract_graph(m.text for m in no_facts)
                done.append(f"re-extracted graph facts of {len(no_facts)} memory(ies)")
        return done
