from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
LOCOMO_DIR = SHARED / "datasets" / "locomo"


@pytest.fixture(scope="session")
def real_sentences() -> list[str]:
    """A few hundred real English sentences: the spec write-up and the facts sheet."""
    spec = SHARED / "spec"
    if not spec.is_dir():
        pytest.skip("../shared/spec is not present")
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(spec.glob("*.md")))
    parts = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    return [s for s in parts if len(s.split()) >= 4]
