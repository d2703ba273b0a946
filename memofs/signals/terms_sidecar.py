"""The binary sidecar of a store's recall tokens (issue 18, "fast start"): the
:class:`~memofs.signals.term_counts.TermCounts` of its memories, so a start builds the
BM25 and fuzzy index without tokenizing every memory again.

Files: ``<indexes>/terms.sidecar.json`` + ``terms.<generation>.<column>.npy``
(:mod:`memofs.files.sidecar`: crash-safe generations, every column's digest checked on
read). Columns: ``ids``/``vocab`` (string columns), ``sha`` (each row's
:func:`~memofs.files.records.text_sha256`), and the count matrix as CSR
``indptr``/``indices``/``data``.

Validity is by content, not by the JSONL's bytes: a read is given the load's ids and text
hashes, in order, and the sidecar stands for the longest prefix of them whose id and hash
it holds at the same row (the rows after it are tokenized by the caller). So a compaction
that rewrites ``memories.jsonl`` keeps it valid, and a hand edit that changes one text
makes every row from that one on stale. The metadata records a digest of the tokenizer's
source (:func:`tokenizer_digest`): a change to the tokenizer or its stop words makes the
whole sidecar stale.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from memofs.files.sidecar import SHA_DTYPE, Sidecar, join_strings, split_strings
from memofs.signals.term_counts import TermCounts
from memofs.text import stopwords
from memofs.text import tokenize as tokenize_module

FORMAT = 1


def tokenizer_digest() -> str:
    """BLAKE2b of the source of :mod:`memofs.text.tokenize` and its stop words: the counts'
    meaning changes exactly when these files do (a comment edit only costs a rebuild)."""
    h = hashlib.blake2b(digest_size=16)
    for mod in (tokenize_module, stopwords):
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()


def _matching_prefix(held_ids: list[str], held_sha: NDArray[np.bytes_], ids: Sequence[str], sha: NDArray[np.bytes_]) -> int:
    """Rows at the start where both the ids and the text hashes agree."""
    n = min(len(held_ids), len(ids))
    bad = np.flatnonzero(held_sha[:n] != sha[:n])
    n = int(bad[0]) if bad.size else n
    if held_ids[:n] != list(ids[:n]):
        n = next(i for i, (a, b) in enumerate(zip(held_ids, ids)) if a != b)
    return n


class TermsSidecar:
    """``<directory>/terms.sidecar.json`` + ``terms.<generation>.<column>.npy``."""

    def __init__(self, directory: Path) -> None:
        self.files = Sidecar(None, directory, "terms", FORMAT)

    def read(self, ids: Sequence[str], sha: NDArray[np.bytes_]) -> TermCounts | None:
        """The term counts of the longest prefix of ``ids`` (with text hashes ``sha``) the
        sidecar holds, copied out of the maps; None when it holds none of them or cannot be
        trusted (missing, damaged, another tokenizer, inconsistent)."""
        got = self.files.read()
        if got is None:
            return None
        meta, cols, _ = got
        try:
            if meta["tokenizer"] != tokenizer_digest():
                return None
            held = split_strings(cols["ids"], cols["ids_ends"])
            vocab = tuple(split_strings(cols["vocab"], cols["vocab_ends"]))
            held_sha = np.asarray(cols["sha"])
            if held_sha.dtype != np.dtype(SHA_DTYPE) or held_sha.shape != (len(held),):
                return None
            counts = sp.csr_matrix((np.array(cols["data"]), np.array(cols["indices"]), np.array(cols["indptr"])),
                                   shape=(len(held), len(vocab)))
            counts.check_format(full_check=True)
            if (len(set(vocab)) != len(vocab) or counts.data.dtype.kind not in "iu" or not counts.has_canonical_format
                    or (counts.nnz and int(counts.data.min()) <= 0)):
                return None  # no tokenizer writes these: a forged or buggy sidecar
            n = _matching_prefix(held, held_sha, ids, np.asarray(sha, dtype=SHA_DTYPE))
            return TermCounts(tuple(held), vocab, counts).head(n) if n else None
        except (KeyError, TypeError, ValueError, UnicodeDecodeError):  # a damaged sidecar is only a cache
            return None

    def write(self, counts: TermCounts, sha: NDArray[np.bytes_]) -> bool:
        """Write a new generation (the caller holds the store's write lock)."""
        sha = np.asarray(sha, dtype=SHA_DTYPE)
        if sha.shape != (len(counts),):
            raise ValueError(f"{len(counts)} rows but {sha.shape} text hashes")
        c = counts.counts
        cols = {"sha": sha, "indptr": c.indptr.astype(np.int64), "indices": c.indices.astype(np.int32),
                "data": c.data.astype(np.int32)}
        for name, strings in (("ids", list(counts.ids)), ("vocab", list(counts.vocab))):
            cols[name], cols[f"{name}_ends"] = join_strings(strings)
        return self.files.write(None, cols, {"tokenizer": tokenizer_digest()})
