"""The binary sidecar of ``embeddings.jsonl``: what loading it derived, kept so that a new
process starts without parsing every vector (issue 18, "fast start").

The JSONL stays the durable record; the sidecar is only a cache (delete it and the next
load rebuilds it): ``embeddings.sidecar.json`` (embedder, dim, skipped lines, the prefix
stamp) and the columns ``embeddings.<generation>.<column>.npy``.

Validity, damage checks and crash-safe writing are :mod:`memofs.files.sidecar`'s (the
same prefix stamp as the memories sidecar). Columns: ``vectors`` (float32, one row per id,
in load order, memory-mapped; checked for dtype and shape only, since hashing hundreds of
MB would cost what the sidecar saves), ``ids``/``sha``/``metadata`` strings joined with
their ends (:func:`memofs.files.sidecar.join_strings`) and ``namespace`` codes;
the skipped lines and counts go in the JSON metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memofs.files.sidecar import PrefixStamp, Sidecar, join_strings, split_strings

FORMAT = 2


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
        self.files = Sidecar(self.jsonl, self.jsonl.parent, self.jsonl.stem, FORMAT)
        self.meta = self.files.meta_path

    def read(self, embedder: str, dim: int) -> SidecarState | None:
        """The state if the sidecar is valid for this embedder and covers a prefix of the
        JSONL as it is now; None otherwise (missing, damaged, stale, another embedder)."""
        got = self.files.read(unchecked=("vectors",))
        if got is None:
            return None
        meta, cols, stamp = got
        try:
            if (meta["embedder"], meta["dim"]) != (embedder, dim):
                return None
            ids = split_strings(cols["ids"], cols["ids_ends"])
            sha = split_strings(cols["sha"], cols["sha_ends"])
            # metadata repeats (e.g. one per kind): each distinct JSON decoded once, copied per row
            distinct: dict[str, dict[str, Any]] = {}
            rows = split_strings(cols["metadata"], cols["metadata_ends"])
            for t in set(rows):
                distinct[t] = json.loads(t)
            metadata = [dict(distinct[t]) for t in rows]
            table = list(meta["namespaces"])
            namespaces = [table[c] for c in cols["namespace"].tolist()]
            vectors = np.asarray(cols["vectors"])  # a plain view of the map: row access without memmap overhead
            if vectors.dtype != np.float32 or vectors.shape != (len(ids), dim) or not (
                    len(sha) == len(metadata) == len(namespaces) == len(ids)):
                return None
            return SidecarState(ids, vectors, sha, namespaces, metadata, list(meta["skipped"]),
                                int(meta["lines"]), stamp.offset, stamp.lineno)
        except (KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError):  # a damaged sidecar is only a cache
            return None

    def write(self, state: SidecarState, embedder: str, dim: int) -> None:
        """Write a new generation (caller holds the JSONL's writer lock)."""
        stamp = PrefixStamp.take(self.jsonl, state.offset, state.lineno)
        if stamp is None:
            return
        codes: dict[str, int] = {}
        cols = {"vectors": np.ascontiguousarray(state.vectors, dtype=np.float32).reshape(len(state.ids), dim),
                "namespace": np.fromiter((codes.setdefault(n, len(codes)) for n in state.namespaces), dtype=np.int32,
                                         count=len(state.namespaces))}
        for name, strings in (("ids", state.ids), ("sha", state.text_sha256),
                              ("metadata", [json.dumps(m, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
                                            for m in state.metadata])):
            cols[name], cols[f"{name}_ends"] = join_strings(strings)
        self.files.write(stamp, cols, {"embedder": embedder, "dim": dim, "lines": state.lines,
                                       "namespaces": list(codes), "skipped": state.skipped}, unchecked=("vectors",))
