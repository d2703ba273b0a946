"""Static distilled MiniLM: one fixed vector per WordPiece token, averaged per text.

Distillation (the model2vec recipe):
    e_t   = mean over positions of MiniLM([CLS] t [SEP])      for every vocabulary token t
    E     = PCA_256(e)                                          (centred, top 256 components)
    w_r   = a / (a + p_r),  p_r = (1/(r+2)) / sum_j 1/(j+2)     (Zipf frequency from the id rank r,
                                                                  SIF weight, a = 1e-4)
    v_t   = w_r E_t
Encoding: v(text) = mean of v_t over the text's tokens (no special tokens), then v / |v|.

``model2vec.distill`` itself needs the ``skeletoken`` package (model2vec's ``distill``
extra), which is not a dependency here, so the recipe runs in-process with transformers
and scikit-learn. The table is cached on disk, keyed by model path, PCA size and SIF
coefficient; encoding matches ``model2vec.StaticModel(table, tokenizer, normalize=True)``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from memofs.embedders.base import EmbedderError, empty, l2_normalise
from memofs.embedders.local import default_model_path


def default_cache_dir() -> Path:
    """``$MEMOFS_CACHE_DIR/static`` or ``~/.cache/memofs/static``."""
    root = os.environ.get("MEMOFS_CACHE_DIR") or Path.home() / ".cache" / "memofs"
    return Path(root) / "static"


def zipf_sif_weights(n: int, sif: float) -> NDArray[np.float64]:
    """w_r = a / (a + p_r) with Zipf probabilities p_r proportional to 1 / (r + 2)."""
    inv = 1.0 / np.arange(2, n + 2, dtype=np.float64)
    return sif / (sif + inv / inv.sum())


def distill_token_vectors(model_dir: str, pca_dims: int = 256, sif: float = 1e-4, batch: int = 1024) -> NDArray[np.float32]:
    """The ``(vocab_size, pca_dims)`` static table for a BERT-style sentence-transformers model."""
    import torch
    from sklearn.decomposition import PCA
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
    ids = np.arange(tok.vocab_size)
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    out = np.empty((len(ids), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(ids), batch):
            chunk = torch.as_tensor(ids[start : start + batch])
            input_ids = torch.stack(
                [torch.full_like(chunk, cls_id), chunk, torch.full_like(chunk, sep_id)], dim=1
            )
            hidden = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state
            out[start : start + len(chunk)] = hidden.mean(dim=1).numpy()
    dims = min(pca_dims, out.shape[1])
    reduced = PCA(n_components=dims, svd_solver="full").fit_transform(out.astype(np.float64))
    return (reduced * zipf_sif_weights(len(ids), sif)[:, None]).astype(np.float32)


class StaticEmbedder:
    """Distilled static embeddings of the local MiniLM (or any BERT-style ST model)."""

    def __init__(
        self,
        model: str | None = None,
        pca_dims: int = 256,
        sif: float = 1e-4,
        cache_dir: str | Path | None = None,
        max_tokens: int = 512,
    ) -> None:
        self.model = model
        self.pca_dims = pca_dims
        self.sif = sif
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.max_tokens = max_tokens
        base = "all-MiniLM-L6-v2" if model is None else Path(model).name
        self.name = f"static-distill-{pca_dims}-{base}"
        self._table: NDArray[np.float32] | None = None
        self._tokenizer: Any = None

    def _model_dir(self) -> str:
        return str(default_model_path()) if self.model is None else self.model

    @property
    def dim(self) -> int:
        return int(self.load().shape[1])

    def load(self) -> NDArray[np.float32]:
        """Build or read the token table (cached on disk) and the tokenizer."""
        if self._table is not None:
            return self._table
        model_dir = self._model_dir()
        try:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        except Exception as exc:
            raise EmbedderError(f"static embedder: cannot read the tokenizer of {model_dir}: {exc}") from exc
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        key = hashlib.sha256(f"{Path(model_dir).resolve()}|{self.pca_dims}|{self.sif}|memofs-v1".encode()).hexdigest()[:16]
        path = self.cache_dir / f"{key}.npy"
        if path.is_file():
            self._table = np.load(path)
            return self._table
        try:
            table = distill_token_vectors(model_dir, self.pca_dims, self.sif)
        except Exception as exc:
            raise EmbedderError(f"static embedder: distillation of {model_dir} failed: {exc}") from exc
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, suffix=".npy.tmp")
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, table)
        os.replace(tmp, path)  # atomic: concurrent builders each write a whole file
        self._table = table
        return table

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids per text, without [CLS]/[SEP], cut at ``max_tokens``."""
        self.load()
        encs = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [e.ids[: self.max_tokens] for e in encs]

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Mean of the texts' token vectors, L2-normalised (a text with no tokens -> zero row)."""
        table = self.load()
        texts = list(texts)
        if not texts:
            return empty(table.shape[1])
        ids = self.token_ids(texts)
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for i in ids for t in i), dtype=np.int64, count=int(lengths.sum()))
        rows = np.repeat(np.arange(len(ids)), lengths)
        counts = sp.csr_matrix((np.ones(len(flat), dtype=np.float32), (rows, flat)), shape=(len(ids), table.shape[0]))
        sums = counts @ table
        # the mean only rescales the row, so normalising the sum gives the same unit vector
        return l2_normalise(sums, table.shape[1])
