"""The records of a memofs dataset (:class:`Dataset`, :class:`Query`, :class:`Change`), the
format's constants and file names, and their canonical JSON: the objects ``write_dataset``
writes and :meth:`Dataset.content_hash` hashes.  See ``datasets/README.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from memofs.files import memory_lines
from memofs.text.lexicon import TASK_TYPES
from memofs.files.records import GraphEdge, GraphNode, Memory
from memofs.files.timestamps import format_iso

QUERY_CATEGORIES: tuple[str, ...] = (
    "identifier",
    "exact_phrase",
    "error_code_version",
    "paraphrase",
    "abbreviation",
    "temporal_superseded",
    "temporal_recency",
    "stale_anchor",
    "expired_kind",
    "task_typed",
)
SPLITS: tuple[str, ...] = ("tune", "heldout")
CHANGE_KINDS: tuple[str, ...] = ("modified", "deleted")
MAX_RELEVANCE = 3
FORMAT = 2
"""``format`` of ``dataset.toml``: 2 (written since issue 35) stores ``memories.jsonl`` in the
store's dialect (:mod:`memofs.files.memory_lines`); 1 (the key absent) nests a memory's
metadata under ``"metadata"``."""

DATASET_TOML = "dataset.toml"
MEMORIES = "memories.jsonl"
QUERIES = "queries.jsonl"
QRELS = "qrels.tsv"
NODES = "graph/nodes.jsonl"
EDGES = "graph/edges.jsonl"
_FILE_ORDER = (DATASET_TOML, MEMORIES, QUERIES, QRELS, NODES, EDGES)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Query:
    """One evaluation query; ``scope`` restricts its corpus to one namespace, ``as_of`` overrides "now"."""

    id: str
    text: str
    task_type: str = "general"
    category: str = "uncategorized"
    split: str | None = None
    as_of: datetime | None = None
    scope: str | None = None
    notes: str = ""
    metadata: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Change:
    """A file of the source tree changed (``modified`` | ``deleted``) after the memories were written."""

    namespace: str
    path: str
    change: str
    date: datetime


# --------------------------------------------------------------------------- dates


def _utc(dt: datetime | None) -> str | None:
    return None if dt is None else format_iso(dt.astimezone(timezone.utc))


# --------------------------------------------------------------------------- dataset


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset.  ``qrels[query_id][memory_id] = relevance`` (0-3, zeros are judged-not-relevant).

    ``source_tree`` is relative to ``root`` (the folder the dataset was loaded from); anchors of a
    memory in namespace NS resolve to ``root / source_tree / NS / anchor.path``.  ``stats`` is a
    loader's report (counts, dropped items) and takes no part in equality or the content hash.
    """

    name: str
    version: str
    as_of: datetime
    licence: str
    description: str
    memories: tuple[Memory, ...]
    queries: tuple[Query, ...]
    qrels: dict[str, dict[str, int]]
    graph_nodes: tuple[GraphNode, ...] = ()
    graph_edges: tuple[GraphEdge, ...] = ()
    source_tree: Path | None = None
    changes: tuple[Change, ...] = ()
    root: Path | None = field(default=None, compare=False)
    stats: dict = field(default_factory=dict, compare=False)

    @cached_property
    def _by_namespace(self) -> dict[str, tuple[Memory, ...]]:
        groups: dict[str, list[Memory]] = {}
        for m in self.memories:
            groups.setdefault(m.namespace, []).append(m)
        return {ns: tuple(ms) for ns, ms in groups.items()}

    @cached_property
    def memories_by_id(self) -> dict[str, Memory]:
        return {m.id: m for m in self.memories}

    @cached_property
    def queries_by_id(self) -> dict[str, Query]:
        return {q.id: q for q in self.queries}

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self._by_namespace)

    def corpus_for(self, query: Query) -> tuple[Memory, ...]:
        """The memories a query is asked against: its scope namespace, or everything if unscoped."""
        if query.scope is None:
            return self.memories
        return self._by_namespace.get(query.scope, ())

    def relevant(self, query_id: str, min_relevance: int = 1) -> dict[str, int]:
        return {m: r for m, r in self.qrels.get(query_id, {}).items() if r >= min_relevance}

    def split(self, name: str) -> Dataset:
        """The queries of split ``name`` with their qrels; memories and graph are kept whole."""
        queries = tuple(q for q in self.queries if q.split == name)
        if not queries:
            have = sorted({str(q.split) for q in self.queries})
            raise ValueError(f"dataset {self.name!r} has no query in split {name!r} (splits: {have})")
        keep = {q.id for q in queries}
        qrels = {qid: dict(j) for qid, j in self.qrels.items() if qid in keep}
        return dataclasses.replace(self, queries=queries, qrels=qrels, stats={**self.stats, "split": name})

    def anchor_root(self, namespace: str) -> Path | None:
        """Folder the anchors of ``namespace`` resolve against (None without a source tree)."""
        if self.source_tree is None or self.root is None:
            return None
        return self.root / self.source_tree / namespace

    def graph_for(self, namespace: str | None) -> tuple[tuple[GraphNode, ...], tuple[GraphEdge, ...]]:
        """The entity graph a query scoped to ``namespace`` sees.

        Node ids of the form ``<namespace>:...`` belong to that namespace (the authored
        datasets prefix each project's graph so); other nodes are shared by every scope.
        Edges are kept when both ends are visible. Unscoped queries see the whole graph.
        """
        if namespace is None:
            return self.graph_nodes, self.graph_edges
        spaces = set(self.namespaces)

        def visible(node_id: str) -> bool:
            head = node_id.split(":", 1)[0] if ":" in node_id else None
            return head not in spaces or head == namespace

        nodes = tuple(n for n in self.graph_nodes if visible(n.id))
        ids = {n.id for n in nodes}
        return nodes, tuple(e for e in self.graph_edges if e.source in ids and e.target in ids)

    def changes_for(self, namespace: str) -> dict[str, Change]:
        """Declared changes of one namespace's tree, keyed by anchor path."""
        return {c.path: c for c in self.changes if c.namespace == namespace}

    def now_for(self, query: Query) -> datetime:
        """"Now" for recency and expiry: the query's ``as_of`` or the dataset's."""
        return query.as_of if query.as_of is not None else self.as_of

    def content_hash(self) -> str:
        """sha256 of canonical JSON lines (sorted keys, UTC timestamps) of as_of, memories, queries,
        qrels, graph, changes and the source tree's file hashes.  Name, version, licence,
        description, stats and the folder location do not enter it."""
        h = hashlib.sha256()
        for record in self._canonical_records():
            h.update(json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
            h.update(b"\n")
        return h.hexdigest()

    def _canonical_records(self) -> Iterator[Any]:
        yield {"as_of": _utc(self.as_of), "source_tree": None if self.source_tree is None else self.source_tree.as_posix()}
        for m in self.memories:
            yield {"memory": {**memory_lines.nested_line(m), "created_at": _utc(m.created_at)}}
        for q in self.queries:
            yield {"query": {**query_to_json(q), "as_of": _utc(q.as_of)}}
        for qid in sorted(self.qrels):
            for mid in sorted(self.qrels[qid]):
                yield {"qrel": [qid, mid, self.qrels[qid][mid]]}
        for n in self.graph_nodes:
            yield {"node": node_to_json(n)}
        for e in self.graph_edges:
            yield {"edge": edge_to_json(e)}
        for c in self.changes:
            yield {"change": {**change_to_json(c), "date": _utc(c.date)}}
        if self.source_tree is not None and self.root is not None:
            tree = self.root / self.source_tree
            for p in sorted(tree.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:  # bytecode caches are not content
                    yield {"file": [p.relative_to(tree).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest()]}


# --------------------------------------------------------------------------- serialisation


def query_to_json(q: Query) -> dict[str, Any]:
    out: dict[str, Any] = {"id": q.id, "text": q.text, "task_type": q.task_type, "category": q.category,
                           "split": q.split}
    if q.as_of is not None:
        out["as_of"] = format_iso(q.as_of)
    if q.scope is not None:
        out["scope"] = q.scope
    if q.notes:
        out["notes"] = q.notes
    if q.metadata:
        out["metadata"] = dict(q.metadata)
    return out


def node_to_json(n: GraphNode) -> dict[str, Any]:
    return {"id": n.id, "label": n.label, "type": n.type, "aliases": list(n.aliases), "status": n.status,
            "summary": n.summary}


def edge_to_json(e: GraphEdge) -> dict[str, Any]:
    return {"source": e.source, "target": e.target, "type": e.type, "status": e.status}


def change_to_json(c: Change) -> dict[str, Any]:
    return {"namespace": c.namespace, "path": c.path, "change": c.change, "date": format_iso(c.date)}
