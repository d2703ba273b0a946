"""``memories.jsonl`` lines: the one dialect memofs writes, and the two it reads.

The written dialect is the store's (STORE.md "Layout", upstream's remember fields, facts
sections 10 and 11): the nine core fields of :class:`~memofs.files.records.Memory`, always
present, then every :attr:`Memory.metadata` key as a top-level key of its own
(``title``, ``source``, ``writer``, ``sourceRefs``, the caller's ``metadata`` object, a
dataset's ``entities`` and its loaders' provenance such as ``session``). A store's file and
a dataset's ``memories.jsonl`` are therefore the same file format.

The older dataset dialect (``dataset.toml`` without ``format = 2``) nested a memory's
metadata under ``"metadata"`` and kept ``entities`` at the top level; it is still read
(:func:`line_metadata` with ``nested=True``), and :func:`nested_line` keeps its shape for the
dataset content hash, which is frozen so that no dataset's hash moves with the dialect.
"""

from __future__ import annotations

from typing import Any

from memofs.files import secrets
from memofs.files.records import MEMORY_KINDS, Anchor, InvalidInputError, Memory, memory_extras
from memofs.files.timestamps import format_iso, parse_iso

CORE_FIELDS: tuple[str, ...] = ("id", "text", "kind", "created_at", "confidence", "tags", "namespace", "anchors",
                                "supersedes")
"""The :class:`Memory` fields every written line carries, in the order it carries them."""
EXTRA_ARGS: dict[str, str] = {"title": "title", "source": "source", "writer": "writer", "sourceRefs": "source_refs",
                              "metadata": "metadata"}
"""Upstream's remember fields (top-level keys of a line) and their :func:`memory_extras` argument."""
MAX_TEXT_CHARS = 100_000
MAX_TAGS = 50


class MemoryLineError(ValueError):
    """A line the store's reader refuses; ``str`` is ``where: field 'name' why``."""


def anchor_to_json(a: Anchor) -> dict[str, Any]:
    """``{"path", "sha256", "lines"?}``: ``lines`` only when the anchor has a span."""
    out: dict[str, Any] = {"path": a.path, "sha256": a.sha256}
    if a.lines is not None:
        out["lines"] = list(a.lines)
    return out


def memory_to_json(m: Memory) -> dict[str, Any]:
    """The line of ``m`` in the written dialect (compact-dumped by the store's appends)."""
    return {
        "id": m.id,
        "text": m.text,
        "kind": m.kind,
        "created_at": format_iso(m.created_at) if m.created_at else None,
        "confidence": m.confidence,
        "tags": list(m.tags),
        "namespace": m.namespace,
        "anchors": [anchor_to_json(a) for a in m.anchors],
        "supersedes": list(m.supersedes),
        # upstream's remember fields (title, source, sourceRefs, metadata) and any other
        # key the line was read with: written back as they came, never dropped
        **{k: (list(v) if isinstance(v, tuple) else v) for k, v in m.metadata.items() if k not in CORE_FIELDS},
    }


def line_metadata(row: dict[str, Any], *, nested: bool) -> dict[str, Any]:
    """:attr:`Memory.metadata` of a line: its non-core keys (the written dialect; upstream's
    remember fields validated, :class:`InvalidInputError` naming the field), or, ``nested``,
    the older dataset dialect's ``"metadata"`` object (a dict, checked by the caller) plus
    ``entities`` (as given: the caller checks and converts them)."""
    if nested:
        out = dict(row.get("metadata") or {})
        if row.get("entities"):
            out["entities"] = row["entities"]
        return out
    extra = {k: v for k, v in row.items() if k not in CORE_FIELDS}
    extra.update(memory_extras(**{EXTRA_ARGS[k]: v for k, v in extra.items() if k in EXTRA_ARGS}))
    return extra


def memory_from_json(row: dict[str, Any], where: str) -> Memory:
    """Validate one line of the written dialect (the store's reader); a refusal raises
    :class:`MemoryLineError` naming ``where`` (file:line) and the field."""

    def bad(fld: str, why: str) -> MemoryLineError:
        return MemoryLineError(f"{where}: field {fld!r} {why}")

    for fld in ("id", "text"):
        if not isinstance(row.get(fld), str) or not row[fld]:
            raise bad(fld, "is missing or not a non-empty string")
    if len(row["text"]) > MAX_TEXT_CHARS:
        raise bad("text", f"has {len(row['text'])} characters; the limit is {MAX_TEXT_CHARS}")
    kind = row.get("kind", "note")
    if not isinstance(kind, str) or kind not in MEMORY_KINDS:
        raise bad("kind", f"must be one of {', '.join(MEMORY_KINDS)}; got {secrets.shown(kind)}")
    created = row.get("created_at")
    try:
        created_at = parse_iso(created) if created is not None else None
    except (TypeError, ValueError) as exc:
        raise bad("created_at", f"is not an ISO timestamp with timezone ({exc})") from None
    conf = row.get("confidence")
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 <= conf <= 1):
        raise bad("confidence", f"must be a number in [0, 1] or null; got {conf!r}")
    tags = row.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags) or len(tags) > MAX_TAGS:
        raise bad("tags", f"must be a list of at most {MAX_TAGS} strings")
    ns = row.get("namespace", "default")
    if not isinstance(ns, str) or not ns:
        raise bad("namespace", "must be a non-empty string")
    anchors = []
    raw_anchors = row.get("anchors", [])
    if not isinstance(raw_anchors, list):
        raise bad("anchors", "must be a list")
    for j, a in enumerate(raw_anchors):
        if not isinstance(a, dict) or not isinstance(a.get("path"), str) or not isinstance(a.get("sha256"), str):
            raise bad(f"anchors[{j}]", "must be an object with string 'path' and 'sha256'")
        anchors.append(Anchor(a["path"], a["sha256"], _span(a.get("lines"))))
    sup = row.get("supersedes", [])
    if not isinstance(sup, list) or not all(isinstance(s, str) for s in sup):
        raise bad("supersedes", "must be a list of strings")
    try:
        extra = line_metadata(row, nested=False)
    except InvalidInputError as exc:
        raise MemoryLineError(f"{where}: {exc}") from None
    return Memory(
        id=row["id"], text=row["text"], kind=kind, created_at=created_at,
        confidence=None if conf is None else float(conf), namespace=ns, tags=tuple(tags),
        anchors=tuple(anchors), supersedes=tuple(sup), metadata=extra,
    )


def _span(lines: object) -> tuple[int, int] | None:
    """An anchor's ``[start, end]`` (1-based, start <= end); anything else reads as no span,
    as the store always read it (a dataset's loader reports a bad span itself)."""
    if (isinstance(lines, list) and len(lines) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in lines) and 1 <= lines[0] <= lines[1]):
        return (lines[0], lines[1])
    return None


def nested_line(m: Memory) -> dict[str, Any]:
    """``m`` in the older dataset dialect (optional fields omitted when empty, metadata
    nested, ``entities`` on top): the frozen canonical form of
    :meth:`Dataset.content_hash`, so a dataset's hash does not depend on the dialect."""
    out: dict[str, Any] = {"id": m.id, "text": m.text, "kind": m.kind,
                           "created_at": None if m.created_at is None else format_iso(m.created_at)}
    if m.confidence is not None:
        out["confidence"] = m.confidence
    out["namespace"] = m.namespace
    if m.tags:
        out["tags"] = list(m.tags)
    if m.anchors:
        out["anchors"] = [anchor_to_json(a) for a in m.anchors]
    if m.supersedes:
        out["supersedes"] = list(m.supersedes)
    meta = dict(m.metadata)
    entities = meta.pop("entities", ())
    if entities:
        out["entities"] = list(entities)
    if meta:
        out["metadata"] = meta
    return out
