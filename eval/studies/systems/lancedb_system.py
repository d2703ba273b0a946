"""LanceDB (``pip install lancedb``), embedded, no key, no network: one table per scope with
the memories' MiniLM vectors (the harness's, :mod:`.embedding`) and LanceDB's native
full-text index on the text; ``mode = "hybrid"`` asks both and fuses them with LanceDB's own
``RRFReranker`` (its hybrid default), ``"vector"`` or ``"fts"`` ask one."""

from __future__ import annotations

import re
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from memofs.files.records import Memory
from memofs_datasets.format import Dataset

from memofs_eval.studies.systems.base import AdapterConfigError, Ask, Recalled, System, folder_bytes
from memofs_eval.studies.systems.embedding import warmed_embedder

MODES = ("hybrid", "vector", "fts")


def table_name(scope: str) -> str:
    return "s_" + re.sub(r"[^A-Za-z0-9_]", "_", scope)


class LanceDbSystem(System):
    OPTIONS = {"mode": (str,), "embedder": (str,)}

    def __init__(self, name: str, *, base: Path = Path("."), mode: str = "hybrid", embedder: str = "minilm") -> None:
        if mode not in MODES:
            raise AdapterConfigError(name, "options.mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
        self.name, self.mode, self.embedder_name = name, mode, embedder
        self._root: Path | None = None
        self._db = None
        self._tables: dict[str, object] = {}
        self._emb = None

    def open(self, dataset: Dataset) -> None:
        import lancedb

        self._emb = warmed_embedder(self.embedder_name, dataset) if self.mode != "fts" else None
        self._root = Path(tempfile.mkdtemp(prefix="lancedb-sut-"))
        self._db = lancedb.connect(str(self._root))

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        rows = [{"id": m.id, "text": m.text} for m in memories]
        if self._emb is not None:
            for row, vec in zip(rows, self._emb.encode([m.text for m in memories]), strict=True):
                row["vector"] = vec.tolist()
        table = self._db.create_table(table_name(scope), data=rows, mode="overwrite")
        if self.mode != "vector":
            # positions: LanceDB parses a quoted query as a phrase query, which needs them
            with warnings.catch_warnings():  # deprecated in 0.25 for create_index(config=FTS()), still the FTS path
                warnings.simplefilter("ignore")
                table.create_fts_index("text", replace=True, with_position=True)
        self._tables[scope] = table

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        from lancedb.rerankers import RRFReranker

        table = self._tables[scope]
        if self.mode == "fts":
            q = table.search(ask.text, query_type="fts")
        else:
            qv = self._emb.encode([ask.text])[0].tolist()
            if self.mode == "vector":
                q = table.search(qv, query_type="vector").distance_type("cosine")
            else:
                q = table.search(query_type="hybrid").vector(qv).text(ask.text).rerank(RRFReranker())
        rows = q.limit(k).to_list()
        key = next((c for c in ("_relevance_score", "_score") if rows and c in rows[0]), None)
        if key is None and rows:  # vector mode: distance, smaller is better
            return Recalled(tuple(r["id"] for r in rows), tuple(-float(r["_distance"]) for r in rows))
        return Recalled(tuple(r["id"] for r in rows), tuple(float(r[key]) for r in rows) if key else None)

    def index_bytes(self) -> int | None:
        return folder_bytes(self._root) if self._root else None

    def reset(self) -> None:
        self._tables.clear()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        self._root, self._db = None, None

    close = reset
