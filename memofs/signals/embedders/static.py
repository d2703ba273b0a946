"""Static distilled MiniLM: ``model2vec.distill`` of the local MiniLM, one fixed vector
per vocabulary token (PCA to 256 dims, SIF-weighted), averaged per text.

Distillation runs offline on the local weights (no hub) the first time and is saved with
``StaticModel.save_pretrained`` under the cache directory, keyed by model path, PCA size
and SIF coefficient. Encoding is ``StaticModel.encode`` followed by L2 normalisation.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import EmbedderError, empty, l2_normalise
from memofs.signals.embedders.local import default_model_path


def default_cache_dir() -> Path:
    """``$MEMOFS_CACHE_DIR/static`` or ``~/.cache/memofs/static``."""
    root = os.environ.get("MEMOFS_CACHE_DIR") or Path.home() / ".cache" / "memofs"
    return Path(root) / "static"


class StaticEmbedder:
    """Distilled static embeddings of the local MiniLM (or any sentence-transformers model)."""

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
        self._static: Any = None

    def _model_dir(self) -> str:
        return str(default_model_path()) if self.model is None else self.model

    @property
    def dim(self) -> int:
        return int(self.load().dim)

    def load(self) -> Any:
        """The distilled ``model2vec.StaticModel`` (built once, then read from the cache)."""
        if self._static is not None:
            return self._static
        from model2vec import StaticModel

        model_dir = self._model_dir()
        key = hashlib.sha256(f"{Path(model_dir).resolve()}|{self.pca_dims}|{self.sif}|model2vec-f32".encode()).hexdigest()[:16]
        path = self.cache_dir / key
        if not (path / "config.json").is_file():
            try:
                from model2vec.distill import distill

                model = distill(model_name=model_dir, pca_dims=self.pca_dims, sif_coefficient=self.sif, device="cpu", quantize_to="float32")
            except Exception as exc:
                raise EmbedderError(f"static embedder: model2vec distillation of {model_dir} failed: {exc}") from exc
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=self.cache_dir, prefix=".build-"))
            model.save_pretrained(str(tmp))
            try:
                os.replace(tmp, path)  # atomic: a concurrent builder's whole folder wins
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        self._static = StaticModel.from_pretrained(str(path))
        return self._static

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Mean of the texts' token vectors, L2-normalised (a text with no tokens -> zero row)."""
        model = self.load()
        texts = list(texts)
        if not texts:
            return empty(model.dim)
        vecs = model.encode(texts, max_length=self.max_tokens, normalize=False, use_multiprocessing=False)
        return l2_normalise(np.asarray(vecs, dtype=np.float32), model.dim)
