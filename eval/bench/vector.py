"""Vector benchmark: encode throughput, top-10 search latency, embeddings.jsonl rehydration.

    python -m memofs_eval.bench.vector [--quick] [--sizes 1000 10000 100000]

* encode: texts/s for MiniLM, the static distilled MiniLM and LSA on LoCoMo turns (or the
  spec's sentences when LoCoMo is absent), single process, this machine's cores;
* search: median top-10 latency of ``VectorIndex.search`` next to a bare numpy
  ``M @ q`` + ``argpartition`` + sort of the 10 measured in the same run (target <= 1.2x);
* rehydrate: ``EmbeddingsFile.load`` + ``VectorIndex.upsert`` of an N-line, 384-d file.

Prints a markdown table and writes it to ``reports/bench-vector.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile
from memofs.signals.vector_index import VectorIndex
from memofs_eval.bench.corpus import base_texts
from memofs_eval.bench.timing import timed
from memofs_eval.provenance.stamp import markdown_line
from memofs_eval.reporting.markdown import table

REPORTS = Path(__file__).resolve().parents[2] / "reports"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "memofs" / "static"


def bench_encode(n_texts: int) -> list[str]:
    from memofs.signals.embedders import LocalEmbedder, LSAEmbedder, StaticEmbedder

    texts, source = base_texts()
    sample = texts[:n_texts]
    rows = []
    lsa = LSAEmbedder(dim=256)
    candidates: list[tuple[str, object, Callable[[], object]]] = [
        ("MiniLM (sentence-transformers)", LocalEmbedder(), lambda: None),
        ("static distilled MiniLM", StaticEmbedder(cache_dir=CACHE), lambda: None),
        ("LSA-256 (fit on all turns)", lsa, lambda: lsa.fit(texts)),
    ]
    for label, emb, prepare in candidates:
        def ready(prepare: Callable[[], object] = prepare, emb: object = emb) -> None:
            prepare()
            if hasattr(emb, "load"):
                emb.load()

        _, load_s = timed(ready)
        emb.encode(sample[:8])  # warm-up (first-batch allocations, thread pools)
        out, dt = timed(lambda: emb.encode(sample))
        rows.append((label, out.shape[1], f"{load_s:.2f}", f"{len(sample) / dt:,.0f}"))
    return [f"### Encode throughput ({len(sample)} {source}, {os.cpu_count()} cores)", "",
            table(("embedder", "dim", "load/fit s", "texts/s"), rows, "lrrr")]


def bench_search(sizes: list[int], dim: int, n_queries: int) -> list[str]:
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        mat = rng.standard_normal((n, dim)).astype(np.float32)
        mat /= np.linalg.norm(mat, axis=1, keepdims=True)
        ids = [f"chunk-{i:07d}" for i in range(n)]
        index = VectorIndex(dim)
        index.upsert(ids, mat)
        queries = rng.standard_normal((n_queries, dim)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        bare_m = np.ascontiguousarray(mat)

        def bare(q: np.ndarray) -> list[tuple[str, float]]:
            s = bare_m @ q
            top = np.argpartition(-s, 10)[:10]
            top = top[np.argsort(-s[top])]
            return [(ids[i], float(s[i])) for i in top]

        # interleave the two so drift in machine load hits both alike
        ours_t, bare_t = [], []
        for q in queries:
            index.search(q, 10)
            bare(q)
        for q in queries:
            ours_t.append(timed(lambda: index.search(q, 10))[1])
            bare_t.append(timed(lambda: bare(q))[1])
        o, b = statistics.median(ours_t) * 1e3, statistics.median(bare_t) * 1e3
        rows.append((f"{n:,}", f"{o:.3f}", f"{b:.3f}", f"{o / b:.2f}x"))
    return [f"### Top-10 search latency ({dim}-d, median of {n_queries} queries)", "",
            table(("vectors", "VectorIndex ms", "bare numpy ms", "ratio"), rows, "rrrr")]


def bench_rehydrate(n_lines: int, dim: int) -> list[str]:
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        f = EmbeddingsFile(Path(tmp) / "embeddings.jsonl")
        vecs = rng.standard_normal((n_lines, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        f._write_lines(  # one bulk write; upsert per record would rewrite the file n times
            EmbeddingRecord(id=f"chunk-{i}", vector=vecs[i], embedder="bench", text_sha256=f"{i:064x}",
                            metadata={"sourcePath": ".memofs/memory/notes.md"}).to_json()
            for i in range(n_lines)
        )
        size_mb = f.path.stat().st_size / 1e6

        def load() -> VectorIndex:
            records, _ = f.load("bench", dim)
            index = VectorIndex(dim)
            index.upsert([r.id for r in records], np.vstack([r.vector for r in records]))
            return index  # freed after the timing, as before

        index, elapsed = timed(load)
    return [f"### Rehydration of embeddings.jsonl ({dim}-d)", "",
            table(("lines", "file MB", "seconds", "lines/s"), [(f"{n_lines:,}", f"{size_mb:,.0f}", f"{elapsed:.2f}", f"{n_lines / elapsed:,.0f}")], "rrrr")]


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--encode-texts", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rehydrate-lines", type=int, default=100_000)
    ap.add_argument("--skip-encode", action="store_true")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-vector.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.encode_texts, args.queries, args.rehydrate_lines = [200, 1000], 16, 10, 500
    parts = ["# Vector benchmark" + (" (--quick smoke sizes, not a measurement)" if args.quick else ""), ""]
    if not args.skip_encode:
        parts += bench_encode(args.encode_texts) + [""]
    parts += bench_search(args.sizes, 384, args.queries) + [""]
    parts += bench_rehydrate(args.rehydrate_lines, 384) + [""]
    table = "\n".join(parts)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n" + markdown_line(("memofs_eval.bench.vector",)) + "\n", encoding="utf-8")
    return table


if __name__ == "__main__":
    main()
