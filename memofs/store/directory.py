"""The ``.memofs/`` store of one project: layout, crash-safe writes, loading.

Layout (created by :meth:`Store.init`; paths relative to the project root)::

    .memofs/manifest.json                 version, projectId, createdAt, the paths below
    .memofs/config.json                   projectId, recall overrides (RecallConfig fields)
    .memofs/memory/core.md                the persistent project briefing (template)
    .memofs/memory/memories.jsonl         one memory per line (append-only)
    .memofs/events/memory-events.jsonl    one event per line (append-only)
    .memofs/graph/nodes.jsonl             entity graph (new facts appended; a changed edge rewrites)
    .memofs/graph/edges.jsonl
    .memofs/indexes/embeddings.jsonl      vectors (memofs.signals.embeddings_file; appended, compacted)
    .memofs/indexes/embeddings.*          its binary sidecar (memofs.signals.vector_sidecar; a cache)
    .memofs/indexes/memories.*            the memories sidecar (memofs.files.memories_sidecar; a cache)
    .memofs/indexes/terms.*               the recall tokens' counts (memofs.signals.terms_sidecar; a cache)
    .memofs/indexes/derived.json          the derived-lines checkpoint (Store.sync_derived)
    .memofs/tmp/                          context-cache file, torn-line leftovers
    .memofs/.lock                         the store's cross-process write lock

Durability rules:

* Every write happens under the exclusive ``filelock`` lock ``.memofs/.lock``, so two
  writers never interleave and nothing is lost.
* JSONL appends write one whole line with a single ``os.write`` on an ``O_APPEND``
  descriptor and ``fsync`` it before the lock is released (derived lines: see below).
* A process killed mid-append can leave a torn last line. Loading skips it with a
  warning (the store stays readable); the next writer, under the lock, moves the torn
  bytes to ``.memofs/tmp/`` and cuts the file back to its last complete line before
  appending, so a torn line never ends up in the middle of a file. At most the write in
  flight is lost. (A file exactly as this process's own last append left it, by inode,
  size and mtime, needs no check: ``Store._ready_to_append``.)
* ``remember`` fsyncs only what it acknowledges: the memory line. The ``memory.created``
  event and the graph facts are *derived* from that line, so they are appended without
  their own fsync (:func:`memofs.files.jsonl.derived_appends`; a killed process still
  loses none of them, its writes are in the kernel's page cache). Every
  ``DERIVED_CHECKPOINT_WRITES`` writes, and at rehydration, a checkpoint
  (``.memofs/indexes/derived.json``) fsyncs the derived files and records how far
  memories.jsonl and the events reach; a machine crash can lose derived lines written
  after it, and :meth:`Store.sync_derived` (run by :func:`rehydrate`) re-derives them from
  the memories after the checkpoint. ``memofs doctor --repair`` still checks everything.
* ``remember`` only appends (STORE.md "Durability"). Files that are rewritten (manifest,
  config, a changed graph edge, an embeddings compaction) go through a temp file in the
  same directory, ``fsync`` and ``os.replace``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock
from numpy.typing import NDArray

from memofs.files import safe_json, secrets
from memofs.files.atomic import atomic_write_text
from memofs.files.jsonl import (AppendCursor, FileKey, append_bytes, append_line, append_lines, compact, derived_appends, file_key,
                                repair_tail, tail_lines)
from memofs.files.layout import STORE_DIR, Paths
from memofs.files.memories_sidecar import Cached, MemoriesSidecar
from memofs.files.memory_lines import memory_to_json
from memofs.files.memory_table import MemoryTable
from memofs.files.sidecar import PrefixStamp, sha256_column
from memofs.files.timestamps import iso, parse_iso
from memofs.signals.anchors import AnchorPathError, confine, hash_regular
from memofs.signals.term_counts import TermCounts
from memofs.signals.terms_sidecar import TermsSidecar
from memofs.ranking.config import RecallConfig
from memofs.ranking.profiles import PROFILE_NAMES
from memofs.graph.entity_graph import EntityGraph
from memofs.store.config_file import ConfigFileError, load_auto_extract_graph, load_recall_config
from memofs.store.derived import DerivedLines, fnv1a32
from memofs.store.errors import StoreError, StoreNotFoundError
from memofs.store.inputs import NAMESPACE_PATTERN, _check_text, normalize_tags
from memofs.store.lines import read_jsonl, read_jsonl_from, memory_from_row
from memofs.files.records import MEMORY_KINDS, Anchor, InvalidInputError, Memory, check_storable_extras, memory_extras

log = logging.getLogger("memofs.store")

CORE_TEMPLATE = "# Core Memory\n\n## Identity\n\n## Stable Facts\n\n## Preferences\n\n## Constraints\n"
LOCK_TIMEOUT_S = 60.0
MANIFEST_VERSION = "1"
DERIVED_CHECKPOINT_WRITES = 64  # remembers between checkpoints of the derived files (fsyncs amortised over them)
SIDECAR_REFRESH_LINES = 1000  # appended lines parsed on a start before the memories sidecar is rewritten

_ID_BYTES = re.compile(rb'"id":"([^"\\]*)"')


# ---------------------------------------------------------------------- records
def sha256_hex16(text: str) -> str:
    """The first 16 hex characters of SHA-256 of the UTF-8 text (store memory ids)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _load_hashes(cached: Cached, parsed: dict[str, Memory], moved: bool) -> NDArray[np.bytes_]:
    """The text hashes of a load's memories, aligned with them: the sidecar's (less the
    rows whose id a parsed line repeats: those move to the end), then the parsed memories'
    (hashed here: only the lines written since the sidecar)."""
    head = cached.sha
    if moved:
        head = head[[i not in parsed for i in cached.memories.ids]]
    return np.concatenate([head, sha256_column(m.text for m in parsed.values())]) if parsed else head


@dataclass
class LoadReport:
    """Memories in file order (a repeated id: the later line wins) and load warnings;
    ``sha``: each memory's :func:`~memofs.files.records.text_sha256` as one
    :data:`~memofs.files.sidecar.SHA_DTYPE` array, when the memories sidecar had them (the
    texts it holds, plus the few lines parsed after it), else None."""

    memories: MemoryTable
    warnings: list[str] = field(default_factory=list)
    sha: NDArray[np.bytes_] | None = None


Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    return datetime.now(timezone.utc)


def fixed_clock(at: datetime) -> Clock:
    """A clock that always reads ``at`` (timezone-aware): the surfaces' ``--as-of``, so an
    evaluation ranks at its dataset's "now" rather than the wall clock (issue 46, item 5)."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("a fixed clock needs a timezone-aware datetime")
    return lambda: at


# ---------------------------------------------------------------------- the store
class Store(DerivedLines):
    """One project's ``.memofs/`` store. ``clock`` gives "now" for writes that get none."""

    def __init__(self, root: str | os.PathLike[str], *, clock: Clock | None = None) -> None:
        try:
            self.root = Path(root).resolve()
        except (RuntimeError, OSError) as exc:  # a symlink loop at the root itself (Python 3.11: RuntimeError)
            raise StoreError(f"project root {root} cannot be resolved ({' '.join(str(exc).split())})") from None
        self.paths = Paths(self.root)
        self.clock = clock
        self._lock = FileLock(str(self.paths.lock), timeout=LOCK_TIMEOUT_S)
        # what this process's writes derive from, kept across writes and brought up to date
        # from the files' appended bytes (memofs.files.jsonl.AppendCursor), so a write costs
        # what it adds, not the size of the store
        self._ids: set[str] = set()
        self._ids_cursor = AppendCursor()
        self._events_cursor = AppendCursor()  # counts the events file's lines for checkpoints
        self._graph: EntityGraph | None = None
        self._graph_cursors = (AppendCursor(), AppendCursor())
        self._unsynced = 0  # this process's derived appends since its last checkpoint
        # file_key of each file as this process's last append left it: a file still so needs
        # no tail repair, and memories.jsonl still so needs no read for _known_ids
        self._left: dict[Path, FileKey] = {}
        self._ids_current = False  # _ids complete as of this process's last append (_left)

    # -- lifecycle -----------------------------------------------------------------
    @classmethod
    def init(cls, root: str | os.PathLike[str], *, project_id: str = "default", force: bool = False,
             clock: Clock | None = None, now: datetime | None = None, profile: str | None = None,
             auto_extract_graph: bool | None = None) -> Store:
        """Create the layout; existing data files are kept. ``force`` rewrites core.md,
        manifest.json and config.json with their defaults (memories are never erased).
        ``profile`` (:data:`~memofs.ranking.profiles.PROFILE_NAMES`) is written to config.json
        ``recall.profile``, into an existing config too (its other keys kept), so later
        recalls rank with it (issue 46, item 5); an unknown name raises StoreError.
        ``auto_extract_graph`` is written to config.json ``autoExtractGraph`` the same way
        (:mod:`memofs.store.config_file`: False keeps a curated graph free of extracted facts)."""
        if profile is not None and profile not in PROFILE_NAMES:
            raise StoreError(f"unknown profile {profile!r} (one of {', '.join(PROFILE_NAMES)})")
        store = cls(root, clock=clock)
        if not store.root.is_dir():
            raise StoreError(f"project root {store.root} is not a directory")
        p = store.paths
        for d in (p.dir, p.core.parent, p.events.parent, p.graph, p.embeddings.parent, p.tmp):
            d.mkdir(parents=True, exist_ok=True)
        with store.lock():
            stamp = iso(store._now(now))
            if force or not p.core.exists():
                atomic_write_text(p.core, CORE_TEMPLATE)
            for f in (p.memories, p.events, p.graph / "nodes.jsonl", p.graph / "edges.jsonl", p.embeddings):
                if not f.exists():
                    f.touch()
            if force or not p.manifest.exists():
                manifest = {"version": MANIFEST_VERSION, "projectId": project_id, "createdAt": stamp,
                            "updatedAt": stamp, **store._manifest_paths()}
                atomic_write_text(p.manifest, json.dumps(manifest, indent=2) + "\n")
            if force or not p.config.exists():
                config: dict[str, Any] = {"version": 1, "projectId": project_id, "recall": {}}
                if profile is not None:
                    config["recall"]["profile"] = profile
                if auto_extract_graph is not None:
                    config["autoExtractGraph"] = bool(auto_extract_graph)
                atomic_write_text(p.config, json.dumps(config, indent=2) + "\n")
            else:
                if profile is not None:
                    store._set_config(("recall", "profile"), profile)
                if auto_extract_graph is not None:
                    store._set_config(("autoExtractGraph",), bool(auto_extract_graph))
            if not store._derived_path().exists():
                store._checkpoint_derived()
        return store

    @classmethod
    def open(cls, root: str | os.PathLike[str], *, clock: Clock | None = None) -> Store:
        store = cls(root, clock=clock)
        if not store.paths.dir.is_dir():
            raise StoreNotFoundError(f"no {STORE_DIR}/ store in {store.root}; run `memofs init` there first")
        store.refuse_links_out()
        return store

    def refuse_links_out(self) -> None:
        """Raise :class:`StoreError` when a store file or folder is a symbolic link leaving
        ``.memofs/`` (as anchors leaving the project are refused): a cloned repository can
        ship one, and following it would print a file from elsewhere (``context`` shows
        core.md) or append to it (``remember``). Links inside ``.memofs/`` are followed.
        One ``lstat`` per path; a link costs a ``realpath``."""
        p = self.paths
        base = os.path.realpath(p.dir)
        for f in (p.core.parent, p.events.parent, p.graph, p.embeddings.parent, p.tmp, p.manifest, p.config, p.core,
                  p.core.parent / "notes.md", p.memories, p.events, p.graph / "nodes.jsonl", p.graph / "edges.jsonl",
                  p.embeddings, p.lock):
            if os.path.islink(f):
                target = os.path.realpath(f)
                if os.path.commonpath([base, target]) != base:
                    raise StoreError(f"{p.rel(f)} is a symbolic link leaving {STORE_DIR}/ (to {target}); "
                                     "memofs does not follow it: replace it with the file itself")

    def _manifest_paths(self) -> dict[str, dict[str, str]]:
        p = self.paths
        return {
            "memory": {"core": p.rel(p.core), "memories": p.rel(p.memories)},
            "events": {"memoryEvents": p.rel(p.events)},
            "indexes": {"embeddings": p.rel(p.embeddings)},
            "graph": {"nodes": p.rel(p.graph / "nodes.jsonl"), "edges": p.rel(p.graph / "edges.jsonl")},
        }

    def manifest_problems(self) -> list[str]:
        """Every problem of manifest.json (JSON, version, projectId, timestamps, paths);
        empty when it is valid or missing (a missing file is reported by its caller)."""
        path = self.paths.manifest
        try:
            data = safe_json.load_file(path, expect=dict)
        except FileNotFoundError:
            return []
        except (safe_json.JSONFileError, OSError) as exc:
            return [str(exc)]
        problems: list[str] = []

        def bad(fld: str, why: str) -> None:
            problems.append(f"{path}: field {fld!r} {why}")

        if data.get("version") != MANIFEST_VERSION:
            bad("version", f"must be {MANIFEST_VERSION!r}; got {data.get('version')!r}")
        if not isinstance(data.get("projectId"), str) or not data["projectId"]:
            bad("projectId", "must be a non-empty string")
        for fld in ("createdAt", "updatedAt"):
            try:
                parse_iso(data.get(fld))
            except (TypeError, ValueError) as exc:
                bad(fld, f"is not an ISO timestamp with timezone ({exc})")
        for section, fields in self._manifest_paths().items():
            got = data.get(section)
            if not isinstance(got, dict):
                bad(section, "must be an object")
                continue
            for name, want in fields.items():
                if got.get(name) != want:
                    bad(f"{section}.{name}", f"must be {want!r}; got {got.get(name)!r}")
        return problems

    def lock(self) -> FileLock:
        """The store's exclusive cross-process write lock (``.memofs/.lock``)."""
        return self._lock

    def _now(self, now: datetime | None) -> datetime:
        if now is not None:
            if now.tzinfo is None:
                raise ValueError("now must be timezone-aware")
            return now
        if self.clock is None:
            raise ValueError("this store has no clock: pass now=...")
        return self.clock()

    # -- config --------------------------------------------------------------------
    def _set_config(self, key: tuple[str, ...], value: Any) -> None:
        """config.json's ``key`` (a top-level key, or ``("recall", name)``) = ``value``,
        every other key as it was (under the lock)."""
        try:
            data = safe_json.load_file(self.paths.config)
        except safe_json.JSONFileError as exc:
            raise StoreError(str(exc)) from None
        if not isinstance(data, dict):
            raise StoreError(f"{self.paths.config}: must hold a JSON object")
        if len(key) == 2:
            table = data.get(key[0], {})
            if not isinstance(table, dict):
                raise StoreError(f"{self.paths.config}: field {key[0]!r} must be an object")
            data[key[0]] = {**table, key[1]: value}
        else:
            data[key[0]] = value
        atomic_write_text(self.paths.config, json.dumps(data, indent=2) + "\n")

    def auto_extract_graph(self) -> bool:
        """config.json ``autoExtractGraph`` (default true): whether writes extract graph facts."""
        try:
            return load_auto_extract_graph(self.paths.config)
        except ConfigFileError as exc:
            raise StoreError(str(exc)) from None

    def recall_config(self) -> RecallConfig:
        """RecallConfig defaults overridden by ``config.json`` ``recall`` (validated;
        upstream's keys mapped or reported: :mod:`memofs.store.config_file`)."""
        return self.recall_config_notes()[0]

    def recall_config_notes(self) -> tuple[RecallConfig, list[str]]:
        """:meth:`recall_config` and one message per upstream key it ignores."""
        try:
            return load_recall_config(self.paths.config)
        except ConfigFileError as exc:
            raise StoreError(str(exc)) from None

    # -- reading -------------------------------------------------------------------
    def load(self, *, sidecar: bool = True) -> LoadReport:
        """Every memory (see :class:`LoadReport`). With ``sidecar`` (the default), a valid
        memories sidecar (:mod:`memofs.files.memories_sidecar`) stands for the lines it
        covers and only the lines appended after it are parsed; the sidecar is rewritten
        when it was missing or stale, or after :data:`SIDECAR_REFRESH_LINES` appended lines.
        ``sidecar=False`` parses every line (the reference the sidecar must equal)."""
        path = self.paths.memories
        cached = self._memories_sidecar().read() if sidecar else None
        held = MemoryTable() if cached is None else cached.memories
        if cached is not None and len(set(held.ids)) != len(held):
            # never written so; the later row wins, at the first's place, and the hashes would not align
            held = MemoryTable({m.id: m for m in held}.values())
            cached = cached._replace(memories=held, sha=None)
        rows, warnings, stamp = read_jsonl_from(path, cached.stamp if cached is not None else None)
        parsed: dict[str, Memory] = {}  # the memories of the lines after the sidecar: a repeated id moves to the end
        for lineno, row in rows:
            m = memory_from_row(row, f"{path}:{lineno}")
            parsed.pop(m.id, None)
            parsed[m.id] = m
        moved = bool(parsed) and len(held) > 0 and not set(held.ids).isdisjoint(parsed)  # a parsed line repeats a held id
        if moved:
            memories = MemoryTable([*(m for m in held if m.id not in parsed), *parsed.values()])
        else:
            memories = held
            memories.extend(parsed.values())
        sha = _load_hashes(cached, parsed, moved) if cached is not None and cached.sha is not None else None
        # an unterminated last line is not covered by the stamp, so the sidecar waits for its newline
        covered = not rows or rows[-1][0] <= (stamp.lineno if stamp is not None else 0)
        if sidecar and stamp is not None and covered and (cached is None or len(rows) >= SIDECAR_REFRESH_LINES):
            self._write_memories_sidecar(memories, stamp, sha)
        return LoadReport(memories, warnings, sha)

    def _memories_sidecar(self) -> MemoriesSidecar:
        return MemoriesSidecar(self.paths.memories, self.paths.embeddings.parent)

    def _write_memories_sidecar(self, memories: Sequence[Memory], stamp: PrefixStamp,
                                sha: NDArray[np.bytes_] | None = None) -> None:
        """Write the sidecar if the write lock is free now (:meth:`_write_sidecar`). ``sha``:
        the memories' text hashes when the load has them."""
        self._write_sidecar("memories", lambda: self._memories_sidecar().write(memories, stamp, sha))

    def _write_sidecar(self, what: str, write: Callable[[], object]) -> None:
        """Run ``write`` under the write lock if it is free now: a reader never waits on a
        writer for a sidecar, and a failure only costs the next start the work it saves."""
        from filelock import Timeout

        try:
            with self._lock.acquire(timeout=0):
                write()
        except Timeout:
            return
        except (OSError, ValueError) as exc:
            log.warning("could not write the %s sidecar in %s (%s); the next start rebuilds it",
                        what, self.paths.embeddings.parent, exc)

    def term_counts(self, memories: MemoryTable, sha: NDArray[np.bytes_] | None = None) -> TermCounts:
        """The recall tokens' counts of ``memories`` (a load's, in order) or of a prefix of
        them, from the terms sidecar (:mod:`memofs.signals.terms_sidecar`); the memories
        after that prefix are the caller's to tokenize. When the sidecar was missing or
        stale, or lags by :data:`SIDECAR_REFRESH_LINES` memories or more, the missing rows are
        tokenized here and the sidecar rewritten. ``sha``: the memories' text hashes when
        the load has them (else they are computed)."""
        ids, texts = memories.ids, memories.texts
        sha = sha256_column(texts) if sha is None else sha
        side = TermsSidecar(self.paths.embeddings.parent)
        held = side.read(ids, sha)
        if held is not None and len(ids) - len(held) < SIDECAR_REFRESH_LINES:
            return held
        start = 0 if held is None else len(held)
        counts = (TermCounts.build((), ()) if held is None else held).extended(ids[start:], texts[start:])
        self._write_sidecar("terms", lambda: side.write(counts, sha))
        return counts

    def read_core(self) -> str:
        try:
            return safe_json.read_text(self.paths.core)
        except FileNotFoundError:
            return ""
        except safe_json.JSONFileError as exc:
            raise StoreError(str(exc)) from None

    def phrase_sources(self) -> dict[str, str]:
        """``core.md`` and ``notes.md`` as recall's phrase scan reads them (missing: empty)."""
        out = {"core": self.read_core()}
        try:
            out["notes"] = safe_json.read_text(self.paths.core.with_name("notes.md"))
        except FileNotFoundError:
            out["notes"] = ""
        except safe_json.JSONFileError as exc:
            raise StoreError(str(exc)) from None
        return out

    def recent_events(self, n: int = 20) -> tuple[list[dict[str, Any]], list[str]]:
        """The last ``n`` events, newest first, and load warnings. Only the file's tail is
        read (every briefing asks for 20, however many events the store holds)."""
        if n <= 0:
            return [], []
        path = self.paths.events
        try:
            raw = tail_lines(path, n + 1)  # one more: a torn last line is skipped, not counted
        except FileNotFoundError:
            return [], []
        events: list[dict[str, Any]] = []
        for line in raw:
            try:
                events.append(safe_json.parse(line, str(path), expect=dict))
            except safe_json.JSONFileError:
                # a torn last line (a crash mid-append) or a damaged one: the full read
                # skips or refuses it with its line number, as loading always did
                rows, warnings = read_jsonl(path)
                return [obj for _, obj in rows[-n:][::-1]], warnings
        return events[-n:][::-1], []

    def load_graph(self) -> EntityGraph:
        try:
            return EntityGraph.load(self.paths.graph)
        except FileNotFoundError:
            return EntityGraph()
        except ValueError as exc:
            raise StoreError(str(exc)) from None

    def signature(self) -> tuple:
        """Changes whenever memories, graph, core or notes.md change (size + mtime), for reloads."""
        sig = []
        for f in (self.paths.memories, self.paths.graph / "nodes.jsonl", self.paths.graph / "edges.jsonl", self.paths.core,
                  self.paths.core.with_name("notes.md")):
            try:
                st = f.stat()
                sig.append((st.st_size, st.st_mtime_ns))
            except FileNotFoundError:
                sig.append(None)
        return tuple(sig)

    # -- writing -------------------------------------------------------------------
    def anchor(self, rel: str) -> Anchor:
        """An anchor on ``rel`` hashed now; the path is confined to the project root."""
        try:
            full = confine(self.root, rel)
            digest, _ = hash_regular(full)
        except (FileNotFoundError, NotADirectoryError):
            raise AnchorPathError(f"anchor path is not an existing file: {secrets.shown(rel)}") from None
        except safe_json.NotRegularFileError:
            raise AnchorPathError(f"anchor path is not a regular file: {secrets.shown(rel)}") from None
        except OSError as exc:
            raise AnchorPathError(f"anchor path cannot be read ({exc.strerror or type(exc).__name__}): {secrets.shown(rel)}") from None
        return Anchor(full.relative_to(self.root).as_posix(), digest)

    def recorded_anchor(self, a: Anchor) -> Anchor:
        """``a`` kept as recorded (its hash is the file's when the memory was written; the
        file may have changed or gone since: that is the drift recall reports), its path
        confined to the project root and its hash and span checked."""
        full = confine(self.root, a.path)
        if not isinstance(a.sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", a.sha256):
            raise AnchorPathError(f"anchor {secrets.shown(a.path)}: sha256 must be 64 lowercase hex digits")
        if a.lines is not None and not (len(a.lines) == 2 and all(isinstance(n, int) and not isinstance(n, bool) for n in a.lines)
                                        and 1 <= a.lines[0] <= a.lines[1]):
            raise AnchorPathError(f"anchor {secrets.shown(a.path)}: lines must be [start, end] with 1 <= start <= end")
        return Anchor(full.relative_to(self.root).as_posix(), a.sha256, None if a.lines is None else tuple(a.lines))

    def write_graph(self, graph: EntityGraph) -> None:
        """Replace the entity graph with ``graph`` (a curated one: an import, a dataset's),
        atomically and under the lock. Writes that follow still merge their extracted facts
        into it unless ``autoExtractGraph`` is false."""
        with self.lock():
            graph.save(self.paths.graph)
            self._graph = None  # read again from the files by the next write
            self._graph_cursors = (AppendCursor(), AppendCursor())

    def import_memories(self, memories: Sequence[Memory], *, vectors: Sequence[Any] | None = None,
                        embedder_name: str | None = None) -> None:
        """Append ``memories`` as they are, in one durable write under the lock: records kept
        whole from elsewhere (another store, a dataset), with their ids, dates, namespaces,
        entities and anchors as recorded (:meth:`recorded_anchor`: the hash each file had then).
        Each is checked as a load of its line would check it, and through the secret gate; an
        id the store holds, or one given twice, is refused. Their events follow, their graph
        facts unless ``autoExtractGraph`` is false, then a checkpoint. ``vectors`` (one per
        memory, from ``embedder_name``) go to embeddings.jsonl. Raises :class:`StoreError`
        or :class:`InvalidInputError` naming the memory, before anything is written."""
        if (vectors is None) != (embedder_name is None) or (vectors is not None and len(vectors) != len(memories)):
            raise InvalidInputError("vectors and embedder_name come together, one vector per memory")
        p = self.paths
        if not p.dir.is_dir():
            raise StoreNotFoundError(f"no {STORE_DIR}/ store in {self.root}; run `memofs init` there first")
        extract = self.auto_extract_graph()
        with self.lock():
            self._ready_to_append(p.memories)  # a torn last line (kill -9) is cut first, as remember does
            self._ready_to_append(p.events)
            existing = self._known_ids()
            kept: list[Memory] = []
            for j, m in enumerate(memories):
                where = f"memory {j} ({secrets.shown(m.id)})"
                if m.id in existing:
                    raise InvalidInputError(f"{where}: the store already holds this id")
                try:
                    anchors = tuple(self.recorded_anchor(a) for a in m.anchors)
                except AnchorPathError as exc:
                    raise InvalidInputError(f"{where}: {exc}") from None
                m = Memory(id=m.id, text=m.text, kind=m.kind, created_at=m.created_at, confidence=m.confidence,
                           namespace=m.namespace, tags=m.tags, anchors=anchors, supersedes=m.supersedes,
                           metadata=dict(m.metadata))
                try:
                    secrets.check(m.text, *m.tags, *m.supersedes, *(a.path for a in anchors), m.namespace)
                    if not NAMESPACE_PATTERN.fullmatch(m.namespace) or ".." in m.namespace:
                        raise InvalidInputError(f"namespace {secrets.shown(m.namespace)} is not a store namespace")
                except InvalidInputError as exc:
                    raise InvalidInputError(f"{where}: {exc}") from None
                row = json.loads(compact(memory_to_json(m)))
                kept.append(memory_from_row(row, where))  # what a load of the line would give
                existing.add(m.id)
            data = "".join(compact(memory_to_json(m)) + "\n" for m in kept).encode("utf-8")
            if not data:
                return
            append_bytes(p.memories, data)
            self._ids_current = False  # read again by the next write
            self._left.pop(p.memories, None)
            with derived_appends():
                append_lines(p.events, (compact(self._created_event(m)) for m in kept))
                if extract:
                    self._extract_graph(m.text for m in kept)
            self._left.pop(p.events, None)
            self._checkpoint_derived()
        if vectors is not None:
            from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile, text_sha256

            EmbeddingsFile(p.embeddings).upsert([EmbeddingRecord(
                id=m.id, vector=v, embedder=embedder_name, text_sha256=text_sha256(m.text), namespace=m.namespace,
                metadata={"kind": m.kind}) for m, v in zip(kept, vectors)])

    def remember(
        self,
        text: str,
        *,
        kind: str = "note",
        confidence: float | None = None,
        tags: Iterable[str] = (),
        anchors: Sequence[str] = (),
        namespace: str = "default",
        supersedes: Iterable[str] = (),
        actor: str | None = None,
        now: datetime | None = None,
        embedder: Any = None,
        title: str | None = None,
        source: str | None = None,
        source_refs: Sequence[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Memory:
        """Validate, gate secrets, hash anchors, then append the memory and its event and
        extract graph facts, all under the store lock. With an ``embedder`` the vector is
        computed before the lock and stored in embeddings.jsonl after it (best effort:
        rehydration embeds whatever is missing). ``title``, ``source``, ``source_refs`` and
        ``metadata`` are upstream's remember fields (:func:`memofs.files.records.memory_extras`),
        kept in the memory's metadata and its line. Graph facts are extracted unless
        config.json says ``autoExtractGraph: false``."""
        text = _check_text(text)
        extras = memory_extras(title=title, source=source, source_refs=source_refs, metadata=metadata)
        check_storable_extras(extras)
        tags = normalize_tags(tags)
        supersedes, anchors = list(supersedes), list(anchors)
        for what, values in (("supersedes", supersedes), ("anchor", anchors)):
            if not all(isinstance(v, str) for v in values):
                raise InvalidInputError(f"every {what} value must be a string")
        if not isinstance(namespace, str):
            raise InvalidInputError(f"namespace must be a string; got {type(namespace).__name__}")
        # every field that is stored (the upstream fields as their JSON text)
        secrets.check(text, *tags, *supersedes, *anchors, namespace,
                      *(json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v for v in extras.values()))
        if kind not in MEMORY_KINDS:
            raise InvalidInputError(f"kind must be one of {', '.join(MEMORY_KINDS)}; got {secrets.shown(kind)}")
        if confidence is not None:
            if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
                raise InvalidInputError(f"confidence must be a number in [0, 1]; got {secrets.shown(confidence)}")
            confidence = float(confidence)
        if not isinstance(namespace, str) or not NAMESPACE_PATTERN.fullmatch(namespace) or ".." in namespace:
            raise InvalidInputError(f"namespace {secrets.shown(namespace)} must match ^[A-Za-z0-9][A-Za-z0-9._:@/-]{{0,255}}$ without '..'")
        sup = tuple(dict.fromkeys(s.strip() for s in supersedes if s.strip()))
        anchored = tuple(self.anchor(a) for a in anchors)
        extract = self.auto_extract_graph()
        when = self._now(now)
        stamp = iso(when)
        vector = None
        if embedder is not None:
            try:
                vector = embedder.encode([text])[0]
            except Exception as exc:  # the memory matters more than its vector
                log.warning("embedding the new memory failed (%s); it will be embedded on the next load", exc)
        p = self.paths
        if not p.dir.is_dir():
            raise StoreNotFoundError(f"no {STORE_DIR}/ store in {self.root}; run `memofs init` there first")
        with self.lock():
            unchanged = self._ready_to_append(p.memories)
            self._ready_to_append(p.events)
            existing = self._ids if unchanged and self._ids_current else self._known_ids()
            mem_id = "mem_" + sha256_hex16(f"{stamp}:{text}")
            salt = 0
            while mem_id in existing:  # same text, same instant: still a new memory
                salt += 1
                mem_id = "mem_" + sha256_hex16(f"{stamp}:{text}:{salt}")
            # the line's timestamp is UTC (upstream's toISOString shape) whatever offset ``now`` had
            memory = Memory(id=mem_id, text=text, kind=kind, created_at=when.astimezone(timezone.utc), confidence=confidence,
                            namespace=namespace, tags=tags, anchors=anchored, supersedes=sup, metadata=extras)
            data = (compact(memory_to_json(memory)) + "\n").encode("utf-8")
            after = append_bytes(p.memories, data)  # the acknowledged record: fsynced
            self._left[p.memories] = file_key(after)
            # our own line counts as read (no read-back), unless another writer slipped in
            self._ids_current = self._ids_cursor.advance(data, after)
            if self._ids_current:
                existing.add(mem_id)
            with derived_appends():  # derived from it: made durable by the next checkpoint
                self._left[p.events] = file_key(append_line(p.events, self._created_event(memory, actor)))
                if extract:
                    self._extract_graph([text])
            self._unsynced += 1
            if self._unsynced >= DERIVED_CHECKPOINT_WRITES:
                # the lines _known_ids read, plus ours (already counted if the cursor advanced)
                lines = self._ids_cursor.lines + (0 if self._ids_current else 1)
                self._checkpoint_derived(lines)
        if vector is not None:
            from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile, text_sha256

            try:
                EmbeddingsFile(p.embeddings).upsert([EmbeddingRecord(
                    id=mem_id, vector=vector, embedder=embedder.name, text_sha256=text_sha256(text),
                    namespace=namespace, metadata={"kind": kind})])
            except Exception as exc:
                log.warning("could not store the vector of %s (%s); it will be re-embedded on load", mem_id, exc)
        return memory

    def _ready_to_append(self, path: Path) -> FileKey | None:
        """Check ``path`` before an append (caller holds the lock): a FIFO or directory there
        would block or break the append (an error naming it), and a torn last line is cut
        (:func:`repair_tail`). Returns the file's key when it is exactly as this process's
        last append left it, which needs no repair: a complete line ends it (the tail is
        read only for a file that changed since)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        safe_json.require_regular(path, st)
        key = file_key(st)
        if self._left.get(path) == key:
            return key
        repair_tail(path, self.paths.tmp)
        return None

    def _known_ids(self) -> set[str]:
        """Every id in memories.jsonl (caller holds the lock): the ids of the lines appended
        since the last call are added; a replaced or edited file is read again whole. Ids are
        found in the raw bytes (lines are written compactly by append_line), not parsed."""
        data, whole = self._ids_cursor.read(self.paths.memories)
        if whole:
            self._ids = set()
        self._ids.update(raw.decode("utf-8", "replace") for raw in _ID_BYTES.findall(data))
        self._ids_current = False  # complete as of the read, not yet of an append of ours
        return self._ids

    def record_event(self, type_: str, summary: str, metadata: dict[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
        """Append one event (upstream MemoryEvent: ``id = evt_ + FNV-1a(type:timestamp:sourcePath:summary)``)
        under the lock, e.g. ``memory.indexed`` with ``{hook: "session-start"}`` for the
        session-start hook. Returns the event."""
        stamp = iso(self._now(now))
        source = self.paths.rel(self.paths.events)
        event = {"id": "evt_" + fnv1a32(f"{type_}:{stamp}:{source}:{summary}"), "type": type_, "timestamp": stamp,
                 "sourcePath": source, "actor": {"type": "agent", "id": "memofs"}, "summary": summary, "metadata": metadata}
        if not self.paths.dir.is_dir():
            raise StoreNotFoundError(f"no {STORE_DIR}/ store in {self.root}; run `memofs init` there first")
        with self.lock():
            if self.paths.events.exists():
                safe_json.require_regular(self.paths.events, self.paths.events.stat())
            repair_tail(self.paths.events, self.paths.tmp)
            append_line(self.paths.events, event)
        return event

    def write_core(self, text: str) -> None:
        """Replace core.md (secret-gated, LF line endings, atomic)."""
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        secrets.check(text)
        with self.lock():
            atomic_write_text(self.paths.core, text)
