"""The recall tokens of a corpus as one sparse count matrix (issue 18, "fast start").

    counts[i, j] = number of times vocab[j] occurs in tokenizer(text of ids[i])

``counts`` is a ``scipy.sparse`` CSR matrix (documents x terms, int32), ``vocab`` lists the
terms in first-seen order. It is what :class:`memofs.signals.fuzzy.OverlapIndex` (and so
BM25) derives from texts, computed once for a whole corpus: the index adopts it as its
base without per-document Python objects (:meth:`OverlapIndex.add_counts`), and the store
keeps it in a binary sidecar (:mod:`memofs.signals.terms_sidecar`) so that a start does not
tokenize every memory again.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from memofs.text.tokenize import tokenize

Tokenizer = Callable[[str], list[str]]


@dataclass(frozen=True)
class TermCounts:
    """Term counts of the documents ``ids`` (rows of :attr:`counts`, aligned with ``ids``)."""

    ids: tuple[str, ...]
    vocab: tuple[str, ...]
    counts: sp.csr_matrix

    def __post_init__(self) -> None:
        if self.counts.shape != (len(self.ids), len(self.vocab)):
            raise ValueError(f"counts shape {self.counts.shape} != ({len(self.ids)}, {len(self.vocab)})")

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def build(cls, ids: Sequence[str], texts: Sequence[str], tokenizer: Tokenizer = tokenize) -> TermCounts:
        """Tokenize every text (``tokenizer``: :func:`memofs.text.tokenize.tokenize`, the recall tokens)."""
        return cls((), (), sp.csr_matrix((0, 0), dtype=np.int32)).extended(ids, texts, tokenizer)

    def extended(self, ids: Sequence[str], texts: Sequence[str], tokenizer: Tokenizer = tokenize) -> TermCounts:
        """These rows followed by the term counts of ``texts`` (new terms join the vocabulary
        after the known ones, so the existing rows keep their columns)."""
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} ids but {len(texts)} texts")
        vocab = {t: j for j, t in enumerate(self.vocab)}
        setdefault = vocab.setdefault
        cols = array("q")  # C integers: a list of a million Python ints would cost tens of MB
        ends = np.empty(len(texts), dtype=np.int64)
        for i, text in enumerate(texts):
            cols.extend([setdefault(t, len(vocab)) for t in tokenizer(text)])
            ends[i] = len(cols)
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), np.diff(ends, prepend=0))
        new = sp.csr_matrix((np.ones(len(cols), dtype=np.int32), (rows, np.frombuffer(cols, dtype=np.int64))),
                            shape=(len(texts), len(vocab)), dtype=np.int32)
        new.sum_duplicates()  # canonical: one entry per (row, term), columns sorted
        old = self.counts
        old = sp.csr_matrix((old.data, old.indices, old.indptr), shape=(old.shape[0], len(vocab)))
        return TermCounts((*self.ids, *ids), tuple(vocab), sp.vstack([old, new], format="csr", dtype=np.int32))

    def head(self, n: int) -> TermCounts:
        """The first ``n`` rows (the vocabulary unchanged)."""
        return self if n >= len(self.ids) else TermCounts(self.ids[:n], self.vocab, self.counts[:n])

    @property
    def lengths(self) -> NDArray[np.int64]:
        """Tokens per document, duplicates counted."""
        return np.asarray(self.counts.sum(axis=1, dtype=np.int64)).reshape(-1)
