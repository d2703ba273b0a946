"""Rule-based fact extraction into graph nodes and edges (upstream-facts.md section 8).

The fallback extractor of the write-up ("graph extraction falls back to RuleBasedExtractor
(regex parsing, no LLM)"). Text is read line by line:

1. Clean the line: strip a leading bullet (``-``, ``*`` or ``+`` plus whitespace), a
   leading ``N.`` / ``N)`` numbering (plus whitespace), leading ``#`` characters; trim.
2. Arrow triple ``subject ->|=> relation ->|=> object``, relation
   ``[A-Za-z_][A-Za-z0-9_-]{1,64}``; edge type = relation lowercased, runs outside
   ``[a-z0-9_-]`` turned into ``_``.
3. Otherwise the first matching verb rule (whole line, case-insensitive, lazy subject,
   whitespace around the verb): uses | depends_on | prefers | blocks | supersedes | owns,
   then a bare ``->`` / ``=>`` (no whitespace needed) for ``related_to``.

Labels lose backticks, ``*``, ``_`` and quotes, then trailing ``.;:,``, are trimmed and cut
to 160 characters. A fact is skipped when a label is empty or both labels are equal.
Node id = ``slug(type) + ":" + slug(label)``.

Differences from upstream: records carry no confidence, weight, metadata or source refs,
so ``source_id`` is validated but not stored. A fact whose two labels differ only in a
way the slug erases ("Postgres" / "postgres") is also skipped, since it would be a self
edge, which the graph refuses (upstream's store rejects it and the caller skips it).
Repeated facts yield one edge, and ``max_facts`` counts distinct edges (upstream's
stable edge ids collapse repeats the same way). A node keeps the first label seen.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memofs.files.records import GraphEdge, GraphNode

MAX_TEXT_CHARS = 250_000
MAX_FACTS_LIMIT = 1000
MAX_LABEL_CHARS = 160
MAX_SLUG_CHARS = 80

_BULLET = re.compile(r"^[-*+]\s+")
_NUMBERING = re.compile(r"^\d+[.)]\s+")
_HASHES = re.compile(r"^#+")
_ARROW_TRIPLE = re.compile(
    r"^(.+?)\s*(?:->|=>)\s*([A-Za-z_][A-Za-z0-9_-]{1,64})\s*(?:->|=>)\s*(.+)$"
)
_VERB_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rf"^(.+?)\s+(?:{verbs})\s+(.+)$", re.IGNORECASE), edge_type)
    for verbs, edge_type in (
        (r"uses|use|is\s+using", "uses"),
        (r"depends\s+on|requires|needs", "depends_on"),
        (r"prefers|likes", "prefers"),
        (r"blocks|is\s+blocking", "blocks"),
        (r"supersedes|replaces|deprecates", "supersedes"),
        (r"owns|maintains", "owns"),
    )
) + ((re.compile(r"^(.+?)\s*(?:->|=>)\s*(.+)$"), "related_to"),)
# Every match of a rule above contains one of these pieces of it (under the rule's own
# flags), so a line without any cannot match and skips the seven patterns, whose lazy
# "^(.+?)" start makes each a scan of the whole line (~30 us a memory, paid by every
# `remember`; tests/test_memofs/graph/test_extract.py checks the gated rules against the ungated ones).
FACT_TRIGGER = re.compile(
    r"(?i:use|using|depend|require|need|prefer|like|block|supersede|replace|deprecate|own|maintain)|->|=>"
)
_LABEL_DROP = str.maketrans("", "", "`*_'\"")
_RELATION_RUN = re.compile(r"[^a-z0-9_-]+")
_SLUG_RUN = re.compile(r"[^a-z0-9]+")


def clean_line(line: str) -> str:
    """Strip bullet, numbering and heading marks from one line, then trim."""
    s = line.strip()
    s = _BULLET.sub("", s)
    s = _NUMBERING.sub("", s)
    s = _HASHES.sub("", s)
    return s.strip()


def normalize_label(raw: str) -> str:
    """Drop backticks, ``*``, ``_``, quotes; strip trailing ``.;:,``; trim; cut to 160."""
    s = raw.translate(_LABEL_DROP).strip().rstrip(".;:,").strip()
    return s[:MAX_LABEL_CHARS]


def slug(value: str) -> str:
    """Lowercase ASCII slug: NFKD, combining marks removed, runs outside [a-z0-9] -> ``-``,
    ``-`` trimmed, at most 80 characters; ``unknown`` when empty."""
    s = unicodedata.normalize("NFKD", value.strip().lower())
    s = "".join(ch for ch in s if not unicodedata.combining(ch))
    s = _SLUG_RUN.sub("-", s).strip("-")[:MAX_SLUG_CHARS]
    return s or "unknown"


def match_fact(line: str) -> tuple[str, str, str] | None:
    """``(subject, edge type, object)`` raw labels of a cleaned line, or None."""
    if FACT_TRIGGER.search(line) is None:
        return None
    m = _ARROW_TRIPLE.match(line)
    if m:
        return m.group(1), _RELATION_RUN.sub("_", m.group(2).lower()), m.group(3)
    for pattern, edge_type in _VERB_RULES:
        m = pattern.match(line)
        if m:
            return m.group(1), edge_type, m.group(2)
    return None


@dataclass(frozen=True)
class RuleBasedExtractor:
    """Extract ``subject -[type]-> object`` facts; new nodes get ``default_node_type``."""

    default_node_type: str = "concept"
    max_facts: int = 100

    def __post_init__(self) -> None:
        if not isinstance(self.default_node_type, str) or not self.default_node_type.strip():
            raise ValueError("default_node_type must be a non-empty string")
        if isinstance(self.max_facts, bool) or not isinstance(self.max_facts, int) or not (
            1 <= self.max_facts <= MAX_FACTS_LIMIT
        ):
            raise ValueError(f"max_facts must be an int in [1, {MAX_FACTS_LIMIT}], got {self.max_facts!r}")

    def node_id(self, label: str) -> str:
        return f"{slug(self.default_node_type)}:{slug(label)}"

    def extract(self, text: str, source_id: str | None = None) -> tuple[list[GraphNode], list[GraphEdge]]:
        """Nodes (first-seen order) and distinct edges of ``text``; stops at ``max_facts`` edges."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
        if source_id is not None and not isinstance(source_id, str):
            raise TypeError(f"source_id must be str or None, got {type(source_id).__name__}")
        nodes: dict[str, GraphNode] = {}
        edges: dict[tuple[str, str, str], GraphEdge] = {}
        for raw_line in re.split(r"\r?\n", text):
            if len(edges) >= self.max_facts:
                break
            fact = match_fact(clean_line(raw_line))
            if fact is None:
                continue
            subject, edge_type, obj = normalize_label(fact[0]), fact[1], normalize_label(fact[2])
            if not subject or not obj or subject == obj:
                continue
            sid, oid = self.node_id(subject), self.node_id(obj)
            if sid == oid:
                continue
            for nid, label in ((sid, subject), (oid, obj)):
                nodes.setdefault(nid, GraphNode(id=nid, label=label, type=self.default_node_type))
            edges.setdefault((sid, edge_type, oid), GraphEdge(source=sid, target=oid, type=edge_type))
        return list(nodes.values()), list(edges.values())
