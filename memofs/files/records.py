"""Memory records shared by the store, the pipeline and the datasets."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

from memofs.files import safe_json

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


def text_sha256(text: str) -> str:
    """The hex SHA-256 of a text's UTF-8: a stored vector names the text it was computed from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


GRAPH_STATUSES: tuple[str, ...] = ("active", "deprecated", "retired", "conflicted", "deleted")
"""Node and edge statuses. ``retired`` and ``deprecated`` nodes are filtered from recall."""


@dataclass(frozen=True)
class GraphNode:
    """An entity-graph node (concept, tool, decision, ...) with label and aliases;
    ``confidence`` and ``importance`` default as upstream's (1 and 0.5, facts section 8)."""

    id: str
    label: str
    type: str = "concept"
    aliases: tuple[str, ...] = ()
    status: str = "active"
    summary: str = ""
    confidence: float = 1.0
    importance: float = 0.5
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    """Upstream record fields memofs keeps but does not use (metadata, sourceRefs, times)."""


@dataclass(frozen=True)
class GraphEdge:
    """A directed edge ``source -[type]-> target`` (uses, prefers, depends_on, supersedes, ...)."""

    source: str
    target: str
    type: str
    status: str = "active"
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    """Upstream record fields memofs keeps but does not use (id, weight, confidence, ...)."""


MAX_TITLE_CHARS = 512
MAX_SOURCE_CHARS = 512
MAX_SOURCE_REFS = 100
MAX_EXTRAS_BYTES = 65_536
"""Largest JSON (UTF-8 bytes) of a memory's upstream fields together, checked on write."""
MEMORY_EXTRA_FIELDS: tuple[str, ...] = ("title", "source", "writer", "sourceRefs", "metadata")
"""Upstream's remember fields (facts sections 10 and 11, ``memofs.remember``), kept in
:attr:`Memory.metadata` under these keys and written as top-level keys of a
``memories.jsonl`` line: ``title`` (<= 512 characters), ``source`` (<= 512), ``writer``,
``sourceRefs`` (<= 100 objects, each with a string ``sourceType``) and ``metadata`` (the
caller's own JSON object)."""


def memory_extras(*, title: object = None, source: object = None, writer: object = None,
                  source_refs: object = None, metadata: object = None) -> dict:
    """The upstream remember fields, validated, as :attr:`Memory.metadata` holds them
    (absent ones left out). Raises :class:`InvalidInputError` naming the field.

    A sourceRef follows upstream's rules: an object with a string ``sourceType``; a ``url``
    must be http(s); a ``path`` must be relative to the workspace (no leading ``/``, no
    ``..``)."""
    out: dict = {}
    for name, value, limit in (("title", title, MAX_TITLE_CHARS), ("source", source, MAX_SOURCE_CHARS),
                               ("writer", writer, MAX_SOURCE_CHARS)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidInputError(f"field {name!r} must be a string; got {type(value).__name__}")
        value = value.strip()
        if len(value) > limit:
            raise InvalidInputError(f"field {name!r} has {len(value)} characters; the limit is {limit}")
        if value:
            out[name] = value
    if source_refs is not None:
        if not isinstance(source_refs, (list, tuple)) or len(source_refs) > MAX_SOURCE_REFS:
            raise InvalidInputError(f"field 'sourceRefs' must be a list of at most {MAX_SOURCE_REFS} objects")
        for j, ref in enumerate(source_refs):
            where = f"field 'sourceRefs[{j}]'"
            if not isinstance(ref, dict) or not isinstance(ref.get("sourceType"), str) or not ref["sourceType"].strip():
                raise InvalidInputError(f"{where} must be an object with a non-empty string 'sourceType'")
            url, path = ref.get("url"), ref.get("path")
            if url is not None and (not isinstance(url, str) or not url.lower().startswith(("http://", "https://"))):
                raise InvalidInputError(f"{where}: 'url' must be an http(s) URL")
            if path is not None and (not isinstance(path, str) or path.startswith(("/", "\\"))
                                     or ".." in path.replace("\\", "/").split("/")):
                raise InvalidInputError(f"{where}: 'path' must be relative to the workspace")
        if source_refs:
            out["sourceRefs"] = [dict(r) for r in source_refs]
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InvalidInputError(f"field 'metadata' must be a JSON object; got {type(metadata).__name__}")
        if metadata:
            out["metadata"] = dict(metadata)
    return out


def upstream_note_metadata(memory: Memory) -> dict:
    """The ``metadata`` upstream writes for a note (facts section 10, writeMemory step 4):
    ``{id, sourceRefs?, ...userMetadata}``, the caller's metadata spread last (it may
    override, as upstream's does)."""
    meta: dict = {"id": memory.id}
    if memory.metadata.get("sourceRefs"):
        meta["sourceRefs"] = memory.metadata["sourceRefs"]
    user = memory.metadata.get("metadata")
    if isinstance(user, dict):
        meta.update(user)
    return meta


def check_storable_extras(extras: dict) -> None:
    """Refuse, on write, upstream fields that a load of their line would not accept, so an
    acknowledged memory never makes the store unreadable: JSON too large (over
    :data:`MAX_EXTRAS_BYTES`), nested deeper than the store's reader allows (they are keys
    of the line's top-level object, so their depth there is the depth counted here), or
    values JSON cannot write and read back (an integer over Python's digit limit, a
    non-JSON type). Raises :class:`InvalidInputError`; the message never echoes the value."""
    try:
        text = json.dumps(extras, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        reason = "a number that is not finite" if "compliant" in str(exc) else type(exc).__name__
        raise InvalidInputError(f"fields {', '.join(map(repr, extras))} are not storable JSON ({reason})") from None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON given): no UTF-8 line can hold it
        raise InvalidInputError(f"fields {', '.join(map(repr, extras))} are not storable JSON "
                                "(a lone surrogate is not valid Unicode)") from None
    if size > MAX_EXTRAS_BYTES:
        raise InvalidInputError(f"fields {', '.join(map(repr, extras))} take {size} bytes as JSON; "
                                f"the limit is {MAX_EXTRAS_BYTES}")
    try:
        safe_json.parse(text, "metadata")
    except safe_json.JSONFileError as exc:
        raise InvalidInputError(f"field {exc.where!r} is not storable: {exc.reason}") from None
