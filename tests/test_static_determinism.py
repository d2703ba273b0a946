"""The static embedder's build is machine-independent (issue 22): a rebuild on a different
ambient thread count gives the same table checksum, and the canonical form absorbs a PCA sign
flip and last-bit float noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memofs.signals.embedders.base import EmbedderError
from memofs.signals.embedders.static import CHECKSUM, StaticEmbedder, canonical_table, table_checksum


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


def test_rebuild_matches_checksum(tmp_path: Path) -> None:
    """Distil the local MiniLM afresh under another torch thread count; the table's checksum
    equals the project cache's build (one to three minutes per build on 2 cores)."""
    torch = pytest.importorskip("torch")
    cache = Path(__file__).resolve().parents[1] / ".cache" / "memofs" / "static"
    reference = StaticEmbedder(cache_dir=cache).checksum()
    threads = torch.get_num_threads()
    torch.set_num_threads(2 if threads == 1 else 1)
    try:
        fresh = StaticEmbedder(cache_dir=tmp_path / "static")
        assert fresh.checksum() == reference
    finally:
        torch.set_num_threads(threads)
    folder = next(p for p in (tmp_path / "static").iterdir() if (p / CHECKSUM).is_file())
    assert (folder / CHECKSUM).read_text().strip() == reference
    (folder / CHECKSUM).write_text("0" * 64 + "\n")  # a tampered or half-written cache is refused
    with pytest.raises(EmbedderError, match=CHECKSUM):
        StaticEmbedder(cache_dir=tmp_path / "static").load()
