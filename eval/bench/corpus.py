"""Real-text corpora for benchmarks: LoCoMo turns when shared data is present, else the
bundled datasets' own memory and query texts, replicated with seeded perturbation up to the
requested size. Every report names its source."""

from __future__ import annotations

import json
import random
import re
from memofs_datasets.shared import locomo_path
from memofs_datasets.texts import bundled_texts


def base_texts() -> tuple[list[str], str]:
    """Real sentences and the name of their source."""
    folder = locomo_path()
    locomo = folder / "locomo10.json" if folder is not None else None
    if locomo is not None and locomo.is_file():
        texts = []
        for rec in json.loads(locomo.read_text(encoding="utf-8")):
            conv = rec["conversation"]
            for key, turns in conv.items():
                if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                    texts.extend(f"{t['speaker']}: {t['text']}" for t in turns if t.get("text"))
        if texts:
            return texts, "LoCoMo turns"
    return bundled_texts(), "bundled dataset texts"


def corpus(n: int, seed: int = 0) -> list[str]:
    """``n`` documents: the real texts, then perturbed copies (shuffled words, a few
    words suffixed with the copy number) so the vocabulary keeps growing like real data."""
    texts, source = base_texts()
    if n > 0 and not texts:
        raise ValueError(f"cannot build a {n}-document corpus: {source} gave no text")
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
    from memofs.text.tokenize import tokenize

    rng = random.Random(seed)
    if n > 0 and not any(len(tokenize(d)) >= terms for d in docs):
        raise ValueError(f"cannot draw {terms}-term queries: none of the {len(docs)} documents has {terms} terms")
    out = []
    while len(out) < n:  # ends: some document has enough terms (checked above)
        toks = tokenize(docs[rng.randrange(len(docs))])
        if len(toks) >= terms:
            out.append(rng.sample(toks, terms))
    return out
