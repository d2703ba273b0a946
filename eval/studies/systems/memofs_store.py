"""memofs through its public surfaces: a store on disk written by the library
(:meth:`memofs.store.project.Store.remember`, each memory with its own date, kind,
confidence and tags), then recalled through the MCP server (``memofs --root DIR mcp``,
tool ``memofs.recall``) or the CLI (``memofs --root DIR recall --json``), one store per scope.

The served ids are the store's own; the adapter maps them back. The surfaces rank at the
wall clock (a store has no other "now"), so memory ages differ from the harness's, which
asks at the dataset's ``as_of``: ranks can differ from the library adapter's through
recency and expiry alone. ``embedder``: ``minilm`` (the CLI's default local model) or
``none`` (``MEMOFS_EMBEDDER=none``, lexical only). With ``minilm`` the store is written with
each memory's vector from the harness's embedding cache (:mod:`.embedding`; ``remember``'s
``embedder``): the served surfaces load those vectors (same model name and dimension) instead
of encoding every memory again, and encode only the query.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from memofs.files.records import Memory
from memofs.store.project import Store, wall_clock
from memofs_datasets.format import Dataset

from memofs_eval.runs.embed import CachedEmbedder
from memofs_eval.studies.systems.base import AdapterConfigError, Ask, Recalled, System, folder_bytes
from memofs_eval.studies.systems.embedding import warmed_embedder
from memofs_eval.studies.systems.mcp_client import McpServer, McpSystem

MEMOFS = str(Path(sys.executable).with_name("memofs"))
EMBEDDERS = ("minilm", "none")


def write_store(root: Path, memories: Sequence[Memory], embedder: CachedEmbedder | None = None) -> dict[str, str]:
    """A fresh store at ``root`` holding ``memories`` (with their vectors from ``embedder``);
    returns store id -> memory id. Memories with blank text are left out (``remember``
    refuses them, as it would a user's): they are never in the served rankings."""
    store = Store.init(root, clock=wall_clock)  # the surfaces read it at the wall clock too
    out: dict[str, str] = {}
    back: dict[str, str] = {}
    for m in memories:
        if not m.text.strip():  # the store refuses an empty memory; one would otherwise fail the whole scope
            continue
        kept = store.remember(m.text, kind=m.kind, confidence=m.confidence, tags=m.tags,
                              supersedes=[back[s] for s in m.supersedes if s in back], now=m.created_at,
                              metadata={"dataset_id": m.id}, embedder=embedder)
        out[kept.id], back[m.id] = m.id, kept.id
    return out


def store_embedder(embedder: str, dataset: Dataset) -> CachedEmbedder | None:
    """The cached MiniLM a store is written with (None for a lexical-only store)."""
    return warmed_embedder("minilm", dataset) if embedder == "minilm" else None


def _env(name: str, embedder: str) -> dict[str, str]:
    if embedder not in EMBEDDERS:
        raise AdapterConfigError(name, "options.embedder", f"expected one of {', '.join(EMBEDDERS)}, got {embedder!r}")
    return {"HF_HUB_OFFLINE": "1", **({"MEMOFS_EMBEDDER": "none"} if embedder == "none" else {})}


class MemofsMcp(McpSystem):
    """The memofs MCP server over stdio, its ``memofs.recall`` tool ranking each scope's store."""

    OPTIONS = {"embedder": (str,)}
    REQUIRED = ()

    def __init__(self, name: str, *, base: Path = Path("."), embedder: str = "minilm") -> None:
        super().__init__(name, base=base, command=MEMOFS, args=["--root", "{workdir}", "mcp"], env=_env(name, embedder),
                         ingest_tool="memofs.remember", ingest_arguments={}, recall_tool="memofs.recall",
                         recall_arguments={"query": "{query}", "limit": "{k}"}, result_path="items[*].id",
                         score_path="items[*].score")
        self.embedder_name, self._emb = embedder, None

    def open(self, dataset: Dataset) -> None:
        self._emb = store_embedder(self.embedder_name, dataset)

    def prepare(self, scope: str, workdir: Path, memories: Sequence[Memory]) -> None:
        self._ids[scope] = write_store(workdir, memories, self._emb)

    def ingest_one(self, server: McpServer, scope: str, m: Memory, ids: dict[str, str]) -> None:
        pass  # written with its dates by prepare (memofs.remember would stamp the wall clock)


class MemofsCli(System):
    """``memofs --root DIR recall -q TEXT -k K --json``, one process per query."""

    OPTIONS = {"embedder": (str,)}
    extra_id_prefixes = ("graph:",)

    def __init__(self, name: str, *, base: Path = Path("."), embedder: str = "minilm") -> None:
        self.name, self.env, self.embedder_name = name, _env(name, embedder), embedder
        self._dirs: dict[str, Path] = {}
        self._ids: dict[str, dict[str, str]] = {}
        self._emb: CachedEmbedder | None = None

    def open(self, dataset: Dataset) -> None:
        self._emb = store_embedder(self.embedder_name, dataset)

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        root = self._dirs[scope] = Path(tempfile.mkdtemp(prefix="memofs-cli-"))
        self._ids[scope] = write_store(root, memories, self._emb)

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        import os

        proc = subprocess.run([MEMOFS, "--root", str(self._dirs[scope]), "recall", "-q", ask.text, "-k", str(k), "--json"],
                              capture_output=True, text=True, env={**os.environ, **self.env}, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"memofs recall exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
        rows = json.loads(proc.stdout)["results"]
        ids = self._ids[scope]
        return Recalled(tuple(ids.get(r["id"], r["id"]) for r in rows), tuple(float(r["score"]) for r in rows))

    def index_bytes(self) -> int | None:
        return sum(folder_bytes(d) for d in self._dirs.values())

    def reset(self) -> None:
        for d in self._dirs.values():
            shutil.rmtree(d, ignore_errors=True)
        self._dirs, self._ids = {}, {}

    close = reset
