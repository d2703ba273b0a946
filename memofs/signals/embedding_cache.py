"""On-disk embedding cache for evaluation sweeps: a text is never encoded twice.

Key: (embedder name, sha256(text)). Layout, one folder per embedder:

    <directory>/<sha256(name)[:16]>/meta.json          {"embedder": name, "dim": d}
    <directory>/<sha256(name)[:16]>/<shard>.npy        (m, d) float32 vectors
    <directory>/<sha256(name)[:16]>/<shard>.keys.json  the m text hashes, in row order

Shards are append-only and never rewritten: each is written to a temp file and renamed,
vectors first and keys last, so a shard is visible only once complete. Shard names are
unique per writer, so processes can share one cache without a lock. A large batch is
encoded and stored in chunks, so an interrupted warm-up keeps every finished chunk.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import Embedder, EmbedderError, empty

CHUNK = 512  # texts per encode call and per shard: the unit an interrupted warm-up loses at most


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class _EmbedderState:
    folder: Path
    dim: int
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)  # sha -> (shard no, row)
    shards: list[NDArray[np.float32]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)  # shard names already loaded


class EmbeddingCache:
    """``encode(embedder, texts)`` with hit/miss counters (counted per input text)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.hits = 0
        self.misses = 0
        self._states: dict[str, _EmbedderState] = {}

    def _state(self, embedder: Embedder) -> _EmbedderState:
        st = self._states.get(embedder.name)
        if st is None:
            folder = self.directory / hashlib.sha256(embedder.name.encode("utf-8")).hexdigest()[:16]
            folder.mkdir(parents=True, exist_ok=True)
            meta = folder / "meta.json"
            if meta.is_file():
                info = json.loads(meta.read_text(encoding="utf-8"))
                if info.get("embedder") != embedder.name or info.get("dim") != embedder.dim:
                    raise EmbedderError(f"{meta}: cache holds {info}, not {embedder.name} at dim {embedder.dim}")
            else:
                _atomic_write(meta, json.dumps({"embedder": embedder.name, "dim": embedder.dim}).encode())
            st = self._states[embedder.name] = _EmbedderState(folder=folder, dim=embedder.dim)
        self._refresh(st)
        return st

    def _refresh(self, st: _EmbedderState) -> None:
        """Load shards other runs (or processes) completed since we last looked."""
        for keys_file in sorted(st.folder.glob("*.keys.json")):
            shard = keys_file.name[: -len(".keys.json")]
            if shard in st.seen:
                continue
            keys = json.loads(keys_file.read_text(encoding="utf-8"))
            vectors = np.load(st.folder / f"{shard}.npy")
            if vectors.shape != (len(keys), st.dim):
                raise EmbedderError(f"{keys_file}: {len(keys)} keys but vectors of shape {vectors.shape}")
            no = len(st.shards)
            st.shards.append(vectors)
            st.seen.add(shard)
            for r, key in enumerate(keys):
                st.rows.setdefault(key, (no, r))

    def _store(self, st: _EmbedderState, keys: list[str], vectors: NDArray[np.float32]) -> None:
        shard = f"{os.getpid()}-{uuid.uuid4().hex}"
        buf = tempfile.SpooledTemporaryFile()
        np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32))
        buf.seek(0)
        _atomic_write(st.folder / f"{shard}.npy", buf.read())
        _atomic_write(st.folder / f"{shard}.keys.json", json.dumps(keys).encode())  # commit marker
        no = len(st.shards)
        st.shards.append(vectors)
        st.seen.add(shard)
        for r, key in enumerate(keys):
            st.rows.setdefault(key, (no, r))

    def encode(self, embedder: Embedder, texts: Sequence[str], chunk: int = CHUNK,
               on_chunk: Callable[[int], None] | None = None) -> NDArray[np.float32]:
        """Cached vectors for ``texts``; only texts never seen by this embedder are encoded,
        each distinct text once, ``chunk`` texts per call. Each chunk is stored as soon as it
        is encoded, so an interrupted warm-up resumes where it stopped; ``on_chunk(n)`` is
        told how many texts each chunk held (a progress bar)."""
        texts = list(texts)
        if not texts:
            return empty(embedder.dim)
        st = self._state(embedder)
        keys = [_sha(t) for t in texts]
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in st.rows and key not in todo:
                todo[key] = text
        pending = list(todo.items())
        for start in range(0, len(pending), max(1, chunk)):
            part = pending[start:start + max(1, chunk)]
            vectors = np.asarray(embedder.encode([t for _, t in part]), dtype=np.float32)
            if vectors.shape != (len(part), st.dim):
                raise EmbedderError(f"{embedder.name} returned shape {vectors.shape}, expected ({len(part)}, {st.dim})")
            self._store(st, [k for k, _ in part], vectors)
            self.misses += len(part)
            if on_chunk is not None:
                on_chunk(len(part))
        self.hits += len(texts) - len(todo)
        out = np.empty((len(texts), st.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            no, r = st.rows[key]
            out[i] = st.shards[no][r]
        return out

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}
