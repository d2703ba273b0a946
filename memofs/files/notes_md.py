"""Upstream's ``.memofs/memory/notes.md`` format (facts sheet section 10, "notes.md entry
format", ``formatTimestampedNote``), written and read.

One entry::

    ## <ISO timestamp>[ — <title on one line>]
    - kind: <kind>
    - tags: <a, b> | none
    - confidence: <c>            (default 1)
    [- source: <source>]
    [- writer: <writer>]
    [- metadata: <JSON object>]
    <blank line>
    <trimmed content>
    <blank line>

Entries are separated by a blank line and the document ends with a newline. memofs keeps
its memories in ``memories.jsonl``; this module renders them in upstream's format (the MCP
resource ``memofs://memory/notes``) and parses an upstream store's notes for import.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memofs.files.records import InvalidInputError

TEMPLATE = "# Notes\n\nTimestamped notes written by MemoFS.\n"
_HEADING = re.compile(r"^## (\S+)(?: — (.*))?$")
_FIELD = re.compile(r"^- (kind|tags|confidence|source|writer|metadata): ?(.*)$")


@dataclass
class Note:
    """One notes.md entry. ``line`` is the heading's 1-based line number (for errors)."""

    timestamp: str
    content: str
    kind: str = "note"
    title: str | None = None
    tags: tuple[str, ...] = ()
    confidence: float = 1.0
    source: str | None = None
    writer: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int = 0


def format_note(note: Note) -> str:
    """One entry, ending with a newline (the blank separator is the caller's)."""
    title = " — " + " ".join(note.title.split()) if note.title else ""
    lines = [f"## {note.timestamp}{title}", f"- kind: {note.kind}",
             f"- tags: {', '.join(note.tags) if note.tags else 'none'}", f"- confidence: {note.confidence:g}"]
    if note.source:
        lines.append(f"- source: {note.source}")
    if note.writer:
        lines.append(f"- writer: {note.writer}")
    if note.metadata:
        lines.append(f"- metadata: {json.dumps(note.metadata, ensure_ascii=False, sort_keys=True)}")
    return "\n".join([*lines, "", note.content.strip(), ""])


def format_notes(notes: list[Note], header: str = TEMPLATE) -> str:
    """A whole notes.md: the header, then each entry, separated by blank lines."""
    parts = [header.rstrip("\n"), *(format_note(n).rstrip("\n") for n in notes)]
    return "\n\n".join(parts) + "\n"


def parse_notes(text: str, where: str = "notes.md") -> list[Note]:
    """Every entry of a notes.md document, in file order. A malformed field raises
    :class:`InvalidInputError` naming ``where``, the line and the field. Text before the
    first ``## `` heading (the title and explanation) is not a note."""
    notes: list[Note] = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        m = _heading(lines, i)
        if not m:
            i += 1
            continue
        start = i + 1
        ts, title = m.group(1), (m.group(2) or "").strip() or None
        try:
            datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInputError(f"{where}:{start}: heading timestamp {ts!r} is not an ISO timestamp") from None
        note = Note(timestamp=ts, content="", title=title, line=start)
        i += 1
        while i < len(lines) and (f := _FIELD.match(lines[i])):
            name, value = f.group(1), f.group(2).strip()
            _set_field(note, name, value, f"{where}:{i + 1}")
            i += 1
        body: list[str] = []
        while i < len(lines) and not _heading(lines, i):
            body.append(lines[i])
            i += 1
        note.content = "\n".join(body).strip()
        if not note.content:
            raise InvalidInputError(f"{where}:{start}: note has no content")
        notes.append(note)
    return notes


def _heading(lines: list[str], i: int) -> re.Match[str] | None:
    """The note heading at line ``i``: ``## <ISO timestamp>[ — title]``, or a ``## `` line
    followed by a field line (so a mistyped timestamp is an error, not text). Any other
    ``## `` line is Markdown inside a note's content."""
    m = _HEADING.match(lines[i])
    if not m:
        return None
    try:
        datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
        return m
    except ValueError:
        return m if i + 1 < len(lines) and _FIELD.match(lines[i + 1]) else None


def _set_field(note: Note, name: str, value: str, where: str) -> None:
    if name == "kind":
        note.kind = value or "note"
    elif name == "tags":
        note.tags = () if value in ("", "none") else tuple(t.strip() for t in value.split(",") if t.strip())
    elif name == "confidence":
        try:
            conf = float(value)
        except ValueError:
            raise InvalidInputError(f"{where}: field 'confidence' must be a number; got {value!r}") from None
        if not 0 <= conf <= 1:
            raise InvalidInputError(f"{where}: field 'confidence' must be in [0, 1]; got {value!r}")
        note.confidence = conf
    elif name == "source":
        note.source = value or None
    elif name == "writer":
        note.writer = value or None
    else:
        try:
            meta = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{where}: field 'metadata' is not JSON ({exc.msg})") from None
        if not isinstance(meta, dict):
            raise InvalidInputError(f"{where}: field 'metadata' must be a JSON object")
        note.metadata = meta
