"""The ``upstream`` profile ranks as upstream MemoFS's lexical recall does (issue 37).

The expected scores are computed by hand below from upstream's definitions
(upstream-facts.md sections 1-5: BM25 ``k1=1.2, b=0.75`` with ``idf = ln(1 + (N - df +
0.5) / (df + 0.5))``, fuzzy boost 0.15, saturation ``raw / (raw + 2)``, fixed weights
``0.4 x lexical`` with no vector, the 0.5/0.5 fallback-reranker blend, ``0.7 base + 0.2 x
0.5 + 0.1 x 0.5``, ``Math.round`` to 4 decimals), with upstream's document text
``(title ?? first 80 chars) + "\\n" + content`` and the graph node document ``label summary``
in the same BM25 corpus. The token lists are written out by hand.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from memofs.files.records import GraphNode, Memory
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.config import RecallConfig
from memofs.ranking.profiles import PROFILE_NAMES
from memofs.ranking.recall import Recaller

NOW = datetime(2026, 12, 4, tzinfo=timezone.utc)
QUERY = "postgres tenant"
MEMS = [
    Memory("a", "Postgres stores tenant data", kind="decision", created_at=NOW, confidence=0.9),
    Memory("b", "Redis caches sessions", kind="note", created_at=NOW, metadata={"title": "Cache"}),
    Memory("c", "Deploys run on Fridays", kind="note", created_at=NOW, confidence=0.2),
    Memory("d", "Row level security isolates each tenant", kind="constraint", created_at=NOW,
           confidence=1.0, metadata={"title": "Postgres tenancy"}),
]
NODE = GraphNode("postgres", "PostgreSQL", type="technology", aliases=("pg",), summary="primary database")

# upstream's BM25 documents, tokenized by hand (recall tokenizer: lowercase, split on non
# [a-z0-9], upstream's 68 stop words out); memories without a title repeat their first 80 characters
DOCS = {
    "a": ["postgres", "stores", "tenant", "data"] * 2,
    "b": ["cache", "redis", "caches", "sessions"],
    "c": ["deploys", "run", "fridays"] * 2,
    # "each" is not among upstream's 68 stop words (it is among our 94)
    "d": ["postgres", "tenancy", "row", "level", "security", "isolates", "each", "tenant"],
    "graph:postgres": ["postgresql", "primary", "database"],  # label summary: no aliases
}
# the reranker's text tokens (tokenizeSimple: no stop words dropped) give the same sets here
QTERMS = ["postgres", "tenant"]


def overlap(q: list[str], doc: list[str]) -> float:
    """Upstream tokenOverlapScore: +1 exact, +0.25 containment either way, / len(q)."""
    s = set(doc)
    return sum(1.0 if t in s else 0.25 if any(t in d or d in t for d in s) else 0.0 for t in q) / len(q)


def upstream_scores() -> dict[str, float]:
    n = len(DOCS)
    avgdl = sum(map(len, DOCS.values())) / n
    out = {}
    for doc_id, toks in DOCS.items():
        raw = 0.0
        for t in set(QTERMS):
            tf = toks.count(t)
            if tf:
                df = sum(t in d for d in DOCS.values())
                idf = max(0.0, math.log(1 + (n - df + 0.5) / (df + 0.5)))
                raw += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(toks) / avgdl))
        raw += 0.15 * overlap(QTERMS, toks)
        if raw <= 0:
            continue  # not a BM25 hit: no candidate
        lexical = raw / (raw + 2)
        base = 0.5 * (0.4 * lexical) + 0.5 * overlap(QTERMS, toks)
        final = 0.7 * base + 0.2 * 0.5 + 0.1 * 0.5
        out[doc_id] = math.floor(final * 1e4 + 0.5) / 1e4
    return out


def test_hand_computed_values() -> None:
    # the arithmetic above, spelled out once: N = 5, avgdl = 29 / 5, df = 2 for both terms
    got = upstream_scores()
    assert got == {"a": 0.5753, "d": 0.5636, "graph:postgres": 0.1951}


def test_upstream_profile_reproduces_upstream_scores() -> None:
    cfg = RecallConfig.from_dict({"profile": "upstream"})
    r = Recaller(cfg, graph=EntityGraph([NODE]))
    r.add(MEMS)
    got = {x.id: x.score for x in r.recall(QUERY, now=NOW)}
    assert got == upstream_scores()


@pytest.mark.parametrize("switch", ["upstream_index_text", "graph_doc_aliases", "dynamic_weights",
                                    "neutral_recency_confidence", "upstream_stop_words"])
def test_each_switch_matters(switch: str) -> None:
    """Undoing any one of the profile's parity switches moves some score off upstream's."""
    cfg = RecallConfig.from_dict({"profile": "upstream"})
    cfg = cfg.replace(**{switch: not getattr(cfg, switch)})
    r = Recaller(cfg, graph=EntityGraph([NODE]))
    r.add(MEMS)
    assert {x.id: x.score for x in r.recall(QUERY, now=NOW)} != upstream_scores()


def test_reference_defaults_untouched() -> None:
    assert "upstream" in PROFILE_NAMES
    ref = RecallConfig()
    assert (ref.upstream_index_text, ref.graph_doc_aliases, ref.neutral_recency_confidence,
            ref.upstream_stop_words) == (False, True, False, False)
    assert ref.config_hash() == RecallConfig.from_dict({"profile": "reference"}).config_hash()
