"""Real English text the project owns: every memory and query text of the bundled datasets.

Tests and benchmarks that need sentences (parity checks against bm25s, sentence-transformers
and scikit-learn; benchmark corpora) draw on these, so none of them depends on data outside
the repository.
"""

from __future__ import annotations

import json
from pathlib import Path

from memofs_datasets.format import bundled_datasets


def bundled_texts(min_words: int = 4) -> list[str]:
    """Memory texts, then query texts, of every bundled dataset in name order, each once,
    keeping those of at least ``min_words`` words. Raises when nothing is found."""
    seen: dict[str, None] = {}
    for kind in ("memories.jsonl", "queries.jsonl"):
        for _, folder in sorted(bundled_datasets().items()):
            path = folder / kind
            if not path.is_file():
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    text = str(json.loads(line).get("text", "")).strip()
                    if len(text.split()) >= min_words:
                        seen.setdefault(text, None)
    if not seen:
        raise FileNotFoundError(f"no bundled dataset texts under {Path(__file__).parent}")
    return list(seen)
