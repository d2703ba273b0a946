"""``.memofs/indexes/embeddings.jsonl``: the persisted vectors (spec "Signal 3").

One JSON object per line:
    {"id", "namespace", "embedder", "dim", "text_sha256", "vector": [...], "metadata": {...}}

Rehydration reads vectors back without calling the embedder. Lines from another embedder
or dimension are never loaded; they are reported so the caller re-embeds them. A
truncated or corrupt *last* line (a crash mid-write by some other writer) is skipped with
one warning; a corrupt line elsewhere is an error naming file, line and field.

Writes serialise on an exclusive ``filelock`` lock. :meth:`EmbeddingsFile.upsert` (every
``remember``) appends one line per record (:mod:`memofs.files.jsonl`: one fsynced write,
torn tail cut first), so its cost does not grow with the file; the later line of an id
wins on load. Dead lines (an id written again, a removed memory, another embedder's
vector) are dropped by *compaction*: the whole file rewritten into a temp file in the same
directory, fsynced and ``os.replace``-d over the old one. It runs in :meth:`sync` (every
rehydration, under the lock) when lines of removed ids or of another embedder or dimension
are present, or when superseded lines reach ``COMPACT_MIN_DEAD`` and a quarter of the live
ones (amortised: a rewrite of L lines happens after at least L/4 appends); and in
:meth:`remove`. A process killed mid-compaction leaves the old file whole (plus a temp
file, removed by the next compaction): nothing acknowledged is lost.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock
from numpy.typing import NDArray

from memofs.files import safe_json
from memofs.files.jsonl import append_lines, repair_tail
from memofs.files.records import text_sha256  # noqa: F401 (the records' field; callers import it from here)
from memofs.files.sidecar import SHA_DTYPE, sha256_column
from memofs.signals.embedders.base import Embedder
from memofs.signals.vector_index import DEFAULT_NAMESPACE, VectorIndex
from memofs.signals.vector_sidecar import SidecarState, StoredState, VectorSidecar

log = logging.getLogger("memofs.embeddings_file")

DEFAULT_PATH = Path(".memofs") / "indexes" / "embeddings.jsonl"
_TMP_PREFIX = ".embeddings-tmp-"
COMPACT_MIN_DEAD = 1000
SIDECAR_REFRESH_LINES = 1000
"""A sidecar is rewritten when missing or stale, or when this many lines lie past it."""
"""Superseded lines below this count never trigger a compaction (small files stay put)."""


def _before_replace() -> None:
    """Called between a compaction's fsync and its rename; a test kills the process here."""


class EmbeddingsFileError(ValueError):
    """A malformed line that is not the last one (not explainable by a crash mid-write)."""


@dataclass
class EmbeddingRecord:
    """One chunk's vector and where it came from."""

    id: str
    vector: NDArray[np.float32]
    embedder: str
    text_sha256: str
    namespace: str = DEFAULT_NAMESPACE
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.vector.shape[0])

    def to_json(self) -> str:
        # float32 -> Python float is exact, and repr round-trips, so load() gives the same bits
        return json.dumps(
            {
                "id": self.id,
                "namespace": self.namespace,
                "embedder": self.embedder,
                "dim": self.dim,
                "text_sha256": self.text_sha256,
                "vector": np.asarray(self.vector, dtype=np.float32).tolist(),
                "metadata": self.metadata,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class SkippedLine:
    """A line not loaded: ``reason`` is "truncated", "other-embedder" or "other-dim"."""

    line: int
    reason: str
    id: str | None = None
    embedder: str | None = None
    dim: int | None = None


@dataclass(frozen=True)
class SyncReport:
    loaded: int
    embedded: int
    removed: int
    skipped: tuple[SkippedLine, ...]


_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("id", str),
    ("namespace", str),
    ("embedder", str),
    ("dim", int),
    ("text_sha256", str),
    ("vector", list),
    ("metadata", dict),
)


@dataclass(frozen=True)
class LoadInfo:
    """How the last load went: from the sidecar or not, lines parsed, and the offset and
    line count of the newline-terminated lines it read."""

    from_sidecar: bool
    parsed: int
    offset: int
    lineno: int


class EmbeddingsFile:
    """Reader/writer for one embeddings.jsonl; a sibling ``<name>.lock`` serialises writers."""

    def __init__(self, path: str | Path = DEFAULT_PATH, lock_timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self.lock = FileLock(str(self.path) + ".lock", timeout=lock_timeout_s)
        self.sidecar = VectorSidecar(self.path)
        self.last_load: LoadInfo | None = None

    # -- reading ----------------------------------------------------------------------
    def _parse(self, raw: bytes, lineno: int) -> tuple[str, dict[str, Any]]:
        """The decoded line and its object (UTF-8, depth and fields checked)."""
        where = f"{self.path}:{lineno}"
        try:
            text = safe_json.decode_utf8(raw, where)
            obj = safe_json.parse(text, where, expect=dict)
        except safe_json.JSONFileError as exc:
            raise EmbeddingsFileError(str(exc)) from None
        for name, kind in _FIELDS:
            value = obj.get(name)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise EmbeddingsFileError(f"{where}: field '{name}' is missing or not a {getattr(kind, '__name__', kind)}")
        if len(obj["vector"]) != obj["dim"]:
            raise EmbeddingsFileError(f"{where}: field 'vector' has {len(obj['vector'])} values but dim is {obj['dim']}")
        return text, obj

    def _iter(self, skipped: list[SkippedLine], start: int = 0, lines_before: int = 0,
              progress: list[int] | None = None) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """(line number, raw line, parsed dict) for every valid line, streamed in file order
        with one line of look-ahead (only the last line may be a crash leftover); from byte
        ``start`` (after ``lines_before`` lines) when a sidecar covers what comes before.
        ``progress`` gets ``[offset, lines]`` of the newline-terminated lines read."""
        try:
            fd, _ = safe_json.open_regular(self.path)  # a FIFO is refused, never read
        except FileNotFoundError:
            return
        if progress is not None:
            progress[:] = [start, lines_before]
        with os.fdopen(fd, "rb") as fh:
            fh.seek(start)
            pending: tuple[int, bytes] | None = None
            for lineno, raw in enumerate(fh, start=lines_before + 1):
                if progress is not None and raw.endswith(b"\n"):
                    progress[0] += len(raw)
                    progress[1] = lineno
                if not raw.strip():
                    continue
                if pending is not None:
                    yield (pending[0], *self._parse(pending[1], pending[0]))
                pending = (lineno, raw.rstrip(b"\r\n"))
            if pending is not None:
                try:
                    text, obj = self._parse(pending[1], pending[0])
                except EmbeddingsFileError as exc:
                    log.warning("skipping truncated or corrupt last line: %s", exc)
                    skipped.append(SkippedLine(line=pending[0], reason="truncated"))
                    return
                yield pending[0], text, obj

    def _scan(self) -> tuple[list[tuple[int, str, dict[str, Any]]], list[SkippedLine]]:
        skipped: list[SkippedLine] = []
        return list(self._iter(skipped)), skipped

    def read_all(self) -> tuple[list[tuple[int, dict[str, Any]]], list[SkippedLine]]:
        """Every valid line as (line number, dict), in file order."""
        rows, skipped = self._scan()
        return [(n, obj) for n, _, obj in rows], skipped

    def load(self, embedder_name: str, dim: int) -> tuple[list[EmbeddingRecord], list[SkippedLine]]:
        """Records written by ``embedder_name`` at ``dim`` (the later line of an id wins);
        other lines come back as skipped."""
        by_id, skipped, _ = self._load(embedder_name, dim)
        return list(by_id.values()), skipped

    def _load(self, embedder_name: str, dim: int, use_sidecar: bool = False
              ) -> tuple[dict[str, EmbeddingRecord], list[SkippedLine], int]:
        """``load`` plus the number of this embedder's lines read (live + superseded). With
        ``use_sidecar``, a valid sidecar stands for the lines it covers and only the lines
        after it are parsed (``self.last_load`` says which)."""
        skipped: list[SkippedLine] = []
        by_id: dict[str, EmbeddingRecord] = {}
        lines, start, before = 0, 0, 0
        state = self.sidecar.read(embedder_name, dim) if use_sidecar else None
        if state is not None:
            for k, i in enumerate(state.ids):
                by_id[i] = EmbeddingRecord(id=i, vector=state.vectors[k], embedder=embedder_name,
                                           text_sha256=state.text_sha256[k], namespace=state.namespaces[k],
                                           metadata=state.metadata[k])
            skipped = [SkippedLine(**row) for row in state.skipped]
            lines, start, before = state.lines, state.offset, state.lineno
        progress = [0, 0]
        parsed = 0
        for lineno, _, obj in self._iter(skipped, start, before, progress):
            parsed += 1
            if obj["embedder"] != embedder_name or obj["dim"] != dim:
                reason = "other-embedder" if obj["embedder"] != embedder_name else "other-dim"
                skipped.append(SkippedLine(line=lineno, reason=reason, id=obj["id"], embedder=obj["embedder"], dim=obj["dim"]))
                continue
            try:
                vec = np.asarray(obj["vector"], dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise EmbeddingsFileError(f"{self.path}:{lineno}: field 'vector' is not numeric") from exc
            lines += 1
            by_id.pop(obj["id"], None)  # the later line wins, at the later position
            by_id[obj["id"]] = EmbeddingRecord(
                id=obj["id"], vector=vec, embedder=obj["embedder"], text_sha256=obj["text_sha256"],
                namespace=obj["namespace"], metadata=obj["metadata"],
            )
        self.last_load = LoadInfo(from_sidecar=state is not None, parsed=parsed, offset=progress[0], lineno=progress[1])
        return by_id, skipped, lines

    # -- writing ----------------------------------------------------------------------
    def _write_lines(self, lines: Iterable[str]) -> None:
        """Temp file in the same directory + fsync + os.replace + directory fsync."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for line in lines:
                    fh.write(line)
                    fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; store files are ordinary project files
            _before_replace()
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _current(self) -> dict[str, str]:
        """id -> raw line of the file as it is now (caller holds the lock)."""
        self._clear_temp()
        rows, _ = self._scan()
        return {obj["id"]: raw for _, raw, obj in rows}

    def _clear_temp(self) -> None:
        """Remove temp files of a compaction that died (caller holds the lock: none is in use)."""
        for stale in self.path.parent.glob(_TMP_PREFIX + "*"):
            stale.unlink(missing_ok=True)

    def upsert(self, records: Sequence[EmbeddingRecord]) -> None:
        """Insert or replace records by id: one appended line each, in one fsynced write
        (the later line of an id wins; :meth:`sync` compacts)."""
        with self.lock:
            self._append(rec.to_json() for rec in records)

    def _append(self, lines: Iterable[str]) -> None:
        """Append under the lock, after cutting a torn last line (saved beside the file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            safe_json.require_regular(self.path, self.path.stat())  # a FIFO would block the append
        repair_tail(self.path, self.path.parent)
        append_lines(self.path, lines)

    def compact(self) -> int:
        """Rewrite the file with one line per id (its later line), atomically; returns how
        many superseded lines were dropped. Crash-safe: see the module docstring."""
        with self.lock:
            rows, _ = self._scan()
            current = self._current()
            if len(current) != len(rows):
                self._write_lines(current.values())
            return len(rows) - len(current)

    def remove(self, ids: Iterable[str]) -> int:
        """Delete lines by id, atomically; returns how many were removed."""
        drop = set(ids)
        with self.lock:
            current = self._current()
            kept = {k: v for k, v in current.items() if k not in drop}
            if len(kept) != len(current):
                self._write_lines(kept.values())
            return len(current) - len(kept)

    def _write_sidecar(self, order: list[str], records: Mapping[str, EmbeddingRecord], embedder: Embedder,
                       after: tuple[int, int, int, list[SkippedLine]]) -> None:
        """A new sidecar for the file as it now is (``after``: size, lines, this embedder's
        lines, skipped lines); a failure only costs the next start a full parse."""
        offset, lineno, lines, skipped = after
        try:
            rows = [records[i] for i in order]
            vectors = np.vstack([r.vector for r in rows]) if rows else np.zeros((0, embedder.dim), np.float32)
            self.sidecar.write(SidecarState(
                ids=list(order), vectors=vectors, text_sha256=[r.text_sha256 for r in rows],
                namespaces=[r.namespace for r in rows], metadata=[r.metadata for r in rows],
                skipped=[asdict(s) for s in skipped if s.reason != "truncated"], lines=lines,
                offset=offset, lineno=lineno), embedder.name, embedder.dim)
        except (OSError, ValueError) as exc:
            log.warning("could not write the vector sidecar (%s); the next start parses %s", exc, self.path)

    # -- sync ------------------------------------------------------------------------
    def _sync_from_sidecar(self, index: VectorIndex, ids: list[str], hashes: Callable[[], NDArray[np.bytes_]],
                           embedder: Embedder) -> bool:
        """The usual start, without a record per line (caller holds the lock): when the
        sidecar covers the whole file, holds exactly ``ids`` in their order, every text hash
        matches (``hashes()``: the texts' :data:`~memofs.files.sidecar.SHA_DTYPE` column,
        asked for only then) and nothing was skipped or superseded, :meth:`sync` would embed,
        drop and rewrite nothing, so the index takes the sidecar's rows: an empty one its
        normalised memory-mapped matrix as it is (no copy). False (nothing done) otherwise:
        the general path runs. A sidecar whose rows turn out damaged is dropped first, so
        the general path parses the file and writes a new one."""
        state = self.sidecar.read(embedder.name, embedder.dim, decode=False)
        if (state is None or state.skipped or state.lines != state.count or not state.has_ids(ids)
                or not self.path.exists() or self.path.stat().st_size != state.offset):
            return False
        try:
            if not _same_hashes(state, hashes()):
                return False
            if not len(index):
                # = state.ids; the unit column's digest was checked by the read (only the raw
                # vectors' check is deferred)
                index.load_unit_rows(ids, state.unit, state.namespace_codes, state.namespace_table, digest_checked=True)
            else:
                wanted = set(ids)
                index.remove([i for i in index.ids if i not in wanted])
                if ids:
                    index.upsert(ids, state.vectors, state.namespaces)
        except (ValueError, UnicodeDecodeError) as exc:  # rows or strings the digests do not cover
            log.warning("dropping a damaged vector sidecar (%s); %s is parsed again", exc, self.path)
            self.sidecar.meta.unlink(missing_ok=True)
            return False
        self.last_load = LoadInfo(from_sidecar=True, parsed=0, offset=state.offset, lineno=state.lineno)
        return True

    def reuse(self, index: VectorIndex, ids: Sequence[str], hashes: NDArray[np.bytes_], embedder: Embedder
              ) -> SyncReport | None:
        """:meth:`sync`'s usual start, for a caller that has the texts' hashes (``hashes``,
        aligned with ``ids``; the memories sidecar keeps them) and would rather not build
        its mappings: when the file's vectors are exactly ``ids``' with these hashes, the
        index takes them (see :meth:`_sync_from_sidecar`) and the report says so; None,
        nothing done, when :meth:`sync` must run."""
        ids = list(ids)
        with self.lock:
            if not self._sync_from_sidecar(index, ids, lambda: hashes, embedder):
                return None
        return SyncReport(loaded=len(ids), embedded=0, removed=0, skipped=())

    def sync(
        self,
        index: VectorIndex,
        texts_by_id: Mapping[str, str],
        embedder: Embedder,
        namespaces: Mapping[str, str] | None = None,
        metadata: Mapping[str, dict[str, Any]] | None = None,
        *,
        hashes: NDArray[np.bytes_] | None = None,
    ) -> SyncReport:
        """Make file and index hold exactly ``texts_by_id``: reuse stored vectors whose text
        hash matches, embed only new or changed texts (one encode call), drop the rest.
        ``hashes``: the texts' hashes in ``texts_by_id``'s order when the caller has them
        (:meth:`reuse`'s); otherwise each text is hashed, once, when a comparison needs it."""
        namespaces = namespaces or {}
        metadata = metadata or {}
        known: list[NDArray[np.bytes_]] = [] if hashes is None else [np.asarray(hashes, dtype=SHA_DTYPE)]
        if known and known[0].shape != (len(texts_by_id),):
            raise ValueError(f"{len(texts_by_id)} texts but hashes of shape {known[0].shape}")

        def text_hashes() -> NDArray[np.bytes_]:
            if not known:
                known.append(sha256_column(texts_by_id.values()))
            return known[0]

        with self.lock:
            if self._sync_from_sidecar(index, list(texts_by_id), text_hashes, embedder):
                assert self.last_load is not None
                return SyncReport(loaded=len(texts_by_id), embedded=0, removed=0, skipped=())
            by_id, skipped, lines = self._load(embedder.name, embedder.dim, use_sidecar=True)
            info = self.last_load
            stored = list(by_id.values())
            want = dict(zip(texts_by_id, (h.decode("ascii") for h in text_hashes().tolist())))
            todo = [i for i in texts_by_id if i not in by_id or by_id[i].text_sha256 != want[i]]
            fresh: list[EmbeddingRecord] = []
            if todo:
                vectors = embedder.encode([texts_by_id[i] for i in todo])
                for i, vec in zip(todo, vectors, strict=True):
                    fresh.append(EmbeddingRecord(
                        id=i, vector=np.asarray(vec, dtype=np.float32), embedder=embedder.name,
                        text_sha256=want[i],
                        namespace=namespaces.get(i, DEFAULT_NAMESPACE), metadata=dict(metadata.get(i, {})),
                    ))
            keep = {i: by_id[i] for i in texts_by_id if i in by_id}
            keep.update({r.id: r for r in fresh})
            stale_ids = [i for i in index.ids if i not in texts_by_id]
            removed = len(set(by_id) - set(texts_by_id)) + sum(1 for s in skipped if s.id and s.id not in texts_by_id)
            superseded = lines - len(by_id)
            order = [r.id for r in stored]
            if removed or any(s.reason != "truncated" for s in skipped) or (
                    superseded >= COMPACT_MIN_DEAD and 4 * superseded >= len(by_id)):
                self._clear_temp()
                order = [i for i in texts_by_id if i in keep]
                self._write_lines(keep[i].to_json() for i in order)
                after = (self.path.stat().st_size, len(order), len(order), [])
            else:
                if fresh or skipped:  # new vectors appended (a torn tail is cut first)
                    self._append(r.to_json() for r in fresh)
                    redone = {r.id for r in fresh}
                    order = [i for i in order if i not in redone] + [r.id for r in fresh]
                clean = info is not None and self.path.stat().st_size == info.offset + sum(len(r.to_json()) + 1 for r in fresh)
                after = (self.path.stat().st_size, info.lineno + len(fresh), lines + len(fresh), skipped) if clean else None
            if after is not None and (info is None or not info.from_sidecar or info.parsed + len(fresh) >= SIDECAR_REFRESH_LINES):
                self._write_sidecar(order, {**by_id, **keep}, embedder, after)
        index.remove(stale_ids)
        if keep:
            ids = list(keep)
            index.upsert(ids, np.vstack([keep[i].vector for i in ids]), [keep[i].namespace for i in ids])
        return SyncReport(loaded=len(stored), embedded=len(fresh), removed=removed, skipped=tuple(skipped))


def _same_hashes(state: StoredState, hashes: NDArray[np.bytes_]) -> bool:
    """The sidecar's text hashes equal ``hashes`` (one array comparison when every stored
    hash is 64 characters, as this module writes them)."""
    column = state.sha_column()
    if column is not None:
        return column.shape == hashes.shape and bool((column == hashes).all())
    return state.text_sha256 == [h.decode("ascii") for h in hashes.tolist()]
