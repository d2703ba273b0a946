"""Per-call cost of ``Recaller.recall`` at small and medium stores (issue 46, item 7).

    python -m memofs_eval.bench.recall_call [--sizes 500] [--queries 25] [--profiles reference robust]

The systems study (:mod:`memofs_eval.studies.systems.memofs_library`) builds one Recaller per
scope and asks it once per question, so on LongMemEval each timed recall is the first one over
a fresh ~490-memory corpus: what it costs is mostly what the first recall builds (the lexical
index, the corpus columns, the learned fusion's context). Both cases are measured here:

* ``cold``: a fresh Recaller per query (``add`` with given vectors, not timed), then one timed
  recall, as the systems study times it;
* ``warm``: one Recaller, asked every query after a few warm-up calls.

Workload: the recall bench's memories, graph and drifting source tree
(:mod:`memofs_eval.bench.recall`) over :func:`memofs_eval.bench.corpus.corpus`; vectors are
seeded random unit vectors per text (no model: the query encode is a lookup-sized cost, as
the study's cached embedder's). Prints the median milliseconds per call and the mean
milliseconds per stage (``Recaller.recall(profile=...)``) and a digest of the (id, score)
lists, which a change that keeps rankings identical keeps. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memofs.ranking.config import RecallConfig
from memofs.ranking.recall import Recaller
from memofs_eval.bench.corpus import corpus, queries
from memofs_eval.bench.recall import NOW, make_graph, make_memories, make_tree


class SeededEmbedder:
    """A unit vector per text, seeded by the text's SHA-1 (deterministic, no model)."""

    name = "seeded"
    dim = 384

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "big")).normal(size=self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def measure(n: int, profile: str, n_queries: int, cold: bool, k: int = 10) -> dict[str, object]:
    texts = corpus(n, seed=0)
    tree = Path(tempfile.mkdtemp(prefix="memofs-recall-call-"))
    mems = make_memories(texts, make_tree(tree, random.Random(0)), 0)
    emb = SeededEmbedder()
    vectors, graph = emb.encode(texts), make_graph(texts)
    cfg = RecallConfig.from_dict({"profile": profile})
    qs = [" ".join(q) for q in queries(texts, n_queries, seed=1)]

    def fresh() -> Recaller:
        rec = Recaller(cfg, embedder=emb, graph=graph, anchor_root=tree)
        rec.add(mems, vectors=vectors)
        return rec

    rec = fresh()
    for q in qs[:3]:  # imports, compiled kernels
        rec.recall(q, k, now=NOW)
    secs, stages, digest = [], {}, hashlib.sha256()
    for q in qs:
        if cold:
            rec = fresh()
        t0 = time.perf_counter()
        hits = rec.recall(q, k, now=NOW)
        secs.append(time.perf_counter() - t0)
        digest.update(json.dumps([(h.id, h.score) for h in hits]).encode())
    for q in qs:  # the stage profile, in a pass of its own (the stopwatch costs a little)
        (fresh() if cold else rec).recall(q, k, now=NOW, profile=stages)
    return {"n": n, "profile": profile, "case": "cold" if cold else "warm", "p50_ms": round(1000 * statistics.median(secs), 2),
            "stages_ms": {s: round(1000 * v / len(qs), 2) for s, v in stages.items()}, "digest": digest.hexdigest()[:12]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500])
    ap.add_argument("--queries", type=int, default=25)
    ap.add_argument("--profiles", nargs="+", default=["reference", "robust"])
    args = ap.parse_args(argv)
    for n in args.sizes:
        for profile in args.profiles:
            for cold in (True, False):
                print(json.dumps(measure(n, profile, args.queries, cold)))


if __name__ == "__main__":
    main()
