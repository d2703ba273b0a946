"""The binary sidecar of ``embeddings.jsonl``: what loading it derived, kept so that a new
process starts without parsing every vector (issue 18, "fast start").

The JSONL stays the durable record; the sidecar is only a cache (delete it and the next
load rebuilds it): ``embeddings.sidecar.json`` (embedder, dim, skipped lines, the prefix
stamp) and the columns ``embeddings.<generation>.<column>.npy``.

Validity, damage checks and crash-safe writing are :mod:`memofs.files.sidecar`'s (the
same prefix stamp as the memories sidecar). Columns: ``vectors`` (float32, one row per id,
in load order, memory-mapped: the vectors as stored, which a compaction writes back;
hashed only when first used) and
``unit`` (the same rows normalised by :func:`memofs.signals.vector_index.unit_rows`, the
rows an index holds, so a start adopts the map as its matrix without normalising or
copying it), both digested and sealed like every column (issue 36 item 7: two swapped
rows of unit length are a forgery a shape check cannot see);
``ids``/``sha``/``metadata`` strings joined with their ends
(:func:`memofs.files.sidecar.join_strings`) and ``namespace`` codes; the skipped lines and
counts go in the JSON metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.files.sidecar import SHA_DTYPE, Columns, PrefixStamp, Sidecar, join_strings, split_strings
from memofs.signals.vector_index import unit_rows

FORMAT = 3
SHA_WIDTH = np.dtype(SHA_DTYPE).itemsize
_SKIPPED_KEYS = frozenset({"line", "reason", "id", "embedder", "dim"})  # embeddings_file.SkippedLine's fields


@dataclass
class SidecarState:
    """What a load derived from the JSONL's first ``offset`` bytes (``lineno`` lines)."""

    ids: list[str]
    vectors: np.ndarray  # (len(ids), dim) float32, possibly a read-only memory map
    text_sha256: list[str]
    namespaces: list[str]
    metadata: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    lines: int  # this embedder's lines read, live + superseded
    offset: int
    lineno: int


class StoredState:
    """A sidecar as read: :class:`SidecarState`'s fields (the per-row string columns are
    decoded on first use: a start that adopts the rows never needs them), plus the
    normalised rows ``unit``, the namespace codes and the text hashes as one array."""

    def __init__(self, cols: Columns, meta: dict[str, Any], stamp: PrefixStamp, dim: int) -> None:
        n = self.count = len(cols["ids_ends"])
        raw = cols["vectors"]  # its digest may be deferred: checked by ``vectors`` on first use
        self.unit = np.asarray(cols["unit"])
        self.namespace_codes = np.asarray(cols["namespace"])
        self.namespace_table = [str(t) for t in meta["namespaces"]]
        skipped = meta["skipped"]
        if not isinstance(skipped, list) or not all(
                isinstance(s, dict) and set(s) <= _SKIPPED_KEYS and isinstance(s.get("line"), int)
                and isinstance(s.get("reason"), str) for s in skipped):
            raise ValueError("skipped lines are not a list of SkippedLine objects")
        self.skipped: list[dict[str, Any]] = list(skipped)
        self.lines, self.offset, self.lineno = int(meta["lines"]), stamp.offset, stamp.lineno
        self._cols = cols
        if (raw.dtype != np.float32 or raw.shape != (n, dim) or self.unit.dtype != np.float32
                or self.unit.shape != (n, dim) or self.namespace_codes.shape != (n,)
                or len(cols["sha_ends"]) != n or len(cols["metadata_ends"]) != n):
            raise ValueError("columns of different lengths")
        if n and (int(self.namespace_codes.min()) < 0 or int(self.namespace_codes.max()) >= len(self.namespace_table)):
            raise ValueError("a namespace code out of range")

    @cached_property
    def ids(self) -> list[str]:
        return split_strings(self._cols["ids"], self._cols["ids_ends"])

    def has_ids(self, ids: list[str]) -> bool:
        """Whether the rows are exactly ``ids``, in order: compared as the joined column
        (:func:`~memofs.files.sidecar.join_strings`), so a start that adopts the rows never
        makes a string per row (issue 38: 100,000 of them at 100k memories)."""
        if len(ids) != self.count:
            return False
        blob, ends = join_strings(ids)
        return np.array_equal(ends, self._cols["ids_ends"]) and np.array_equal(blob, self._cols["ids"])

    @cached_property
    def vectors(self) -> np.ndarray:
        """The vectors as stored, digest checked (ValueError when it does not match): a
        start that adopts ``unit`` never reads them, so never hashes their 146 MiB at 100k."""
        return np.asarray(self._cols.verified("vectors"))  # a plain view of the map: row access without memmap overhead

    def sha_column(self) -> NDArray[np.bytes_] | None:
        """The text hashes as fixed-width ASCII (``S64``), compared with numpy, without a
        string per row; None when one is not 64 characters (then :attr:`text_sha256`)."""
        blob, ends = self._cols["sha"], self._cols["sha_ends"]
        n = len(ends)
        if blob.shape != (n * SHA_WIDTH,) or not np.array_equal(ends, np.arange(1, n + 1, dtype=np.int64) * SHA_WIDTH):
            return None
        return np.ascontiguousarray(blob).view(SHA_DTYPE)

    @cached_property
    def text_sha256(self) -> list[str]:
        return split_strings(self._cols["sha"], self._cols["sha_ends"])

    @cached_property
    def namespaces(self) -> list[str]:
        table = self.namespace_table
        return [table[c] for c in self.namespace_codes.tolist()]

    @cached_property
    def metadata(self) -> list[dict[str, Any]]:
        # metadata repeats (e.g. one per kind): each distinct JSON decoded once, copied per row
        rows = split_strings(self._cols["metadata"], self._cols["metadata_ends"])
        distinct = {t: json.loads(t) for t in set(rows)}
        if not all(isinstance(d, dict) for d in distinct.values()):
            raise ValueError("a metadata row is not an object")
        return [dict(distinct[t]) for t in rows]


class VectorSidecar:
    def __init__(self, jsonl: Path) -> None:
        self.jsonl = Path(jsonl)
        self.files = Sidecar(self.jsonl, self.jsonl.parent, self.jsonl.stem, FORMAT)
        self.meta = self.files.meta_path

    def read(self, embedder: str, dim: int, *, decode: bool = True) -> StoredState | None:
        """The state if the sidecar is valid for this embedder and covers a prefix of the
        JSONL as it is now; None otherwise (missing, damaged, stale, another embedder).
        ``decode=False`` leaves the per-row strings (ids, hashes, namespaces, metadata) and the
        raw vectors' digest check to first use, where damage raises ValueError."""
        got = self.files.read(defer=() if decode else ("vectors",))
        if got is None:
            return None
        meta, cols, stamp = got
        try:
            if (meta["embedder"], meta["dim"]) != (embedder, dim):
                return None
            state = StoredState(cols, meta, stamp, dim)
            n = state.count
            if decode and len(state.ids) != n:
                return None
            if decode and not len(state.text_sha256) == len(state.metadata) == len(state.namespaces) == n:
                return None
            return state
        except Exception:  # noqa: BLE001 - a damaged sidecar is only a cache: any damage means "rebuild"
            return None

    def write(self, state: SidecarState, embedder: str, dim: int) -> None:
        """Write a new generation (caller holds the JSONL's writer lock)."""
        stamp = PrefixStamp.take(self.jsonl, state.offset, state.lineno)
        if stamp is None:
            return
        codes: dict[str, int] = {}
        vectors = np.ascontiguousarray(state.vectors, dtype=np.float32).reshape(len(state.ids), dim)
        cols = {"vectors": vectors, "unit": unit_rows(vectors, dim),
                "namespace": np.fromiter((codes.setdefault(n, len(codes)) for n in state.namespaces), dtype=np.int32,
                                         count=len(state.namespaces))}
        for name, strings in (("ids", state.ids), ("sha", state.text_sha256),
                              ("metadata", [json.dumps(m, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
                                            for m in state.metadata])):
            cols[name], cols[f"{name}_ends"] = join_strings(strings)
        self.files.write(stamp, cols, {"embedder": embedder, "dim": dim, "lines": state.lines,
                                       "namespaces": list(codes), "skipped": state.skipped})
