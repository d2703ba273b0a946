"""Real-text corpora for benchmarks: LoCoMo turns when present, else the spec's sentences,
replicated with seeded perturbation up to the requested size."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def base_texts() -> tuple[list[str], str]:
    """Real sentences and the name of their source."""
    locomo = SHARED / "datasets" / "locomo" / "locomo10.json"
    if locomo.is_file():
        texts = []
        for rec in json.loads(locomo.read_text(encoding="utf-8")):
            conv = rec["conversation"]
            for key, turns in conv.items():
                if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                    texts.extend(f"{t['speaker']}: {t['text']}" for t in turns if t.get("text"))
        return texts, "LoCoMo turns"
    spec = SHARED / "spec"
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(spec.glob("*.md")))
    parts = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    return [s for s in parts if len(s.split()) >= 4], "spec sentences"


def corpus(n: int, seed: int = 0) -> list[str]:
    """``n`` documents: the real texts, then perturbed copies (shuffled words, a few
    words suffixed with the copy number) so the vocabulary keeps growing like real data."""
    texts, _ = base_texts()
    rng = random.Random(seed)
    out = list(texts[:n])
    copy = 1
    while len(out) < n:
        for t in texts:
            if len(out) >= n:
                break
            words = t.split()
            rng.shuffle(words)
            for _ in range(max(1, len(words) // 6)):
                i = rng.randrange(len(words))
                words[i] = f"{words[i]}{copy}"
            out.append(" ".join(words))
        copy += 1
    return out


def queries(docs: list[str], n: int, seed: int = 1, terms: int = 3) -> list[list[str]]:
    """Queries of ``terms`` words drawn from random documents (so most have hits)."""
    from memofs.tokenize import tokenize

    rng = random.Random(seed)
    out = []
    while len(out) < n:
        toks = tokenize(docs[rng.randrange(len(docs))])
        if len(toks) >= terms:
            out.append(rng.sample(toks, terms))
    return out
