"""Upstream's phrase scan of ``core.md`` and ``notes.md`` (upstream-facts.md section 2,
"Markdown / line phrase scan", ``searchMemoryText`` in ``core/core/search/search-memory.ts``):
a lexical candidate source beside BM25.

* Blocks (``mode="auto"``): *section* mode when some line starts with ``##`` and a
  whitespace character, else *line* mode. Section mode (CRLF/CR normalised to LF): a line
  that begins with exactly ``"## "`` starts a new block when the current one is non-empty;
  text before the first such line is block 0. Line mode: one block per line. Blocks are
  trimmed and empty ones dropped; a block's index counts the kept blocks (our reading:
  the facts sheet numbers blocks after the drop).
* Score of a block for query ``q``, with ``p = q.strip().lower()`` matched as one phrase
  (never tokenized) in the lowercased block ``b``:
  ``0`` if ``p`` not in ``b``, else ``count(b, p)`` (non-overlapping)
  ``+ 2`` if ``b`` starts with ``p`` ``+ 3`` if ``b`` contains ``"## " + p``.
  A blank query scores nothing (upstream throws a validation error, then swallows it).
* Kept: score > 0, ordered by score descending then block index, the top ``limit``.
* Candidate id ``<source>_<index>_<first 12 hex of fnv1a64(block)>``; lexical score
  ``score / 10`` (fusion clamps it to [0, 1] instead of saturating it). On an id
  collision the higher score wins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1
_SECTION_LINE = re.compile(r"^##\s", re.M)
SOURCES: tuple[str, ...] = ("core", "notes")
"""The scanned files, in upstream's order: ``core.md`` then ``notes.md``."""


def fnv1a64(text: str) -> str:
    """64-bit FNV-1a over the UTF-8 bytes, lowercase hex left-padded to 16 characters."""
    h = FNV_OFFSET
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * FNV_PRIME) & _MASK
    return f"{h:016x}"


def split_blocks(text: str) -> list[str]:
    """The blocks of ``text`` in ``auto`` mode (see the module docstring)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if not _SECTION_LINE.search(text):
        raw = lines
    else:
        raw, current = [], []
        for line in lines:
            if line.startswith("## ") and current:
                raw.append("\n".join(current))
                current = []
            current.append(line)
        if current:
            raw.append("\n".join(current))
    return [b for b in (r.strip() for r in raw) if b]


def block_score(block: str, phrase: str) -> int:
    """Upstream's block score for an already trimmed, lowercased ``phrase``."""
    if not phrase:
        return 0
    b = block.lower()
    n = b.count(phrase)
    if n == 0:
        return 0
    return n + (2 if b.startswith(phrase) else 0) + (3 if f"## {phrase}" in b else 0)


@dataclass(frozen=True)
class Block:
    """One block of a scanned file: candidate id, source (``core`` / ``notes``), index, text."""

    id: str
    source: str
    index: int
    text: str


@dataclass(frozen=True)
class PhraseHit:
    """A block the phrase matched: its upstream score and the lexical score (score / 10)."""

    block: Block
    score: int

    @property
    def lexical(self) -> float:
        return self.score / 10.0


def blocks_of(source: str, text: str) -> list[Block]:
    """Every block of one file, with its candidate id."""
    return [Block(f"{source}_{i}_{fnv1a64(b)[:12]}", source, i, b) for i, b in enumerate(split_blocks(text))]


class PhraseScanner:
    """The blocks of ``core.md`` and ``notes.md`` (split once), scanned per query."""

    def __init__(self, sources: Mapping[str, str] | None = None) -> None:
        self.blocks: dict[str, list[Block]] = {s: blocks_of(s, t) for s, t in (sources or {}).items() if t}
        self._by_id = {b.id: b for blocks in self.blocks.values() for b in blocks}

    def __bool__(self) -> bool:
        return any(self.blocks.values())

    def text_of(self, block_id: str) -> str | None:
        b = self._by_id.get(block_id)
        return b.text if b is not None else None

    def source_of(self, block_id: str) -> str:
        """``core`` / ``notes`` for a block id; ``""`` for an id no block has."""
        b = self._by_id.get(block_id)
        return b.source if b is not None else ""

    def scan(self, query: str, limit: int) -> list[PhraseHit]:
        """Hits of ``query`` in each source (top ``limit`` per source), sources in order;
        a repeated id keeps its higher score."""
        phrase = query.strip().lower()
        best: dict[str, PhraseHit] = {}
        if not phrase or limit <= 0:
            return []
        for source in (*[s for s in SOURCES if s in self.blocks], *[s for s in self.blocks if s not in SOURCES]):
            hits = [PhraseHit(b, s) for b in self.blocks[source] if (s := block_score(b.text, phrase)) > 0]
            hits.sort(key=lambda h: (-h.score, h.block.index))
            for h in hits[:limit]:
                old = best.get(h.block.id)
                if old is None or h.score > old.score:
                    best[h.block.id] = h
        return list(best.values())
