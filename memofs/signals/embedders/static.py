"""Static distilled MiniLM: ``model2vec.distill`` of the local MiniLM, one fixed vector
per vocabulary token (PCA to 256 dims, SIF-weighted), averaged per text.

Distillation runs offline on the local weights (no hub) the first time and is saved with
``StaticModel.save_pretrained`` under the cache directory, keyed by model path, PCA size
and SIF coefficient. Encoding is ``StaticModel.encode`` followed by L2 normalisation.

The build is made reproducible across machines (issue 22): the distillation's forward passes
run on one torch thread with torch and numpy seeded (a float sum's order, hence its last bits,
depends on the thread count), each PCA component's sign is fixed (its largest-magnitude entry
positive), and the table is rounded to float16 precision (stored as float32), which absorbs
last-bit differences that survive. The sha256 of the table is written beside it
(``checksum.txt``) and checked on every load; :func:`table_checksum` recomputes it.

Issue 37: numpy's BLAS (the PCA's covariance product and eigendecomposition) also runs on
one thread (``threadpoolctl``), and the table is computed in float64 end to end
(:func:`float64_distillation`: forward passes, mean pooling, PCA, SIF weights) and rounded
to float16 once, from float64. Why: the kernels themselves differ between CPUs (torch's and
OpenBLAS's AVX2 and AVX-512 paths sum in other orders), and a float32 build carries that
noise at about 1e-7 relative, which float16 rounding (spacing about 5e-4 relative) absorbs
only for entries away from a rounding boundary: perturbing the summation order (two threads
and batches of 37 against one thread and batches of 256, 2,000 tokens, 64 dimensions)
flipped 230 of 128,000 float16 entries of a float32 build (the fresh-machine tie rate moved
from 0.0032 to 0.0039). In float64 the same perturbation moves entries by about 1.5e-14
relative (median; 5e-10 at most, in the smallest entries) and flipped none; summing each
entry's move over its float16 spacing gives the expected number of flipped entries:
2e-5 there. On the whole 29,525 x 256 table, rebuilt with two threads and batches of 37:
7,538,490 of 7,558,400 float64 entries differed (3e-14 relative, median), none flipped in
float16, both checksums are a6fb99e7...; expected flips 0.0037, i.e. about one rebuild in
270 with noise of this size would flip an entry.
Residual risk, stated plainly: it is a probability, not a proof; another CPU whose float64
results differ by more than these perturbations (a different libm's exp or tanh, a BLAS
that reorders more) moves the odds, and a flipped entry changes the checksum. A table is
identified by its checksum: equal checksums give identical static figures.
``BUILD`` and the embedder's name carry ``f64``, so neither the table cache nor the
evaluation's embedding cache (keyed by embedder name) mixes the float32 build's vectors in.

The build is silent (issue 37: ``make eval --quiet`` printed transformers' "Loading
weights" bar and model2vec's "Encoding tokens" bar, which has no switch of its own):
:func:`quiet_distillation`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import EmbedderError, empty, l2_normalise
from memofs.signals.embedders.local import default_model_path, quiet_loading


BUILD = "model2vec-f64-1"  # in the cache key: a change to how the table is built makes a new folder
TABLE = "f64"
"""In the embedder's name, so the evaluation's embedding cache (keyed by name) never mixes
vectors of the float32-built tables (before issue 37) with this build's."""
CHECKSUM = "checksum.txt"


def table_checksum(table: NDArray[np.float32]) -> str:
    """sha256 of the embedding table's C-order float32 bytes and shape."""
    arr = np.ascontiguousarray(table, dtype=np.float32)
    return hashlib.sha256(f"{arr.shape}".encode() + arr.tobytes()).hexdigest()


def canonical_table(table: NDArray[np.floating]) -> NDArray[np.float32]:
    """Signs fixed per column (largest-magnitude entry positive; PCA's sign is arbitrary),
    rounded to float16 precision: the machine-independent form of a distilled table.

    A float64 table is rounded to float16 directly (numpy rounds double -> half once,
    to nearest even), never through float32, so its float64 noise is what meets the
    float16 rounding boundaries."""
    arr = np.asarray(table)
    if arr.dtype != np.float64:
        arr = arr.astype(np.float32)
    pivot = arr[np.abs(arr).argmax(axis=0), np.arange(arr.shape[1])]
    arr = arr * np.where(pivot < 0, -1.0, 1.0).astype(arr.dtype)
    return arr.astype(np.float16).astype(np.float32)


def _mean_pool_float64(model: Any, encodings: dict[str, Any]) -> Any:
    """model2vec's mean pooling (attention-masked mean of the last hidden states), with the
    forward pass and the mean in float64: model2vec's own casts the states to float32.
    The model is cast to float64 on the first batch (in place, exact: float32 weights are
    float64 values)."""
    import torch

    if next(model.parameters()).dtype != torch.float64:
        model.double()
    with torch.inference_mode():
        on_device = {k: v.to(model.device) for k, v in encodings.items()}
        hidden = model(**on_device).last_hidden_state
        mask = on_device["attention_mask"].to(hidden.dtype)
        mask = mask / mask.sum(1, keepdim=True).clamp_min(1.0)
        return torch.bmm(mask[:, None, :], hidden).squeeze(1).cpu()


@contextmanager
def float64_distillation() -> Iterator[None]:
    """model2vec's distillation computed in float64 end to end (issue 37): its token
    forward passes and mean pooling (:func:`_mean_pool_float64` in place of model2vec's
    float32 pooling, for the duration), then its PCA and SIF weighting, which keep their
    input's dtype; call ``distill`` with ``quantize_to="float64"``. Restored afterwards."""
    from model2vec.distill import inference

    pool = inference._encode_mean_with_model
    inference._encode_mean_with_model = _mean_pool_float64
    try:
        yield
    finally:
        inference._encode_mean_with_model = pool


@contextmanager
def quiet_distillation() -> Iterator[None]:
    """No output from a distillation: transformers' weight-loading bar off
    (:func:`~memofs.signals.embedders.local.quiet_loading`), model2vec's "Encoding tokens"
    bar disabled (its ``tqdm`` takes no switch, so the module's name is bound to a disabled
    one for the duration) and model2vec's log below ERROR held back (an offline run warns
    that the hub cannot be asked for the model's language). All restored afterwards."""
    from model2vec.distill import inference

    bar, log = inference.tqdm, logging.getLogger("model2vec")
    level = log.level
    inference.tqdm = functools.partial(bar, disable=True)
    log.setLevel(logging.ERROR)
    try:
        with quiet_loading():
            yield
    finally:
        inference.tqdm = bar
        log.setLevel(level)


def distill_deterministic(model_dir: str, pca_dims: int, sif: float) -> Any:
    """``model2vec.distill`` in float64 (:func:`float64_distillation`) on one torch thread
    and one BLAS thread, seeded, silent, with :func:`canonical_table` applied."""
    import torch
    from model2vec.distill import distill
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    np.random.seed(0)
    try:
        with threadpool_limits(limits=1), quiet_distillation(), float64_distillation():
            model = distill(model_name=model_dir, pca_dims=pca_dims, sif_coefficient=sif, device="cpu",
                            quantize_to="float64")
    finally:
        torch.set_num_threads(threads)
    model.embedding = canonical_table(model.embedding)
    return model


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
        self.name = f"static-distill-{pca_dims}-{base}-{TABLE}"
        self._static: Any = None

    def _model_dir(self) -> str:
        return str(default_model_path()) if self.model is None else self.model

    @property
    def dim(self) -> int:
        return int(self.load().dim)

    def folder(self) -> Path:
        """The cache folder of this build: keyed by model path, PCA size, SIF and ``BUILD``."""
        key = f"{Path(self._model_dir()).resolve()}|{self.pca_dims}|{self.sif}|{BUILD}"
        return self.cache_dir / hashlib.sha256(key.encode()).hexdigest()[:16]

    def load(self) -> Any:
        """The distilled ``model2vec.StaticModel`` (built once, then read from the cache)."""
        if self._static is not None:
            return self._static
        from model2vec import StaticModel

        model_dir = self._model_dir()
        path = self.folder()
        if not (path / "config.json").is_file():
            try:
                model = distill_deterministic(model_dir, self.pca_dims, self.sif)
            except Exception as exc:
                raise EmbedderError(f"static embedder: model2vec distillation of {model_dir} failed: {exc}") from exc
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=self.cache_dir, prefix=".build-"))
            model.save_pretrained(str(tmp))
            (tmp / CHECKSUM).write_text(table_checksum(model.embedding) + "\n", encoding="utf-8")
            try:
                os.replace(tmp, path)  # atomic: a concurrent builder's whole folder wins
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        static = StaticModel.from_pretrained(str(path))
        want = (path / CHECKSUM).read_text(encoding="utf-8").strip() if (path / CHECKSUM).is_file() else None
        if want != table_checksum(static.embedding):
            raise EmbedderError(f"static embedder: {path} does not match its {CHECKSUM}; delete the folder to rebuild it")
        self._static = static
        return self._static

    def checksum(self) -> str:
        """sha256 of the distilled table (:func:`table_checksum`)."""
        return table_checksum(self.load().embedding)

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Mean of the texts' token vectors, L2-normalised (a text with no tokens -> zero row)."""
        model = self.load()
        texts = list(texts)
        if not texts:
            return empty(model.dim)
        vecs = model.encode(texts, max_length=self.max_tokens, normalize=False, use_multiprocessing=False)
        return l2_normalise(np.asarray(vecs, dtype=np.float32), model.dim)
