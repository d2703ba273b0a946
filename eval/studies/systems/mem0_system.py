"""mem0 open source (``pip install mem0ai``), no key and no network: ``Memory.add(...,
infer=False)`` stores each memory as given (no LLM extraction), embedded by mem0's own
``huggingface`` embedder configured on our local MiniLM (:class:`~memofs.signals.embedders.local.
LocalEmbedder`'s path) and then answered from the harness's embedding cache (:mod:`.embedding`:
the same vectors as every other system, a text encoded once across systems and runs; mem0
calls ``embedding_model.embed(text, action)``, which :class:`CachedMem0Embedding` serves), in a
local Chroma store; ``Memory.search`` with the scope as
``user_id`` ranks them. mem0 builds an OpenAI client at start even when inference is off, so
it gets a placeholder key that nothing ever sends (no call reaches an LLM with ``infer=False``;
the machine has no route to one either). Telemetry is switched off (``MEM0_TELEMETRY``).

Offline, mem0 ranks by vector similarity alone: its BM25 half needs a store with keyword
search (qdrant) *and* ``fastembed``, whose BM25 model is fetched from the Hugging Face hub
at run time, and its lemmatiser needs spaCy models (also downloads). ``threshold`` is mem0's
score floor (its default 0.1 when not given: results below it are dropped)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from memofs.files.records import Memory
from memofs.signals.embedders.local import LocalEmbedder
from memofs_datasets.format import Dataset

from memofs_eval.runs.embed import CachedEmbedder
from memofs_eval.studies.systems.base import Ask, Recalled, System, folder_bytes
from memofs_eval.studies.systems.embedding import warmed_embedder

PLACEHOLDER_KEY = "unused-infer-false"
os.environ.setdefault("MEM0_TELEMETRY", "False")  # before mem0 is imported: it reads it at import


class CachedMem0Embedding:
    """mem0's embedder interface (``embed`` / ``embed_batch``, as its ``EmbeddingBase``) over the
    harness's cached MiniLM: the vectors mem0's own huggingface embedder would compute for the
    same model, read from the cache instead of encoded again."""

    def __init__(self, emb: CachedEmbedder) -> None:
        self.emb = emb

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self.emb.encode([text])[0].tolist()

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        return self.emb.encode(list(texts)).tolist() if texts else []


class Mem0System(System):
    OPTIONS = {"threshold": (float, int)}

    def __init__(self, name: str, *, base: Path = Path("."), threshold: float | None = None) -> None:
        self.name, self.threshold = name, threshold
        self._root: Path | None = None
        self._mem = None

    def open(self, dataset: Dataset) -> None:
        from mem0 import Memory as Mem0

        self._root = Path(tempfile.mkdtemp(prefix="mem0-sut-"))
        config = {
            "vector_store": {"provider": "chroma", "config": {"collection_name": "memofs-sut", "path": str(self._root / "chroma")}},
            "embedder": {"provider": "huggingface", "config": {"model": LocalEmbedder().model_path(), "embedding_dims": 384}},
            "llm": {"provider": "openai", "config": {"api_key": PLACEHOLDER_KEY}},
            "history_db_path": str(self._root / "history.db"),
        }
        self._mem = Mem0.from_config(config)
        emb = warmed_embedder("minilm", dataset)
        assert emb is not None
        self._mem.embedding_model = CachedMem0Embedding(emb)

    @staticmethod
    def user(scope: str) -> str:
        return "scope-" + re.sub(r"[^A-Za-z0-9_-]", "-", scope)

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        for m in memories:
            self._mem.add(m.text, user_id=self.user(scope), infer=False, metadata={"sut_id": m.id})

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        extra = {} if self.threshold is None else {"threshold": float(self.threshold)}
        hits = self._mem.search(ask.text, filters={"user_id": self.user(scope)}, top_k=k, **extra)["results"]
        return Recalled(tuple(h["metadata"]["sut_id"] for h in hits), tuple(float(h["score"]) for h in hits))

    def index_bytes(self) -> int | None:
        return folder_bytes(self._root) if self._root else None

    def reset(self) -> None:
        self._mem = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        self._root = None

    close = reset
