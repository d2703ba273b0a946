"""Tokenizers (spec "Signal 1"; upstream-facts.md section 1).

Every caller that splits text into words uses this module. Two splits, as upstream has
them:

* the *word* split: lowercase, runs of alphanumeric characters (``[^\\W_]+``).
  :func:`tokenize` feeds BM25 and fuzzy overlap (the split minus the 94 stop words);
  :func:`tokenize_simple` is the split alone: the deterministic reranker's tokens, and the
  word counts of the learned fusion's features (query length, memory length).
* the *rewrite* split: :func:`tokenize_rewrite` feeds task-aware query rewriting: split on
  whitespace and punctuation (hyphen included) but keep ``_`` inside tokens (upstream's
  strategist tokenizer).

Unicode: "alphanumeric" means Unicode letters and digits (``str.isalnum`` semantics), so
accented words stay whole ("café" -> ``café``) and a CJK run without spaces is a single
token ("数据库连接" -> ``数据库连接``). Upstream splits on ASCII ``[a-z0-9]`` only, which
turns "café" into ``caf``; we follow the write-up's wording instead. ``_`` is a separator
("tenant_metadata" -> ``tenant``, ``metadata``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memofs.text.stopwords import STOP_WORDS

_WORD = re.compile(r"[^\W_]+")
_REWRITE_SPLIT = re.compile(r"[\s,./\\\[\]{}()<>:;'\"!?|`~@#$%^&*+=\u2014\u2013-]+")


def _check(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return text


def tokenize(text: str, *, stop_words: Iterable[str] | None = None, min_length: int = 1) -> list[str]:
    """Recall tokens of ``text``: lowercased alphanumeric runs minus stop words.

    Duplicates are kept (term frequency counts them). ``stop_words=()`` disables removal.
    """
    words = _WORD.findall(_check(text).lower())
    stops = STOP_WORDS if stop_words is None else frozenset(stop_words)
    if not stops and min_length <= 1:
        return words
    return [w for w in words if len(w) >= min_length and w not in stops]


def tokenize_simple(text: str) -> list[str]:
    """The word split alone (reranker tokens, word counts): :func:`tokenize` with no stop
    words."""
    return tokenize(text, stop_words=())


def tokenize_rewrite(text: str) -> list[str]:
    """Query-rewrite tokens: split on whitespace and punctuation; ``_`` stays in a token."""
    return [t for t in _REWRITE_SPLIT.split(_check(text).lower()) if t]
