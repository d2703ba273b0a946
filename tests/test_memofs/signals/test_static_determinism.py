"""The static embedder's build is machine-independent (issue 22): a rebuild on a different
ambient thread count gives the same table checksum, and the canonical form absorbs a PCA sign
flip and last-bit float noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memofs.signals.embedders.base import EmbedderError
from memofs.signals.embedders.static import CHECKSUM, StaticEmbedder, canonical_table, table_checksum
from support import REPO_ROOT


def test_canonical_table_absorbs_sign_flips_and_last_bits() -> None:
    rng = np.random.default_rng(5)
    table = rng.normal(size=(200, 8)).astype(np.float32)
    other = table.copy()
    other[:, [1, 6]] *= -1  # PCA may return any component with either sign
    other = np.nextafter(other, np.float32(np.inf)).astype(np.float32)  # one ulp of accumulation noise
    assert table_checksum(table) != table_checksum(other)
    assert table_checksum(canonical_table(table)) == table_checksum(canonical_table(other))
    canon = canonical_table(table)
    assert (canon[np.abs(canon).argmax(axis=0), np.arange(8)] > 0).all()


@pytest.mark.slow  # distils the real MiniLM through torch
def test_rebuild_matches_checksum(tmp_path: Path) -> None:
    """Distil the local MiniLM afresh under another torch thread count; the table's checksum
    equals the project cache's build (one to three minutes per build on 2 cores)."""
    torch = pytest.importorskip("torch")
    cache = REPO_ROOT / ".cache" / "memofs" / "static"
    reference = StaticEmbedder(cache_dir=cache).checksum()
    threads = torch.get_num_threads()
    torch.set_num_threads(2 if threads == 1 else 1)
    try:
        fresh = StaticEmbedder(cache_dir=tmp_path / "static")
        assert fresh.checksum() == reference
    finally:
        torch.set_num_threads(threads)
    folder = fresh.folder()
    assert (folder / CHECKSUM).read_text().strip() == reference
    (folder / CHECKSUM).write_text("0" * 64 + "\n")  # a tampered or half-written cache is refused
    with pytest.raises(EmbedderError, match=CHECKSUM):
        StaticEmbedder(cache_dir=tmp_path / "static").load()


def test_a_float64_table_rounds_to_float16_once() -> None:
    """Issue 37: a float64 entry goes to float16 directly. 1 + 2**-11 + 2**-30 lies just above
    the midpoint between the float16 neighbours 1 and 1 + 2**-10, so it rounds up; through
    float32 it would first become the midpoint itself (2**-30 is under float32's half ulp)
    and then round to even, i.e. down to 1."""
    x = 1 + 2.0**-11 + 2.0**-30
    assert np.float16(np.float32(x)) == 1.0  # the double rounding avoided
    assert canonical_table(np.array([[x]]))[0, 0] == 1 + 2.0**-10
    assert canonical_table(np.array([[x]], dtype=np.float32))[0, 0] == 1.0


@pytest.mark.slow
def test_float64_distillation_is_immune_to_summation_order() -> None:
    """The steps ``model2vec.distill`` runs (its ``create_embeddings`` forward passes and mean
    pooling, ``compute_weights``, ``apply_pca``) on 600 tokens of the local MiniLM, twice: one
    torch and BLAS thread with batches of 256 in token order, then two threads with batches
    of 37 over the tokens in reverse (the PCA's mean and covariance then sum the rows in
    another order, whatever the machine; other matrix shapes and splits besides): the
    stand-in for another CPU's kernels. Rows are put back in token order to compare.

    The perturbation is real: model2vec's float32 tables differ in their last bits and still
    differ after :func:`canonical_table` (410 of 38,400 float16 entries flipped where this was
    written), and the float64 ones differ in their last bits too (about 1e-14 relative).
    Under :func:`float64_distillation` the tables rounded by :func:`canonical_table` are
    byte-identical."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("model2vec.distill")
    from model2vec.distill import inference
    from threadpoolctl import threadpool_limits
    from transformers import AutoModel

    from memofs.signals.embedders.local import default_model_path
    from memofs.signals.embedders.static import float64_distillation, quiet_distillation

    try:
        path = default_model_path()
    except EmbedderError as exc:
        pytest.skip(str(exc))
    ids = [[101, i, 102] for i in range(2000, 2600)]  # [CLS] token [SEP], as model2vec feeds them

    def table(f64: bool, threads: int, batch: int, reverse: bool = False) -> np.ndarray:
        order = ids[::-1] if reverse else ids
        with quiet_distillation():
            model = AutoModel.from_pretrained(str(path))
        saved, batch_size = torch.get_num_threads(), inference._DEFAULT_BATCH_SIZE
        torch.set_num_threads(threads)
        inference._DEFAULT_BATCH_SIZE = batch
        try:
            with threadpool_limits(limits=threads), quiet_distillation():
                if f64:
                    with float64_distillation():
                        emb = inference.create_embeddings(model=model, tokenized=order, device="cpu", pad_token_id=0)
                else:
                    emb = inference.create_embeddings(model=model, tokenized=order, device="cpu", pad_token_id=0)
                out = inference.apply_pca(emb, 64)
                out = out[::-1] if reverse else out
                return out * inference.compute_weights(len(out), 1e-4)[:, None]  # by token rank
        finally:
            torch.set_num_threads(saved)
            inference._DEFAULT_BATCH_SIZE = batch_size

    a32, b32 = table(False, 1, 256), table(False, 2, 37, reverse=True)
    assert (canonical_table(a32) != canonical_table(b32)).any()  # the float32 build is not immune
    a64, b64 = table(True, 1, 256), table(True, 2, 37, reverse=True)
    assert a64.dtype == b64.dtype == np.float64
    assert (a64 != b64).any()
    assert np.allclose(a64, b64, rtol=1e-9, atol=1e-12)
    assert table_checksum(canonical_table(a64)) == table_checksum(canonical_table(b64))
