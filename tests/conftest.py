from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# the default MiniLM's exported ONNX file (issue 38): one temporary cache shared by test
# sessions and their subprocesses, never the user's ~/.cache (digest-checked, export locked)
os.environ.setdefault("MEMOFS_MODEL_CACHE", os.path.join(tempfile.gettempdir(), f"memofs-test-model-cache-{os.getuid()}"))
# `python -m pytest` from the repository root puts the root on sys.path, where datasets/ would
# pass for Hugging Face's `datasets` (memofs_eval._env.keep_repo_root_off_path)
from memofs_eval._env import keep_repo_root_off_path  # noqa: E402 (after the variables above)

keep_repo_root_off_path()
sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def real_sentences() -> list[str]:
    """Several hundred real English sentences the project owns: the bundled datasets' memory
    and query texts (never shared data, so the parity checks always run)."""
    from memofs_datasets.texts import bundled_texts

    texts = bundled_texts()
    assert len(texts) >= 400, len(texts)
    return texts


@pytest.fixture(scope="session")
def locomo_dir() -> Path:
    """The LoCoMo release from shared data; the test is skipped when shared data is off or absent."""
    from memofs_datasets.shared import locomo_path

    path = locomo_path()
    if path is None or not (path / "locomo10.json").is_file():
        pytest.skip("LoCoMo is not in shared data ($MEMOFS_SHARED, default ../shared)")
    return path
