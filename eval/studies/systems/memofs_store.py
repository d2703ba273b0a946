"""memofs through its public surfaces: a store on disk written by the library
(:meth:`memofs.store.project.Store.remember`, each memory with its own date, kind,
confidence and tags), then recalled through the MCP server (``memofs --root DIR mcp``,
tool ``memofs.recall``) or the CLI (``memofs --root DIR recall --json``), one store per scope.

The served ids are the store's own; the adapter maps them back. The surfaces rank at the
harness's "now" (each query's ``as_of``, else the dataset's), passed as ``--as-of`` (issue 46,
item 5): the MCP server is started with the scope's first "now" and started again when a
query asks at another, the CLI gets each query's; both get the query's task type, as the
library adapter does. ``embedder``: ``minilm`` (the CLI's default local model) or
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
from datetime import datetime
from pathlib import Path

from memofs.files.records import Memory
from memofs.files.timestamps import format_iso
from memofs.store.project import Store, wall_clock
from memofs_datasets.format import Dataset

from memofs_eval.runs.embed import CachedEmbedder
from memofs_eval.studies.systems.base import AdapterConfigError, Ask, Recalled, System, folder_bytes
from memofs_eval.studies.systems.embedding import warmed_embedder
from memofs_eval.studies.systems.mcp_client import McpServer, McpSystem, fill

MEMOFS = str(Path(sys.executable).with_name("memofs"))
EMBEDDERS = ("minilm", "none")


def write_store(root: Path, memories: Sequence[Memory], embedder: CachedEmbedder | None = None) -> dict[str, str]:
    """A fresh store at ``root`` holding ``memories`` (with their vectors from ``embedder``);
    returns store id -> memory id. Memories with blank text are left out (``remember``
    refuses them, as it would a user's): they are never in the served rankings."""
    store = Store.init(root, clock=wall_clock)  # every memory is written with its own date (now=)
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


def as_of_args(now: datetime | None) -> list[str]:
    """``--as-of NOW`` for a surface (none when there is no "now": the wall clock)."""
    return [] if now is None else ["--as-of", format_iso(now)]


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
                         recall_arguments={"query": "{query}", "limit": "{k}", "taskType": "{task_type}"},
                         result_path="items[*].id",
                         score_path="items[*].score")
        self.embedder_name, self._emb = embedder, None
        self._as_of: datetime | None = None  # the dataset's "now" (open)
        self._at: dict[str, datetime] = {}  # scope -> the "now" its running server ranks at

    def open(self, dataset: Dataset) -> None:
        self._emb = store_embedder(self.embedder_name, dataset)
        self._as_of = dataset.as_of

    def start(self, scope: str, workdir: Path) -> McpServer:
        """``memofs --root WORKDIR mcp --as-of NOW``: NOW is the scope's current "now" (the
        dataset's ``as_of`` until a query asks at another), so the server ranks as the library does."""
        at = self._at.setdefault(scope, self._as_of)
        args = [*fill(self.args, {"workdir": str(workdir), "scope": scope}), *as_of_args(at)]
        return McpServer(self.command, args, dict(self.env), None)

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        if self._at.get(scope) != ask.now:  # a server's clock is fixed at its start: start one at this "now"
            self._servers.pop(scope).close()
            self._at[scope] = ask.now
            self._servers[scope] = self.start(scope, self._dirs[scope])
        return super().recall(scope, ask, k)

    def reset(self) -> None:
        super().reset()
        self._at = {}

    close = reset

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

        proc = subprocess.run([MEMOFS, "--root", str(self._dirs[scope]), "recall", "-q", ask.text, "-k", str(k), "--json",
                               "--task-type", ask.task_type, *as_of_args(ask.now)],
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
