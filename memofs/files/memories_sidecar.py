"""The binary sidecar of ``memories.jsonl`` (issue 18): every loaded :class:`Memory` as
columns, so a start reads them without parsing and validating each JSON line, as a
:class:`~memofs.files.memory_table.MemoryTable` that builds a record only when it is read.
Validity (the prefix stamp plus a digest of the whole covered prefix), damage checks and
crash-safe writing are :mod:`memofs.files.sidecar`'s; the
store applies the lines appended after the covered prefix through its own parser.

Columns (``n`` memories in load order: a repeated id's later line wins, at its position):

* ``ids``/``texts``: string columns (:func:`memofs.files.sidecar.join_strings`);
* ``kind``: uint8 index into :data:`memofs.files.records.MEMORY_KINDS`;
* ``created_us``: int64 microseconds since the epoch (exact; ``INT64_MIN`` = None) and
  ``created_off``: int32 UTC offset in seconds, so the timestamp round-trips with its zone;
* ``confidence``: float64, NaN = None;
* ``namespace``: int32 index into the metadata's ``namespaces`` list;
* ``rest``/``rest_ends``: compact JSON of tags, anchors, supersedes and extra fields, the
  empty string when all are empty (most memories), so only those rows are JSON-decoded;
* ``sha``: each text's :func:`~memofs.files.records.text_sha256` (:data:`~memofs.files.sidecar.SHA_DTYPE`),
  computed when the sidecar is written and covered by its digest, so a start checks the
  stored vectors against the texts with one array comparison instead of hashing every text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from memofs.files.memory_table import NONE_US, MemoryTable
from memofs.files.records import MEMORY_KINDS, Memory
from memofs.files.sidecar import SHA_DTYPE, PrefixStamp, Sidecar, join_strings, sha256_column

FORMAT = 2
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_KIND = {k: i for i, k in enumerate(MEMORY_KINDS)}
COLUMNS_FOR = ("id", "text", "kind", "created_at", "confidence", "namespace", "tags", "anchors", "supersedes", "metadata")
"""The :class:`Memory` fields the columns hold. When the record gains a field, the sidecar
stands down (never read, never written: every start parses) until it stores that field too,
rather than silently dropping it."""


def supported() -> bool:
    """True when :class:`Memory` has exactly the fields the columns hold."""
    return tuple(f.name for f in fields(Memory)) == COLUMNS_FOR


def _rest(m: Memory) -> str:
    rest: dict[str, Any] = {}
    if m.tags:
        rest["tags"] = list(m.tags)
    if m.anchors:
        rest["anchors"] = [[a.path, a.sha256] for a in m.anchors]
    if m.supersedes:
        rest["supersedes"] = list(m.supersedes)
    if m.metadata:
        rest["metadata"] = m.metadata
    return json.dumps(rest, ensure_ascii=False, separators=(",", ":")) if rest else ""


def encode(memories: Sequence[Memory], sha: NDArray[np.bytes_] | None = None) -> tuple[dict[str, np.ndarray], list[str]]:
    """``(columns, namespaces)`` of ``memories`` (see the module doc); ``sha``: their text
    hashes when known (a load's), else each text is hashed."""
    n = len(memories)
    sha = sha256_column(m.text for m in memories) if sha is None else np.asarray(sha, dtype=SHA_DTYPE)
    if sha.shape != (n,):
        raise ValueError(f"{n} memories but {sha.shape} text hashes")
    namespaces: dict[str, int] = {}
    created = np.full(n, NONE_US, dtype=np.int64)
    offset = np.zeros(n, dtype=np.int32)
    for i, m in enumerate(memories):
        if m.created_at is not None:
            created[i] = (m.created_at - _EPOCH) // _US
            offset[i] = int(m.created_at.utcoffset().total_seconds())
    cols = {
        "kind": np.fromiter((_KIND[m.kind] for m in memories), dtype=np.uint8, count=n),
        "created_us": created,
        "created_off": offset,
        "confidence": np.fromiter((np.nan if m.confidence is None else m.confidence for m in memories), dtype=np.float64, count=n),
        "namespace": np.fromiter((namespaces.setdefault(m.namespace, len(namespaces)) for m in memories), dtype=np.int32, count=n),
        "sha": sha,
    }
    for name, strings in (("ids", [m.id for m in memories]), ("texts", [m.text for m in memories]),
                          ("rest", [_rest(m) for m in memories])):
        cols[name], cols[f"{name}_ends"] = join_strings(strings)
    return cols, list(namespaces)


class Cached(NamedTuple):
    """What a valid sidecar holds: the memories, the prefix they cover and their text hashes."""

    memories: MemoryTable
    stamp: PrefixStamp
    sha: NDArray[np.bytes_]


class MemoriesSidecar:
    """``<indexes>/memories.sidecar.json`` + ``memories.<generation>.<column>.npy`` for ``memories.jsonl``."""

    def __init__(self, jsonl: Path, directory: Path) -> None:
        self.files = Sidecar(jsonl, directory, "memories", FORMAT, digest_prefix=True)

    def read(self) -> Cached | None:
        """The memories the sidecar holds, the prefix they cover and their text hashes (a
        copy: no map of the files outlives the read); None when it cannot be trusted."""
        got = self.files.read() if supported() else None
        if got is None:
            return None
        meta, cols, stamp = got
        try:
            memories = MemoryTable.from_columns(cols, list(meta["namespaces"]))
            sha = np.array(cols["sha"])
            if sha.dtype != np.dtype(SHA_DTYPE) or sha.shape != (len(memories),):
                return None
            return Cached(memories, stamp, sha)
        except (KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError):
            return None

    def write(self, memories: Sequence[Memory], stamp: PrefixStamp, sha: Sequence[bytes] | NDArray[np.bytes_] | None = None) -> bool:
        """Write a new generation (caller holds the store's write lock); False when the file
        moved on. ``sha``: the memories' text hashes when known."""
        if not supported():
            return False
        cols, namespaces = encode(memories, None if sha is None else np.asarray(sha, dtype=SHA_DTYPE))
        return self.files.write(stamp, cols, {"namespaces": namespaces})
