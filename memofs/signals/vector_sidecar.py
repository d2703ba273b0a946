"""The binary sidecar of ``embeddings.jsonl``: what loading it derived, kept so that a new
process starts without parsing every vector (issue 18, "fast start").

Two files next to the JSONL, which stays the durable record (the sidecar is only a cache:
delete it and the next load rebuilds it):

* ``embeddings.<generation>.npy``: the live vectors, float32, one row per id, in load
  order, memory-mapped on read (``numpy.load(mmap_mode="r")``: no copy until used).
* ``embeddings.sidecar.json``: embedder, dim, the ``.npy`` name, ids, text hashes,
  namespaces, metadata, the skipped lines and the JSONL state they came from.

Validity (the content digest): the JSONL's inode, the byte offset the sidecar covers, the
64 bytes before that offset and the file's mtime when the sidecar was written, checked
with one ``stat`` and one small read. The JSONL is only ever appended to in place or
replaced by a rename (compaction), so: same inode, size > offset and the same 64 bytes
means the sidecar covers a prefix of the file, and only the lines after the offset are
parsed; size == offset needs the same mtime too (a same-length edit in place changes it).
Anything else (a replaced, cut or hand-edited file) means a full parse and a new sidecar.
Blind spot, stated: an in-place edit that keeps the bytes before the offset's last 64 *and*
is followed by an append. A hash of the whole prefix would close it at the cost of reading
hundreds of MB on every start.

The ``.npy`` is written first (temp + fsync + rename under a fresh generation name), the JSON
naming it last (atomic), so a crash leaves either the old pair or the new one; older
generations are removed after the switch.
"""

from __future__ import annotations

import json
import os
import secrets as _random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memofs.files import safe_json
from memofs.files.atomic import atomic_write_text, fsync_dir

TAIL_BYTES = 64
FORMAT = 1


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


class VectorSidecar:
    def __init__(self, jsonl: Path) -> None:
        self.jsonl = Path(jsonl)
        self.meta = self.jsonl.with_name(self.jsonl.stem + ".sidecar.json")

    def _tail(self, offset: int) -> tuple[int, bytes, os.stat_result] | None:
        """The JSONL's inode, the 64 bytes before ``offset`` and its stat, or None when it is shorter."""
        try:
            fd, st = safe_json.open_regular(self.jsonl)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as fh:
            if st.st_size < offset:
                return None
            start = max(0, offset - TAIL_BYTES)
            fh.seek(start)
            return st.st_ino, fh.read(offset - start), st

    def read(self, embedder: str, dim: int) -> SidecarState | None:
        """The state if the sidecar is valid for this embedder and covers a prefix of the
        JSONL as it is now; None otherwise (missing, damaged, stale, another embedder)."""
        try:
            meta = safe_json.load_file(self.meta, expect=dict)
        except (FileNotFoundError, safe_json.JSONFileError, OSError):
            return None
        try:
            if (meta["format"], meta["embedder"], meta["dim"]) != (FORMAT, embedder, dim):
                return None
            now = self._tail(int(meta["offset"]))
            if now is None or now[0] != meta["inode"] or now[1].hex() != meta["tail"]:
                return None
            if now[2].st_size == meta["offset"] and now[2].st_mtime_ns != meta["mtime_ns"]:
                return None  # not appended to, yet written: edited in place
            vectors = np.load(self.meta.with_name(meta["npy"]), mmap_mode="r", allow_pickle=False)
            ids = meta["ids"]
            if vectors.dtype != np.float32 or vectors.shape != (len(ids), dim):
                return None
            return SidecarState(ids, vectors, meta["text_sha256"], meta["namespaces"], meta["metadata"],
                                meta["skipped"], int(meta["lines"]), int(meta["offset"]), int(meta["lineno"]))
        except (KeyError, TypeError, ValueError, OSError):  # a damaged sidecar is only a cache
            return None

    def write(self, state: SidecarState, embedder: str, dim: int) -> None:
        """Write a new generation (caller holds the JSONL's writer lock)."""
        now = self._tail(state.offset)
        if now is None:
            return
        gen = f"{self.jsonl.stem}.{_random.token_hex(6)}.npy"
        fd, tmp = tempfile.mkstemp(prefix=f".{gen}.", suffix=".tmp", dir=self.jsonl.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, np.ascontiguousarray(state.vectors, dtype=np.float32).reshape(len(state.ids), dim))
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.jsonl.parent / gen)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_dir(self.jsonl.parent)
        meta = {"format": FORMAT, "embedder": embedder, "dim": dim, "npy": gen, "inode": now[0],
                "offset": state.offset, "mtime_ns": now[2].st_mtime_ns, "lineno": state.lineno, "tail": now[1].hex(), "lines": state.lines,
                "ids": state.ids, "text_sha256": state.text_sha256, "namespaces": state.namespaces,
                "metadata": state.metadata, "skipped": state.skipped}
        atomic_write_text(self.meta, json.dumps(meta, ensure_ascii=False, separators=(",", ":")))
        for old in self.jsonl.parent.glob(f"{self.jsonl.stem}.*.npy"):
            if old.name != gen:
                old.unlink(missing_ok=True)
