"""memofs through its public surfaces: a store on disk written by the library
(:func:`write_store`: each scope's memories imported whole with ``Store.import_memories``, its
entity graph, its source tree and the profile), then recalled through the MCP server
(``memofs --root DIR mcp``, tool ``memofs.recall``) or the CLI (``memofs --root DIR recall
--json``), one store per scope, so the served row ranks as the library row does (issue 46,
item 5; tested ranking for ranking).

The surfaces rank at the harness's "now" (each query's ``as_of``, else the dataset's), passed
as ``--as-of``: the MCP server is started with the scope's first "now" and started again when
a query asks at another, the CLI gets each query's; both get the query's task type, as the
library adapter does. ``profile``: config.json ``recall.profile`` (default ``reference``).
``embedder``: ``minilm`` (the CLI's default local model) or ``none``
(``MEMOFS_EMBEDDER=none``, lexical only). With ``minilm`` the store is written with each
memory's vector from the harness's embedding cache (:mod:`.embedding`): the served surfaces
load those vectors (same model name and dimension) instead of encoding every memory again,
and encode only the query (one text, not the harness's batch: its floats can differ in the
last bits, so a near-tie can swap).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from memofs.files.records import Memory
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.profiles import PROFILE_NAMES
from memofs.files.timestamps import format_iso
from memofs.store.project import Store, wall_clock
from memofs_datasets.format import Dataset

from memofs_eval.runs.embed import CachedEmbedder
from memofs_eval.studies.systems.base import AdapterConfigError, Ask, Recalled, System, folder_bytes
from memofs_eval.studies.systems.embedding import warmed_embedder
from memofs_eval.studies.systems.mcp_client import McpServer, McpSystem, fill
from memofs_eval.studies.systems.memofs_library import scope_sources

MEMOFS = str(Path(sys.executable).with_name("memofs"))
EMBEDDERS = ("minilm", "none")


def write_store(root: Path, memories: Sequence[Memory], embedder: CachedEmbedder | None = None, *,
                graph: EntityGraph | None = None, source_tree: Path | None = None,
                profile: str | None = None) -> dict[str, str]:
    """A fresh store at ``root`` holding ``memories`` (with their vectors from ``embedder``),
    imported whole (``Store.import_memories``: their ids, dates, kinds, namespaces, entities
    and supersessions as the dataset gives them); returns store id -> memory id. Memories with
    blank text are left out (the store refuses them, as it would a user's).

    ``graph`` (the scope's entity graph, :func:`.memofs_library.scope_sources`): the store's
    graph is that one, curated (``Store.write_graph``, config.json ``autoExtractGraph: false``:
    no rule-based facts are added). ``source_tree``: the project's files, copied into ``root``
    before the store is made, so each memory's anchors, kept as the dataset recorded them (the
    hash its file had then), drift against it as they do in the library; without one the
    memories are written without anchors (the library has nothing to check them against
    either). ``profile``: config.json ``recall.profile``. So the served store ranks as
    :class:`~.memofs_library.MemofsLibrary` does over the same scope (issue 46, item 5)."""
    if source_tree is not None and source_tree.is_dir():
        shutil.copytree(source_tree, root, symlinks=True, dirs_exist_ok=True)
    store = Store.init(root, clock=wall_clock, profile=profile, auto_extract_graph=None if graph is None else False)
    if graph is not None:
        store.write_graph(graph)
    kept = [m if source_tree is not None else replace(m, anchors=()) for m in memories if m.text.strip()]
    vectors = embedder.encode([m.text for m in kept]) if embedder is not None and kept else None
    store.import_memories(kept, vectors=vectors, embedder_name=embedder.name if vectors is not None else None)
    return {m.id: m.id for m in kept}


def store_embedder(embedder: str, dataset: Dataset) -> CachedEmbedder | None:
    """The cached MiniLM a store is written with (None for a lexical-only store)."""
    return warmed_embedder("minilm", dataset) if embedder == "minilm" else None


def served_store(root: Path, dataset: Dataset | None, scope: str, memories: Sequence[Memory],
                 embedder: CachedEmbedder | None, profile: str) -> dict[str, str]:
    """:func:`write_store` for a served adapter: the scope's graph and source tree from
    ``dataset`` (as the library adapter ranks with them), and ``profile``."""
    if dataset is None:
        raise RuntimeError("open(dataset) comes before ingest")
    graph, tree = scope_sources(dataset, scope)
    return write_store(root, memories, embedder, graph=graph, source_tree=tree, profile=profile)


def _profile(name: str, profile: str) -> str:
    if profile not in PROFILE_NAMES:
        raise AdapterConfigError(name, "options.profile", f"expected one of {', '.join(PROFILE_NAMES)}, got {profile!r}")
    return profile


def as_of_args(now: datetime | None) -> list[str]:
    """``--as-of NOW`` for a surface (none when there is no "now": the wall clock)."""
    return [] if now is None else ["--as-of", format_iso(now)]


def _env(name: str, embedder: str) -> dict[str, str]:
    if embedder not in EMBEDDERS:
        raise AdapterConfigError(name, "options.embedder", f"expected one of {', '.join(EMBEDDERS)}, got {embedder!r}")
    return {"HF_HUB_OFFLINE": "1", **({"MEMOFS_EMBEDDER": "none"} if embedder == "none" else {})}


class MemofsMcp(McpSystem):
    """The memofs MCP server over stdio, its ``memofs.recall`` tool ranking each scope's store."""

    OPTIONS = {"embedder": (str,), "profile": (str,)}
    REQUIRED = ()
    extra_id_prefixes = ("graph:",)  # the store's graph nodes are documents too (facts "Graph nodes in BM25")

    def __init__(self, name: str, *, base: Path = Path("."), embedder: str = "minilm", profile: str = "reference") -> None:
        super().__init__(name, base=base, command=MEMOFS, args=["--root", "{workdir}", "mcp"], env=_env(name, embedder),
                         ingest_tool="memofs.remember", ingest_arguments={}, recall_tool="memofs.recall",
                         recall_arguments={"query": "{query}", "limit": "{k}", "taskType": "{task_type}"},
                         result_path="items[*].id",
                         score_path="items[*].score")
        self.embedder_name, self._emb, self.profile = embedder, None, _profile(name, profile)
        self._dataset: Dataset | None = None
        self._as_of: datetime | None = None  # the dataset's "now" (open)
        self._at: dict[str, datetime] = {}  # scope -> the "now" its running server ranks at

    def open(self, dataset: Dataset) -> None:
        self._emb = store_embedder(self.embedder_name, dataset)
        self._dataset, self._as_of = dataset, dataset.as_of

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
        self._ids[scope] = served_store(workdir, self._dataset, scope, memories, self._emb, self.profile)

    def ingest_one(self, server: McpServer, scope: str, m: Memory, ids: dict[str, str]) -> None:
        pass  # written with its dates by prepare (memofs.remember would stamp the wall clock)


class MemofsCli(System):
    """``memofs --root DIR recall -q TEXT -k K --json``, one process per query."""

    OPTIONS = {"embedder": (str,), "profile": (str,)}
    extra_id_prefixes = ("graph:",)

    def __init__(self, name: str, *, base: Path = Path("."), embedder: str = "minilm", profile: str = "reference") -> None:
        self.name, self.env, self.embedder_name = name, _env(name, embedder), embedder
        self.profile = _profile(name, profile)
        self._dataset: Dataset | None = None
        self._dirs: dict[str, Path] = {}
        self._ids: dict[str, dict[str, str]] = {}
        self._emb: CachedEmbedder | None = None

    def open(self, dataset: Dataset) -> None:
        self._emb = store_embedder(self.embedder_name, dataset)
        self._dataset = dataset

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        root = self._dirs[scope] = Path(tempfile.mkdtemp(prefix="memofs-cli-"))
        self._ids[scope] = served_store(root, self._dataset, scope, memories, self._emb, self.profile)

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
