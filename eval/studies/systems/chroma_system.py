"""ChromaDB (``pip install chromadb``), a local persistent client with telemetry off, no key,
no network: one collection per scope (cosine HNSW), given the memories' MiniLM vectors (the
harness's, :mod:`.embedding`) so Chroma never loads its own embedding model; recall is its
nearest-neighbour query."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from memofs.files.records import Memory
from memofs_datasets.format import Dataset

from memofs_eval.studies.systems.base import Ask, Recalled, System, folder_bytes
from memofs_eval.studies.systems.embedding import warmed_embedder


def collection_name(scope: str) -> str:
    return ("s-" + re.sub(r"[^A-Za-z0-9_-]", "-", scope))[:60].rstrip("-_") + "-c"


class ChromaSystem(System):
    OPTIONS = {"embedder": (str,)}

    def __init__(self, name: str, *, base: Path = Path("."), embedder: str = "minilm") -> None:
        self.name, self.embedder_name = name, embedder
        self._root: Path | None = None
        self._client = None
        self._cols: dict[str, object] = {}
        self._emb = None

    def open(self, dataset: Dataset) -> None:
        import chromadb
        from chromadb.config import Settings

        self._emb = warmed_embedder(self.embedder_name, dataset)
        if self._emb is None:
            raise ValueError("chroma needs an embedder (options.embedder)")
        self._root = Path(tempfile.mkdtemp(prefix="chroma-sut-"))
        self._client = chromadb.PersistentClient(path=str(self._root), settings=Settings(anonymized_telemetry=False))

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        col = self._client.create_collection(collection_name(scope), metadata={"hnsw:space": "cosine"},
                                             embedding_function=None)
        vecs = self._emb.encode([m.text for m in memories])
        col.add(ids=[m.id for m in memories], documents=[m.text for m in memories], embeddings=vecs.tolist())
        self._cols[scope] = col

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        col = self._cols[scope]
        qv = self._emb.encode([ask.text])[0].tolist()
        res = col.query(query_embeddings=[qv], n_results=min(k, col.count()), include=["distances"])
        ids, dist = res["ids"][0], res["distances"][0]
        return Recalled(tuple(ids), tuple(1.0 - float(d) for d in dist))

    def index_bytes(self) -> int | None:
        return folder_bytes(self._root) if self._root else None

    def reset(self) -> None:
        self._cols.clear()
        self._client = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        self._root = None

    close = reset
