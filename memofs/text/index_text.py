"""Upstream's lexical document text of a memory (upstream-facts section 2, the durable
``writeMemory`` row of the BM25 table; upstream ``local-strategy/write.ts`` ``noteText``):
``(title ?? first 80 characters of the content) + "\\n" + content``. With no title, the
first 80 characters are therefore indexed twice; the reranker and the lexical candidates
read the same text. memofs indexes the text alone unless ``RecallConfig.upstream_index_text``.
"""

from __future__ import annotations

PREFIX_CHARS = 80


def upstream_index_text(text: str, title: object = None) -> str:
    """``(title ?? text[:80]) + "\\n" + text``. Upstream slices UTF-16 code units, Python
    code points: the two differ only when an astral character (an emoji) falls in the first
    80 code units."""
    head = title if isinstance(title, str) and title else text[:PREFIX_CHARS]
    return f"{head}\n{text}"
