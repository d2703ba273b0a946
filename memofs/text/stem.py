"""English stemming for the lexical signals (issue 46; an option beyond the spec, off in the reference).

    terms(text) = [porter2(t) for t in tokenize(text)]      (stop words removed first, then stemmed)

Snowball's English stemmer ("Porter2"), through PyStemmer (Snowball's own C code): the
algorithm LanceDB's full-text index applies by default (``stem=True``, English; issue 46 asked
whether its lexical side, which beats bm25s on agent-memory, stems: it does). BM25 and the
fuzzy overlap then see "connections" and "connection" as one term, on both sides: the index
tokenizes documents and queries with the same function. ``RecallConfig.stem`` switches it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from memofs.text.tokenize import tokenize

_LOCAL = threading.local()  # a PyStemmer stemmer keeps a word cache and is not thread-safe


def _stemmer():
    s = getattr(_LOCAL, "stemmer", None)
    if s is None:
        import Stemmer  # PyStemmer

        s = _LOCAL.stemmer = Stemmer.Stemmer("english")
    return s


def stem_words(words: list[str]) -> list[str]:
    """Each word's Snowball English stem, in order (duplicates kept)."""
    return _stemmer().stemWords(words) if words else []


def tokenize_stemmed(text: str, *, stop_words: Iterable[str] | None = None) -> list[str]:
    """:func:`~memofs.text.tokenize.tokenize` (``stop_words`` as there), each token stemmed."""
    return stem_words(tokenize(text, stop_words=stop_words))
