"""What the store accepts from a caller before it writes: text, tags, namespaces, query length
(each refusal an :class:`~memofs.files.records.InvalidInputError` naming the value safely)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from memofs.files import secrets
from memofs.files.memory_lines import MAX_TAGS, MAX_TEXT_CHARS
from memofs.files.records import InvalidInputError

MAX_QUERY_CHARS = 4096
"""Longest recall/context query, the CLI's and the MCP server's (a query is a question, not
a document; the bound keeps one call's lexical work small)."""
TAG_PATTERN = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}")
NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,255}")


def _check_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("memory text must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInputError(f"memory text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    if not text.isascii() and any("\ud800" <= c <= "\udfff" for c in text):  # no UTF-8 line can hold a lone surrogate
        raise InvalidInputError("memory text is not valid Unicode (a lone surrogate)")
    return text.strip()


def normalize_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Trimmed, de-duplicated (order kept), each matching ``^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$``, at most 50."""
    out: dict[str, None] = {}
    for t in tags:
        if not isinstance(t, str):
            raise InvalidInputError(f"tag {secrets.shown(t)} must be a string")
        t = t.strip()
        if not TAG_PATTERN.fullmatch(t):
            raise InvalidInputError(f"tag {secrets.shown(t)} must match ^[a-zA-Z0-9][a-zA-Z0-9._:-]{{0,127}}$")
        out.setdefault(t, None)
    if len(out) > MAX_TAGS:
        raise InvalidInputError(f"{len(out)} tags; the limit is {MAX_TAGS}")
    return tuple(out)
