"""A naive reference for BM25 + fuzzy, written from the spec's formulas with plain loops.

Deliberately independent of ``memofs.signals.bm25``: no numpy, no sparse matrices, no shared helpers
except the tokenizer.
"""

from __future__ import annotations

import math


def naive_fuzzy(q_terms: list[str], d_terms: list[str], partial: float = 0.25) -> float:
    if not q_terms or not d_terms:
        return 0.0
    total = 0.0
    for q in q_terms:
        if q in d_terms:
            total += 1.0
            continue
        for d in d_terms:
            if d in q or q in d:
                total += partial
                break
    return total / len(q_terms)


def naive_scores(
    docs: list[list[str]], q_terms: list[str], k1=1.2, b=0.75, fuzzy_boost=0.15, partial=0.25
) -> list[tuple[float, float, float]]:
    """(bm25, fuzzy, raw) for every document."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n if n else 0.0
    out = []
    unique_q = []
    for t in q_terms:
        if t not in unique_q:
            unique_q.append(t)
    for d in docs:
        bm25 = 0.0
        for t in unique_q:
            tf = d.count(t)
            if tf == 0:
                continue
            df = sum(1 for other in docs if t in other)
            idf = max(0.0, math.log(1 + (n - df + 0.5) / (df + 0.5)))
            rel = len(d) / avgdl if avgdl > 0 else 1.0
            bm25 += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * rel))
        fz = naive_fuzzy(q_terms, d, partial)
        out.append((bm25, fz, bm25 + fuzzy_boost * fz))
    return out
