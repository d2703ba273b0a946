"""The ``.memofs/`` store of one project: layout, crash-safe writes, loading, rehydration.

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

import functools
import gc
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock
from numpy.typing import NDArray

from memofs.files import safe_json, secrets
from memofs.files.atomic import atomic_write_text
from memofs.files.jsonl import (AppendCursor, FileKey, append_bytes, append_line, compact, derived_appends, file_key, fsync_file,
                                repair_tail, tail_lines)
from memofs.files.layout import STORE_DIR, Paths
from memofs.files.memories_sidecar import Cached, MemoriesSidecar
from memofs.files.memory_table import MemoryTable
from memofs.files.sidecar import PrefixStamp, sha256_column
from memofs.files.timestamps import iso, parse_iso
from memofs.signals.anchors import AnchorPathError, confine, hash_regular
from memofs.signals.term_counts import TermCounts
from memofs.signals.terms_sidecar import TermsSidecar
from memofs.ranking.config import RecallConfig
from memofs.graph.extract import RuleBasedExtractor
from memofs.graph.entity_graph import EntityGraph
from memofs.store.briefing import NotesHead, notes_head
from memofs.store.config_file import ConfigFileError, load_recall_config
from memofs.files.records import MEMORY_KINDS, Anchor, InvalidInputError, Memory, check_storable_extras, memory_extras

log = logging.getLogger("memofs.store")

CORE_TEMPLATE = "# Core Memory\n\n## Identity\n\n## Stable Facts\n\n## Preferences\n\n## Constraints\n"
MAX_TEXT_CHARS = 100_000
MAX_QUERY_CHARS = 4096
"""Longest recall/context query, the CLI's and the MCP server's (a query is a question, not
a document; the bound keeps one call's lexical work small)."""
MAX_TAGS = 50
TAG_PATTERN = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}")
NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,255}")
SUMMARY_CHARS = 160
LOCK_TIMEOUT_S = 60.0
MANIFEST_VERSION = "1"
DERIVED_CHECKPOINT_WRITES = 64  # remembers between checkpoints of the derived files (fsyncs amortised over them)
SIDECAR_REFRESH_LINES = 1000  # appended lines parsed on a start before the memories sidecar is rewritten

_ID_BYTES = re.compile(rb'"id":"([^"\\]*)"')
_EXTRA_ARGS = {"title": "title", "source": "source", "writer": "writer", "sourceRefs": "source_refs",
               "metadata": "metadata"}
_MEMORY_FIELDS = ("id", "text", "kind", "created_at", "confidence", "tags", "namespace", "anchors", "supersedes")


class StoreError(RuntimeError):
    """A store that is missing, malformed or cannot be written."""


class StoreNotFoundError(StoreError):
    """No ``.memofs/`` directory under the project root."""


# ---------------------------------------------------------------------- low-level file I/O
def read_jsonl(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """``[(line number, object)]`` and warnings. A malformed *last* line (a crash
    mid-write) is skipped with a warning; a malformed line elsewhere raises
    :class:`StoreError` naming the file and line. Blank lines are skipped."""
    rows, warnings, _ = read_jsonl_from(path)
    return rows, warnings


def read_jsonl_from(path: Path, after: PrefixStamp | None = None
                    ) -> tuple[list[tuple[int, dict[str, Any]]], list[str], PrefixStamp | None]:
    """:func:`read_jsonl` of the lines after the prefix ``after`` covers (all lines when
    None), numbered from there, plus the stamp of the complete lines read up to now (an
    unterminated last line is left for the next read); no stamp when the file is missing."""
    start, first = (after.offset, after.lineno) if after is not None else (0, 0)
    try:
        fd, st = safe_json.open_regular(path)
    except FileNotFoundError:
        return [], [], None
    with os.fdopen(fd, "rb") as fh:
        head = b""
        if start:
            fh.seek(max(0, start - 64))
            head = fh.read(min(64, start))
        data = fh.read(st.st_size - start)
    lines = data.split(b"\n")
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    rows: list[tuple[int, dict[str, Any]]] = []
    warnings: list[str] = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = safe_json.parse(raw, f"{path}:{first + i + 1}", expect=dict)
        except safe_json.JSONFileError as exc:
            if i == last:
                msg = f"{exc.where}: skipped a torn last line (crash mid-write?): {exc.reason}"
                log.warning(msg)
                warnings.append(msg)
                continue
            raise StoreError(str(exc)) from None
        rows.append((first + i + 1, obj))
    complete = data.rfind(b"\n") + 1
    stamp = PrefixStamp.of(st, (head + data[:complete])[-64:], start + complete, first + data.count(b"\n", 0, complete))
    return rows, warnings, stamp


# ---------------------------------------------------------------------- records
def sha256_hex16(text: str) -> str:
    """The first 16 hex characters of SHA-256 of the UTF-8 text (store memory ids)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fnv1a32(text: str) -> str:
    """32-bit FNV-1a of the UTF-8 bytes, as 8 hex characters (upstream event ids)."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def memory_to_json(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "text": m.text,
        "kind": m.kind,
        "created_at": iso(m.created_at) if m.created_at else None,
        "confidence": m.confidence,
        "tags": list(m.tags),
        "namespace": m.namespace,
        "anchors": [{"path": a.path, "sha256": a.sha256} for a in m.anchors],
        "supersedes": list(m.supersedes),
        # upstream's remember fields (title, source, sourceRefs, metadata) and any other
        # key the line was read with: written back as they came, never dropped
        **{k: v for k, v in m.metadata.items() if k not in _MEMORY_FIELDS},
    }


def memory_from_json(row: dict[str, Any], where: str) -> Memory:
    """Validate one memories.jsonl row; errors name ``where`` (file:line) and the field."""

    def bad(fld: str, why: str) -> StoreError:
        return StoreError(f"{where}: field {fld!r} {why}")

    for fld in ("id", "text"):
        if not isinstance(row.get(fld), str) or not row[fld]:
            raise bad(fld, "is missing or not a non-empty string")
    if len(row["text"]) > MAX_TEXT_CHARS:
        raise bad("text", f"has {len(row['text'])} characters; the limit is {MAX_TEXT_CHARS}")
    kind = row.get("kind", "note")
    if not isinstance(kind, str) or kind not in MEMORY_KINDS:
        raise bad("kind", f"must be one of {', '.join(MEMORY_KINDS)}; got {secrets.shown(kind)}")
    created = row.get("created_at")
    try:
        created_at = parse_iso(created) if created is not None else None
    except (TypeError, ValueError) as exc:
        raise bad("created_at", f"is not an ISO timestamp with timezone ({exc})") from None
    conf = row.get("confidence")
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 <= conf <= 1):
        raise bad("confidence", f"must be a number in [0, 1] or null; got {conf!r}")
    tags = row.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags) or len(tags) > MAX_TAGS:
        raise bad("tags", f"must be a list of at most {MAX_TAGS} strings")
    ns = row.get("namespace", "default")
    if not isinstance(ns, str) or not ns:
        raise bad("namespace", "must be a non-empty string")
    anchors = []
    raw_anchors = row.get("anchors", [])
    if not isinstance(raw_anchors, list):
        raise bad("anchors", "must be a list")
    for j, a in enumerate(raw_anchors):
        if not isinstance(a, dict) or not isinstance(a.get("path"), str) or not isinstance(a.get("sha256"), str):
            raise bad(f"anchors[{j}]", "must be an object with string 'path' and 'sha256'")
        anchors.append(Anchor(a["path"], a["sha256"]))
    sup = row.get("supersedes", [])
    if not isinstance(sup, list) or not all(isinstance(s, str) for s in sup):
        raise bad("supersedes", "must be a list of strings")
    extra = {k: v for k, v in row.items() if k not in _MEMORY_FIELDS}
    try:
        extra.update(memory_extras(**{_EXTRA_ARGS[k]: v for k, v in extra.items() if k in _EXTRA_ARGS}))
    except InvalidInputError as exc:
        raise StoreError(f"{where}: {exc}") from None
    return Memory(
        id=row["id"], text=row["text"], kind=kind, created_at=created_at,
        confidence=None if conf is None else float(conf), namespace=ns, tags=tuple(tags),
        anchors=tuple(anchors), supersedes=tuple(sup), metadata=extra,
    )


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


def _check_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("memory text must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInputError(f"memory text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    return text.strip()


def normalize_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Trimmed, de-duplicated (order kept), each matching ``^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$``, at most 50."""
    out: dict[str, None] = {}
    for t in tags:
        if not isinstance(t, str):
            raise InvalidInputError(f"tag {secrets.shown(t)} must be a string")
        t = t.strip()
        if not TAG_PATTERN.fullmatch(t):
            raise InvalidInputError(f"tag {secrets.shown(t)} must match ^[a-zA-Z0-9][a-zA-Z0-9._:-]{{0,127}}$")
        out.setdefault(t, None)
    if len(out) > MAX_TAGS:
        raise InvalidInputError(f"{len(out)} tags; the limit is {MAX_TAGS}")
    return tuple(out)


# ---------------------------------------------------------------------- the store
class Store:
    """One project's ``.memofs/`` store. ``clock`` gives "now" for writes that get none."""

    def __init__(self, root: str | os.PathLike[str], *, clock: Clock | None = None) -> None:
        self.root = Path(root).resolve()
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
             clock: Clock | None = None, now: datetime | None = None) -> Store:
        """Create the layout; existing data files are kept. ``force`` rewrites core.md,
        manifest.json and config.json with their defaults (memories are never erased)."""
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
                config = {"version": 1, "projectId": project_id, "recall": {}}
                atomic_write_text(p.config, json.dumps(config, indent=2) + "\n")
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
            m = memory_from_json(row, f"{path}:{lineno}")
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
        kept in the memory's metadata and its line."""
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
            memory = Memory(id=mem_id, text=text, kind=kind, created_at=when, confidence=confidence,
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
        no_facts = [m for m in memories if any(n.id not in graph for n in self._facts(m.text)[0])]
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
            after = [memory_from_json(row, f"{p.memories}:{n}") for n, row in rows]
            events, _, _ = read_jsonl_from(p.events, stamp("events", p.events) if mem_stamp is not None else None)
            logged = {obj.get("metadata", {}).get("id") for _, obj in events
                      if obj.get("type") == "memory.created" and isinstance(obj.get("metadata"), dict)}
            no_event = [m for m in after if m.id not in logged]
            graph = self._current_graph()
            no_facts = [m for m in after if any(n.id not in graph for n in self._facts(m.text)[0])]
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


class LiveStore:
    """A long-lived view (the MCP server) that follows the store's files, including writes
    by other processes. Lines appended to memories.jsonl are applied incrementally (parsed,
    embedded, added to the same Recaller; the graph is re-read when its files changed); the
    state is rebuilt from scratch only when memories.jsonl was rewritten (replaced, cut,
    edited: :class:`~memofs.files.jsonl.AppendCursor`) or an appended line repeats a known
    id with other content. Reads take no lock: they see complete lines only, so a reader
    waits on no writer at all."""

    def __init__(self, store: Store, *, embedder: Any = None, clock: Clock | None = None) -> None:
        self.store = store
        self.embedder = _LastEncode(embedder) if embedder is not None else None
        self.clock = clock or store.clock
        self._sig: tuple | None = None
        self._state: Rehydrated | None = None
        self._cursor = AppendCursor()
        self.full_loads = 0  # how many times the state was rebuilt from scratch

    def state(self) -> Rehydrated:
        sig = self.store.signature()
        if self._state is not None and sig == self._sig:
            return self._state
        data, whole = self._cursor.read(self.store.paths.memories)
        if self._state is None or whole or not self._apply(data, graph_changed=sig[1:3] != self._sig[1:3]):
            self._state = rehydrate(self.store, embedder=self.embedder, clock=self.clock)
            self.full_loads += 1
        elif sig[3:] != self._sig[3:]:  # core.md or notes.md changed: the phrase scan's texts
            self._state.recaller.set_phrase_sources(self.store.phrase_sources())
        self._sig = sig
        return self._state

    def _apply(self, data: bytes, graph_changed: bool) -> bool:
        """Add the memories of appended ``data`` to the state; False when only a full
        reload is right (a known id with other content: the later line wins in place)."""
        state = self._state
        assert state is not None
        rec = state.recaller
        path = self.store.paths.memories
        new: dict[str, Memory] = {}
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            try:
                row = safe_json.parse(raw, f"{path} (appended line)", expect=dict)
                m = memory_from_json(row, f"{path} (appended line)")
            except (safe_json.JSONFileError, StoreError):
                return False  # the full load reports it with its line number
            old = rec.memories.get(m.id)
            if old is not None:
                if old != m:
                    return False
                continue  # already loaded (the state was built after this append)
            new[m.id] = m
        if graph_changed:
            rec.graph = self.store.load_graph()
            rec.refresh_graph()
        if new:
            mems = list(new.values())
            rec.add(mems)  # its embedder (this view's) encodes them; remember's vector is reused
            state.memories.extend(mems)
            state.__dict__.pop("notes_head", None)  # the notes changed
        return True

    def remember(self, text: str, **kwargs: Any) -> Memory:
        return self.store.remember(text, embedder=self.embedder, **kwargs)


class _LastEncode:
    """An embedder that keeps the vectors of its last call, so the state picks up the
    vector ``remember`` just computed instead of encoding the text a second time."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self._last: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, texts: Sequence[str]) -> Any:
        import numpy as np

        texts = list(texts)
        todo = list(dict.fromkeys(t for t in texts if t not in self._last))
        fresh = dict(zip(todo, np.asarray(self.inner.encode(todo), dtype=np.float32))) if todo else {}
        known = {**self._last, **fresh}
        self._last = fresh
        return np.vstack([known[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
