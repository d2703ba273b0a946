"""Memory records shared by the store, the pipeline and the datasets."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

MEMORY_KINDS: tuple[str, ...] = ("decision", "constraint", "goal", "preference", "reference", "summary", "note")
"""The seven upstream memory kinds (upstream-facts.md section 10)."""


class InvalidInputError(ValueError):
    """A value given by the caller that memofs refuses (bad text, tag, kind, budget,
    cursor, anchor, a secret). The CLI reports it as ``memofs: error:`` (exit 1) and the
    MCP server as ``MCP_VALIDATION_ERROR``; any other ``ValueError`` is an internal error."""


@dataclass(frozen=True)
class Anchor:
    """A code anchor: a file path (relative to the project root) and its SHA-256 at write time."""

    path: str
    sha256: str
    lines: tuple[int, int] | None = None


@dataclass(frozen=True)
class Memory:
    """One memory. ``created_at`` is timezone-aware; ``confidence`` None means "not given"."""

    id: str
    text: str
    kind: str = "note"
    created_at: datetime | None = None
    confidence: float | None = None
    namespace: str = "default"
    tags: tuple[str, ...] = ()
    anchors: tuple[Anchor, ...] = ()
    supersedes: tuple[str, ...] = ()
    metadata: dict = field(default_factory=dict, compare=False, hash=False)


GRAPH_STATUSES: tuple[str, ...] = ("active", "deprecated", "retired", "conflicted", "deleted")
"""Node and edge statuses. ``retired`` and ``deprecated`` nodes are filtered from recall."""


@dataclass(frozen=True)
class GraphNode:
    """An entity-graph node (concept, tool, decision, ...) with label and aliases."""

    id: str
    label: str
    type: str = "concept"
    aliases: tuple[str, ...] = ()
    status: str = "active"
    summary: str = ""


@dataclass(frozen=True)
class GraphEdge:
    """A directed edge ``source -[type]-> target`` (uses, prefers, depends_on, supersedes, ...)."""

    source: str
    target: str
    type: str
    status: str = "active"
