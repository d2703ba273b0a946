"""LSA: TF-IDF + truncated SVD fitted on the corpus, a semantic baseline with no weights.

    x(text) = tfidf(text) @ V_k   (V_k: the top-k right singular vectors of the corpus
                                   TF-IDF matrix),  then  x / |x|

The name carries a hash of the fitted state (vocabulary, idf, components), so cache keys
and reports never confuse two fits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import EmbedderError, empty, l2_normalise


class LSAEmbedder:
    """``fit(corpus)`` first; ``dim`` becomes ``min(dim, n_terms - 1, n_docs - 1)`` after fitting."""

    def __init__(self, dim: int = 256, seed: int = 0) -> None:
        if dim < 1:
            raise ValueError(f"LSA dim must be >= 1, got {dim}")
        self.requested_dim = dim
        self.dim = dim
        self.seed = seed
        self.name = f"lsa-{dim}-unfitted"
        self._vectorizer = None
        self._svd = None

    def fit(self, corpus_texts: Sequence[str]) -> LSAEmbedder:
        """Fit TF-IDF (sublinear tf) and a seeded randomized truncated SVD on the corpus."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        texts = list(corpus_texts)
        if len(texts) < 2:
            raise EmbedderError("LSA needs at least two corpus texts to fit")
        vectorizer = TfidfVectorizer(sublinear_tf=True, dtype=np.float32)
        try:
            tfidf = vectorizer.fit_transform(texts)
        except ValueError as exc:  # empty vocabulary
            raise EmbedderError(f"LSA could not fit: {exc}") from exc
        k = min(self.requested_dim, tfidf.shape[1] - 1, tfidf.shape[0] - 1)
        if k < 1:
            raise EmbedderError("LSA corpus is too small for even one component")
        svd = TruncatedSVD(n_components=k, random_state=self.seed).fit(tfidf)
        self._vectorizer, self._svd, self.dim = vectorizer, svd, k
        self.name = f"lsa-{k}-{self._state_hash()}"
        return self

    def _state_hash(self) -> str:
        h = hashlib.sha256()
        vocab = sorted(self._vectorizer.vocabulary_.items(), key=lambda kv: kv[1])
        h.update("\x00".join(term for term, _ in vocab).encode("utf-8"))
        h.update(np.ascontiguousarray(self._vectorizer.idf_, dtype=np.float64).tobytes())
        h.update(np.ascontiguousarray(self._svd.components_, dtype=np.float32).tobytes())
        return h.hexdigest()[:12]

    @property
    def fitted(self) -> bool:
        return self._svd is not None

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Project onto the fitted components and L2-normalise (texts with no known term -> zero row)."""
        if not self.fitted:
            raise EmbedderError("LSAEmbedder.encode called before fit()")
        texts = list(texts)
        if not texts:
            return empty(self.dim)
        return l2_normalise(self._svd.transform(self._vectorizer.transform(texts)), self.dim)
