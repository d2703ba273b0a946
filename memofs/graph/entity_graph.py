"""Entity graph: nodes, edges, entity resolution, state lines, consolidation, JSONL files.

Spec "Entity-boost"; upstream-facts.md section 8. Nodes keep insertion order, which is
the "node-list order" of :meth:`EntityGraph.resolve_entities`. An edge is identified by
``(source, type, target)`` (upstream hashes the same triple into a stable edge id), so
upserting it again replaces its status.

Differences from upstream:

* :meth:`bm25_documents` indexes ``label summary aliases``; upstream indexes only
  ``label summary``. Aliases let an abbreviation ("pg") reach the node's document.
* Upstream's sourceRefs (and its other record fields) are kept verbatim (``extra``) but
  not rendered, so lines have no ``↳ source:`` provenance line.
* One file dialect both tools read (issue 37): edge rows are written with upstream's
  ``from``/``to`` keys (memofs's older ``source``/``target`` rows are still read), and a
  ``retired`` node or edge is written with upstream's inactive status ``deprecated``
  (upstream's ``normalizeStatus`` refuses any other word), ``valid_until`` beside it.
* :meth:`consolidate` does the supersedes retirements only, no alias/label merges (merges
  delete the merged-away node; the brief asks that nothing is deleted). Retired items get
  status ``retired`` in memory (``deprecated`` in the files; both are filtered from recall) and a
  ``valid_until`` timestamp kept beside the record and persisted in the JSONL rows.
* :meth:`entity_state` also skips ``retired`` edges (upstream has no such status).
* :meth:`resolve_entities` matches on the recall tokenizer's terms by default, so a stop
  word ("for") never resolves an entity; ``match="upstream"`` keeps upstream's raw rule.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Literal, get_args

from memofs.files import safe_json
from memofs.files.atomic import atomic_write_text
from memofs.files.jsonl import append_lines, repair_tail
from memofs.files.records import GRAPH_STATUSES, GraphEdge, GraphNode
from memofs.files.timestamps import iso
from memofs.text.tokenize import tokenize

log = logging.getLogger("memofs.graph")

NODES_FILE = "nodes.jsonl"
EDGES_FILE = "edges.jsonl"

INACTIVE_STATUSES: frozenset[str] = frozenset({"retired", "deprecated"})
"""Node statuses filtered out of recall (graph BM25 docs of these nodes are dropped)."""

_DEAD_EDGE_STATUSES = frozenset({"deprecated", "deleted", "retired"})
STATE_EDGE_TYPES: tuple[str, ...] = ("uses", "prefers", "depends_on", "supersedes")
"""Outgoing edge types that make up an entity's state, in display order."""
SUPERSEDES = "supersedes"

UPSTREAM_NODE_FIELDS: tuple[str, ...] = ("metadata", "sourceRefs", "createdAt", "updatedAt", "validFrom",
                                         "validUntil", "expiresAt", "workspaceId", "projectId")
"""Fields of upstream's stored nodes (facts section 8) that memofs keeps verbatim
(:attr:`GraphNode.extra`) and writes back; ``confidence`` and ``importance`` are modelled."""
UPSTREAM_EDGE_FIELDS: tuple[str, ...] = ("id", "weight", "confidence", "directed", "metadata", "sourceRefs",
                                         "createdAt", "updatedAt", "validFrom", "validUntil", "expiresAt",
                                         "workspaceId", "projectId")
"""Fields of upstream's stored edges kept verbatim (:attr:`GraphEdge.extra`); upstream's
``from``/``to`` are read as ``source``/``target``."""

MAX_ALIASES = 64
MAX_LABEL = 512
MAX_SUMMARY = 16384
_ID = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9:_./@-]{0,191}")
_MIN_SUBSTRING_TERM = 3

EdgeKey = tuple[str, str, str]  # (source, type, target)

EntityMatch = Literal["terms", "upstream"]
ENTITY_MATCH_MODES: tuple[str, ...] = get_args(EntityMatch)
"""How query terms resolve graph entities (:meth:`EntityGraph.resolve_entities`):
``terms`` (our reading of the spec): only the recall tokenizer's terms of the expanded query
resolve an entity, so a stop word or a character the tokenizer drops never does;
``upstream``: upstream's rule on the raw lowercased expanded terms (any term of length >= 3
that is a substring of the label or an alias, stop words included)."""



class GraphValidationError(ValueError):
    """A node or edge that the graph refuses; ``field`` names the offending record field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _check_id(value: object, field: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value) or ".." in value:
        raise GraphValidationError(
            field,
            f"{field} {value!r} is not a graph id "
            "(pattern [a-zA-Z0-9][a-zA-Z0-9:_./@-]{0,191}, no '..')",
        )
    return value


def _check_status(value: object, field: str) -> str:
    if value not in GRAPH_STATUSES:
        raise GraphValidationError(field, f"{field} {value!r} must be one of: {', '.join(GRAPH_STATUSES)}")
    return value  # type: ignore[return-value]


def _merge_aliases(label: str, *groups: Iterable[str]) -> tuple[str, ...]:
    """Aliases in first-seen order, trimmed, case-insensitively unique, label excluded, max 64."""
    seen = {label.strip().casefold()}
    out: list[str] = []
    for group in groups:
        for alias in group:
            alias = alias.strip()
            key = alias.casefold()
            if alias and key not in seen:
                seen.add(key)
                out.append(alias)
    return tuple(out[:MAX_ALIASES])


def _upstream_matcher(ordered: list[str]) -> Callable[[str], str | None]:
    """Upstream ``resolveEntities`` on one candidate: exact term, else first long substring term."""
    term_set = set(ordered)
    long_terms = [t for t in ordered if len(t) >= _MIN_SUBSTRING_TERM]

    def hit(candidate: str) -> str | None:
        cand = candidate.lower()
        if cand in term_set:
            return cand
        return next((t for t in long_terms if t in cand), None)

    return hit


def _terms_matcher(ordered: list[str]) -> Callable[[str], str | None]:
    """The same two rules on recall tokens: stop words and dropped characters never match."""
    phrases: dict[tuple[str, ...], str] = {}
    words: dict[str, None] = {}
    for t in ordered:
        toks = tuple(tokenize(t))
        if toks:
            phrases.setdefault(toks, t)
            words.update(dict.fromkeys(toks))
    long_words = [w for w in words if len(w) >= _MIN_SUBSTRING_TERM]

    def hit(candidate: str) -> str | None:
        cand = tuple(tokenize(candidate))
        if not cand:
            return None
        if cand in phrases:
            return phrases[cand]
        return next((w for w in long_words if any(w in c for c in cand)), None)

    return hit


@dataclass(frozen=True)
class ResolvedEntity:
    """An active node matched by a query term; ``state`` comes from :meth:`EntityGraph.entity_state`."""

    node_id: str
    label: str
    type: str
    summary: str
    matched_term: str
    state: str


@dataclass(frozen=True)
class ConsolidationResult:
    """What :meth:`EntityGraph.consolidate` retired, and when."""

    retired_nodes: tuple[str, ...]
    retired_edges: tuple[EdgeKey, ...]
    now: datetime

    @property
    def changed(self) -> bool:
        return bool(self.retired_nodes or self.retired_edges)


class EntityGraph:
    """An in-memory entity graph with JSONL persistence."""

    def __init__(self, nodes: Iterable[GraphNode] = (), edges: Iterable[GraphEdge] = ()) -> None:
        self._nodes: dict[str, GraphNode] = {}
        self._edges: dict[EdgeKey, GraphEdge] = {}
        self._node_valid_until: dict[str, str] = {}
        self._edge_valid_until: dict[EdgeKey, str] = {}
        for node in nodes:
            self.upsert_node(node)
        for edge in edges:
            self.upsert_edge(edge)

    # ------------------------------------------------------------------ mutation
    def upsert_node(self, node: GraphNode) -> GraphNode:
        """Insert ``node`` or update the stored node with the same id; returns the stored node.

        On update, label, type and status are replaced, the summary is replaced unless the
        new one is empty, and aliases are merged (old first). The label never appears among
        the aliases (case-insensitive).
        """
        if not isinstance(node, GraphNode):
            raise TypeError(f"node must be GraphNode, got {type(node).__name__}")
        _check_id(node.id, "id")
        _check_status(node.status, "status")
        label = node.label.strip() if isinstance(node.label, str) else ""
        if not label:
            raise GraphValidationError("label", f"node {node.id!r}: label must be a non-empty string")
        if len(label) > MAX_LABEL:
            raise GraphValidationError("label", f"node {node.id!r}: label longer than {MAX_LABEL} characters")
        if not isinstance(node.summary, str):
            raise GraphValidationError("summary", f"node {node.id!r}: summary must be a string")
        if not all(isinstance(a, str) for a in node.aliases):
            raise GraphValidationError("aliases", f"node {node.id!r}: aliases must be strings")
        if len(node.summary) > MAX_SUMMARY:
            raise GraphValidationError(
                "summary", f"node {node.id!r}: summary longer than {MAX_SUMMARY} characters"
            )
        if not isinstance(node.type, str) or not node.type:
            raise GraphValidationError("type", f"node {node.id!r}: type must be a non-empty string")
        old = self._nodes.get(node.id)
        if old is None:
            stored = replace(node, label=label, aliases=_merge_aliases(label, node.aliases))
        else:
            stored = replace(
                node,
                label=label,
                summary=node.summary or old.summary,
                aliases=_merge_aliases(label, old.aliases, node.aliases),
            )
        self._nodes[node.id] = stored
        if stored.status not in INACTIVE_STATUSES:
            self._node_valid_until.pop(node.id, None)
        return stored

    def upsert_edge(self, edge: GraphEdge) -> GraphEdge:
        """Insert or replace the edge ``(source, type, target)``; both endpoints must exist."""
        if not isinstance(edge, GraphEdge):
            raise TypeError(f"edge must be GraphEdge, got {type(edge).__name__}")
        _check_status(edge.status, "status")
        if not isinstance(edge.type, str) or not edge.type:
            raise GraphValidationError("type", "edge type must be a non-empty string")
        for field in ("source", "target"):
            node_id = getattr(edge, field)
            if node_id not in self._nodes:
                raise GraphValidationError(field, f"edge {field} {node_id!r} is not a node of the graph")
        if edge.source == edge.target:
            raise GraphValidationError("target", f"self edge on {edge.source!r} is not allowed")
        key = (edge.source, edge.type, edge.target)
        self._edges[key] = edge
        if edge.status not in _DEAD_EDGE_STATUSES:
            self._edge_valid_until.pop(key, None)
        return edge

    # ------------------------------------------------------------------ reading
    def node(self, node_id: str) -> GraphNode:
        """The node with id ``node_id``; KeyError if absent."""
        try:
            return self._nodes[node_id]
        except KeyError:
            raise KeyError(f"no graph node {node_id!r}") from None

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def nodes(self) -> list[GraphNode]:
        """All nodes, in insertion order."""
        return list(self._nodes.values())

    @property
    def edges(self) -> list[GraphEdge]:
        """All edges, in insertion order."""
        return list(self._edges.values())

    def active_nodes(self) -> list[GraphNode]:
        """Nodes whose status is ``active``, in insertion order."""
        return [n for n in self._nodes.values() if n.status == "active"]

    def retired_ids(self) -> set[str]:
        """Ids of nodes with status ``retired`` or ``deprecated`` (dropped from recall)."""
        return {n.id for n in self._nodes.values() if n.status in INACTIVE_STATUSES}

    def valid_until(self, node_id: str) -> str | None:
        """ISO timestamp at which consolidation retired the node, if it did."""
        return self._node_valid_until.get(node_id)

    def bm25_documents(self, aliases: bool = True) -> list[tuple[str, str]]:
        """``("graph:<id>", "label summary aliases")`` for each active node.

        Empty parts are left out; aliases are joined by spaces. Upstream indexes only the
        label and summary (``aliases=False``, ``RecallConfig.graph_doc_aliases``); the
        aliases are our addition.
        """
        docs = []
        for n in self.active_nodes():
            parts = [n.label, n.summary.strip(), " ".join(n.aliases) if aliases else ""]
            docs.append((f"graph:{n.id}", " ".join(p for p in parts if p)))
        return docs

    # ------------------------------------------------------------------ resolution
    def resolve_entities(self, terms: Iterable[str], *, match: str = "terms") -> list[ResolvedEntity]:
        """Active nodes named by ``terms``, in node-list order (upstream ``resolveEntities``).

        ``terms`` are the expanded query terms (:attr:`memofs.text.rewrite.RewrittenQuery.expanded_terms`),
        lowercased and de-duplicated in order. For each active node the candidates are its
        label then its aliases; the first candidate that matches decides. ``match`` picks
        the rule (``RecallConfig.entity_match``):

        * ``"terms"`` (default; our reading of the write-up, which says terms): both sides
          are the recall tokenizer's terms (:func:`memofs.text.tokenize.tokenize`), so stop
          words and characters the tokenizer drops never resolve an entity. A candidate
          matches a term whose tokens equal the candidate's tokens (any length: "pg",
          "github actions"), else the first query token of length >= 3 that is a
          substring of one of the candidate's tokens ("auth" in "OAuth"). A candidate made
          only of stop words never matches.
        * ``"upstream"``: upstream's rule on the raw strings. A lowercased candidate matches
          a term it equals, else the first term of length >= 3 that is a substring of it,
          so "for" resolves "React Query for server state".
        """
        if match not in ENTITY_MATCH_MODES:
            raise ValueError(f"match must be one of {', '.join(ENTITY_MATCH_MODES)}; got {match!r}")
        ordered = list(dict.fromkeys(t.lower() for t in terms if isinstance(t, str) and t))
        if not ordered:
            return []
        hit = _upstream_matcher(ordered) if match == "upstream" else _terms_matcher(ordered)
        out: list[ResolvedEntity] = []
        for n in self.active_nodes():
            matched = None
            for candidate in (n.label, *n.aliases):
                matched = hit(candidate)
                if matched is not None:
                    break
            if matched is not None:
                out.append(
                    ResolvedEntity(n.id, n.label, n.type, n.summary, matched, self.entity_state(n.id))
                )
        return out

    def entity_state(self, node_id: str) -> str:
        """``"<type> <neighbour label>"`` parts of the node's live outgoing edges, ``"; "``-joined.

        Live = status not deprecated, deleted or retired. Types are visited in the order
        uses, prefers, depends_on, supersedes (edge insertion order within a type); other
        types do not count. Duplicate parts are dropped.
        """
        self.node(node_id)
        outgoing = [
            e for e in self._edges.values()
            if e.source == node_id and e.status not in _DEAD_EDGE_STATUSES
        ]
        parts: dict[str, None] = {}
        for edge_type in STATE_EDGE_TYPES:
            for e in outgoing:
                if e.type == edge_type:
                    target = self._nodes.get(e.target)
                    parts.setdefault(f"{edge_type} {target.label if target else e.target}", None)
        return "; ".join(parts)

    @staticmethod
    def render(resolved: Iterable[ResolvedEntity]) -> str:
        """One line per entity: ``"<n>. <label> (<type>)"`` + `` — currently: <state>``
        if the state is non-empty, else `` — <summary>`` if that is non-empty."""
        lines = []
        for i, r in enumerate(resolved, start=1):
            line = f"{i}. {r.label} ({r.type})"
            if r.state:
                line += f" — currently: {r.state}"
            elif r.summary:
                line += f" — {r.summary}"
            lines.append(line)
        return "\n".join(lines)

    def expansion_terms(self, resolved: Iterable[ResolvedEntity]) -> list[str]:
        """Recall tokens (``memofs.text.tokenize.tokenize``) of the label and aliases of each
        resolved entity, de-duplicated in order; appended to the recall query so the
        entities' ``graph:`` documents score in BM25. The recall tokenizer is used because
        these terms only ever meet BM25, which tokenizes the same way."""
        out: dict[str, None] = {}
        for r in resolved:
            node = self._nodes.get(r.node_id)
            names = (node.label, *node.aliases) if node else (r.label,)
            for name in names:
                out.update(dict.fromkeys(tokenize(name)))
        return list(out)

    # ------------------------------------------------------------------ consolidation
    def consolidate(self, now: datetime) -> ConsolidationResult:
        """Retire what active ``supersedes`` edges make obsolete (upstream section 8).

        Every active ``supersedes`` edge marks its target as superseded. Every active
        edge of another type that touches a superseded node is retired, and so is each
        superseded node that is not already inactive. The supersedes edges stay, so the
        superseding node still reads "supersedes <label>". Nothing is deleted; retired
        items get status ``retired`` and ``valid_until = now``.
        """
        if not isinstance(now, datetime):
            raise TypeError(f"now must be datetime, got {type(now).__name__}")
        stamp = iso(now)
        superseded: dict[str, None] = {}
        for e in self._edges.values():
            if e.type == SUPERSEDES and e.status == "active":
                superseded.setdefault(e.target, None)
        retired_edges: list[EdgeKey] = []
        for key, e in self._edges.items():
            if e.type != SUPERSEDES and e.status == "active" and (
                e.source in superseded or e.target in superseded
            ):
                retired_edges.append(key)
        for key in retired_edges:
            self._edges[key] = replace(self._edges[key], status="retired")
            self._edge_valid_until[key] = stamp
        retired_nodes = [
            nid for nid in superseded if self._nodes[nid].status not in INACTIVE_STATUSES
        ]
        for nid in retired_nodes:
            self._nodes[nid] = replace(self._nodes[nid], status="retired")
            self._node_valid_until[nid] = stamp
        return ConsolidationResult(tuple(retired_nodes), tuple(retired_edges), now)

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``nodes.jsonl`` and ``edges.jsonl`` under ``directory`` (created if needed).

        Each file is written to a temporary file in the same directory, fsynced, then
        moved into place with ``os.replace`` so a reader never sees a half-written file.
        """
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        node_rows = [self._node_row(n) for n in self._nodes.values()]
        edge_rows = [self._edge_row(key) for key in self._edges]
        _atomic_write_jsonl(root / NODES_FILE, node_rows)
        _atomic_write_jsonl(root / EDGES_FILE, edge_rows)

    def _node_row(self, n: GraphNode) -> dict:
        row = {"id": n.id, "label": n.label, "type": n.type, "aliases": list(n.aliases),
               "status": _file_status(n.status), "summary": n.summary}
        if (n.confidence, n.importance) != (1.0, 0.5):  # upstream's defaults stay implicit
            row.update(confidence=n.confidence, importance=n.importance)
        row.update(n.extra)  # upstream's other fields, written back as they were read
        if n.id in self._node_valid_until:
            row["valid_until"] = self._node_valid_until[n.id]
        return row

    def _edge_row(self, key: tuple[str, str, str]) -> dict:
        e = self._edges[key]
        # upstream's keys: its reader refuses an edge without ``from``/``to`` (issue 37)
        row = {"from": e.source, "to": e.target, "type": e.type, "status": _file_status(e.status), **e.extra}
        if key in self._edge_valid_until:
            row["valid_until"] = self._edge_valid_until[key]
        return row

    def merge_extracted(self, nodes: Iterable[GraphNode], edges: Iterable[GraphEdge]
                        ) -> tuple[list[str], list[tuple[str, str, str]], bool]:
        """Merge extracted facts the way a store write does: a node keeps the first label
        seen (a known id is left alone), an edge is upserted. Returns the new node ids, the
        new edge keys (what :meth:`append` writes) and whether a stored edge changed (then
        the files need :meth:`save`)."""
        new_nodes: list[str] = []
        new_edges: list[tuple[str, str, str]] = []
        changed = False
        for node in nodes:
            if node.id not in self._nodes:
                self.upsert_node(node)
                new_nodes.append(node.id)
        for edge in edges:
            key = (edge.source, edge.type, edge.target)
            old = self._edges.get(key)
            if old == edge and key not in self._edge_valid_until:
                continue
            self.upsert_edge(edge)
            if old is None:
                new_edges.append(key)
            else:
                changed = True
        return new_nodes, new_edges, changed

    def append(self, directory: str | os.PathLike[str], node_ids: Iterable[str],
               edge_keys: Iterable[tuple[str, str, str]]) -> None:
        """Append the rows of nodes and edges that the files do not hold yet (new ids and
        keys only: :meth:`load` refuses a repeated one), one fsynced write per file, a
        torn last line cut first. The caller holds the store lock; a changed node or edge
        needs :meth:`save`. A write costs what it adds, not the size of the graph."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        for name, rows in ((NODES_FILE, [self._node_row(self._nodes[i]) for i in node_ids]),
                           (EDGES_FILE, [self._edge_row(k) for k in edge_keys])):
            if rows:
                repair_tail(root / name, root)
                append_lines(root / name, [json.dumps(row, ensure_ascii=False) for row in rows])

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> EntityGraph:
        """Read a graph written by :meth:`save`. A missing file counts as empty.

        Bad input raises ValueError naming the file, the 1-based line and the field.
        """
        root = Path(directory)
        if not root.is_dir():
            raise FileNotFoundError(f"graph directory {str(root)!r} does not exist")
        graph = cls()
        for path, lineno, row in _read_jsonl(root / NODES_FILE):
            where = f"{path}:{lineno}"
            _expect_fields(row, where, required=("id", "label"),
                           optional=("type", "aliases", "status", "summary", "valid_until",
                                     "confidence", "importance", *UPSTREAM_NODE_FIELDS))
            aliases = row.get("aliases", [])
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise ValueError(f"{where}: field 'aliases' must be a list of strings")
            for field in ("id", "label", "type", "status", "summary", "valid_until"):
                if field in row and not isinstance(row[field], str) and not (field == "summary" and row[field] is None):
                    raise ValueError(f"{where}: field {field!r} must be a string")
            if row["id"] in graph:
                raise ValueError(f"{where}: field 'id' duplicates node {row['id']!r}")
            node = GraphNode(id=row["id"], label=row["label"], type=row.get("type", "concept"),
                             aliases=tuple(aliases), status=_model_status(row),
                             summary=row.get("summary") or "",
                             confidence=_unit(row, "confidence", 1.0, where),
                             importance=_unit(row, "importance", 0.5, where),
                             extra={k: row[k] for k in UPSTREAM_NODE_FIELDS if k in row})
            _upsert_at(graph.upsert_node, node, where)
            if "valid_until" in row:
                graph._node_valid_until[node.id] = row["valid_until"]
        for path, lineno, row in _read_jsonl(root / EDGES_FILE):
            where = f"{path}:{lineno}"
            row = _edge_endpoints(row, where)
            _expect_fields(row, where, required=("source", "target", "type"),
                           optional=("status", "valid_until", *UPSTREAM_EDGE_FIELDS))
            for field in ("source", "target", "type", "status", "valid_until"):
                if field in row and not isinstance(row[field], str):
                    raise ValueError(f"{where}: field {field!r} must be a string")
            edge = GraphEdge(source=row["source"], target=row["target"], type=row["type"],
                             status=_model_status(row),
                             extra={k: row[k] for k in UPSTREAM_EDGE_FIELDS if k in row})
            key = (edge.source, edge.type, edge.target)
            if key in graph._edges:
                raise ValueError(f"{where}: field 'type' duplicates edge {key!r}")
            _upsert_at(graph.upsert_edge, edge, where)
            if "valid_until" in row:
                graph._edge_valid_until[key] = row["valid_until"]
        return graph


def _file_status(status: str) -> str:
    """The status as the files spell it: ``retired`` is upstream's ``deprecated`` (its
    readers accept active, deprecated, conflicted, deleted, stale and unverified only)."""
    return "deprecated" if status == "retired" else status


def _model_status(row: dict) -> str:
    """The status of a file row: a ``deprecated`` row with memofs's ``valid_until`` is one
    :meth:`EntityGraph.consolidate` retired (:func:`_file_status`)."""
    status = row.get("status", "active")
    return "retired" if status == "deprecated" and "valid_until" in row else status


def _edge_endpoints(row: object, where: str) -> object:
    """An edge row with upstream's ``from``/``to`` spelled ``source``/``target`` (our rows);
    a row giving both spellings of an endpoint is refused."""
    if not isinstance(row, dict) or ("from" not in row and "to" not in row):
        return row
    out = dict(row)
    for ours, theirs in (("source", "from"), ("target", "to")):
        if theirs in out:
            if ours in out:
                raise ValueError(f"{where}: fields {ours!r} and {theirs!r} both given; give one")
            out[ours] = out.pop(theirs)
    return out


def _unit(row: dict, field: str, default: float, where: str) -> float:
    """A number in [0, 1] (upstream's node confidence and importance); ``default`` when absent."""
    value = row.get(field, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{where}: field {field!r} must be a number in [0, 1]; got {value!r}")
    return float(value)


def _upsert_at(upsert: Callable[[object], object], record: object, where: str) -> None:
    """Call ``upsert(record)``; a refusal is re-raised with file, line and field."""
    try:
        upsert(record)
    except GraphValidationError as exc:
        raise ValueError(f"{where}: field {exc.field!r}: {exc}") from None


def _expect_fields(row: object, where: str, *, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for field in required:
        if field not in row:
            raise ValueError(f"{where}: missing field {field!r}")
    for field in row:
        if field not in required and field not in optional:
            raise ValueError(f"{where}: unknown field {field!r}")


def _read_jsonl(path: Path) -> Iterator[tuple[Path, int, object]]:
    """Yield ``(path, line number, parsed object)``; blank lines are skipped."""
    if not path.exists():
        return
    data = safe_json.read_bytes(path)
    lines = data.split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        if line.strip():  # safe_json: UTF-8 and depth checked, errors name file and line
            try:
                obj = safe_json.parse(line, f"{path}:{lineno}")
            except safe_json.JSONFileError:
                if lineno == len(lines) and not data.endswith(b"\n"):
                    # an append killed mid-write (the graph is appended to): the next writer cuts it
                    log.warning("%s:%d: skipped a torn last line", path, lineno)
                    return
                raise
            yield path, lineno, obj


def _atomic_write_jsonl(path: Path, rows: list[dict]) -> None:
    """Temp file + fsync + rename + directory fsync, mode 0644 like every store file."""

    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
