"""Lexical benchmark: memofs BM25 (with and without fuzzy) vs bm25s (lucene) and rank_bm25.

    python -m memofs_eval.bench.lexical [--sizes 1000 10000 100000] [--quick]

Prints a markdown table (medians over repeats, after a warm-up) and writes it to
``reports/bench-lexical.md``. Ratios are against peers measured in the same run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from memofs.signals.bm25 import BM25Index
from memofs.text.tokenize import tokenize
from memofs_eval.bench.corpus import base_texts, corpus, queries
from memofs_eval.bench.timing import median_time
from memofs_eval.provenance.stamp import markdown_line
from memofs_eval.reporting.markdown import table

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def run(sizes: list[int], n_queries: int, repeats: int, rank_bm25_queries: int) -> str:
    import bm25s
    from rank_bm25 import BM25Okapi

    rows = []
    for n in sizes:
        docs = corpus(n)
        toks = [tokenize(d) for d in docs]
        qs = queries(docs, n_queries)
        ids = [f"d{i}" for i in range(n)]

        def build_ours():
            idx = BM25Index()
            idx.add_many(zip(ids, docs))
            idx.score(["warm"])  # lay out the matrix
            return idx

        t_build_ours = median_time(build_ours, 1)
        ours = build_ours()
        vocab = {t: i for i, t in enumerate(sorted({t for ts in toks for t in ts}))}
        tok_ids = [[vocab[t] for t in ts] for ts in toks]

        def build_bm25s():
            r = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
            r.index(bm25s.tokenization.Tokenized(ids=tok_ids, vocab=vocab), show_progress=False)
            return r

        t_build_bm25s = median_time(build_bm25s, 1)
        ref = build_bm25s()
        q_ids = [[vocab[t] for t in q if t in vocab] for q in qs]

        def q_ours_bm25():
            for q in qs:
                ours.search(q, 10, fuzzy=False)

        def q_ours_full():
            for q in qs:
                ours.search(q, 10)

        def q_bm25s():
            for q in q_ids:
                s = ref.get_scores(q)
                top = np.argpartition(-s, min(10, len(s) - 1))[:10]
                top[np.argsort(-s[top], kind="stable")]

        def q_bm25s_retrieve():
            # bm25s' own compiled top-k path (numba backend), one query at a time like ours
            for q in q_ids:
                ref.retrieve([q], k=10, backend_selection="numba", show_progress=False, n_threads=1)

        qps_bm25 = len(qs) / median_time(q_ours_bm25, repeats)
        qps_full = len(qs) / median_time(q_ours_full, repeats)
        # the peer's best of its two query paths, so the ratio is conservative
        qps_bm25s = max(len(qs) / median_time(q_bm25s, repeats), len(qs) / median_time(q_bm25s_retrieve, repeats))
        rb = BM25Okapi(toks, k1=1.2, b=0.75)
        rq = qs[:rank_bm25_queries]
        qps_rank = len(rq) / median_time(lambda: [rb.get_scores(q) for q in rq], 1)
        rows.append((n, t_build_ours, t_build_bm25s, qps_bm25, qps_full, qps_bm25s, qps_rank))

    _, source = base_texts()
    return render(rows, source, n_queries, repeats, rank_bm25_queries)


def render(rows: list[tuple[int, float, float, float, float, float, float]], source: str, n_queries: int, repeats: int,
           rank_bm25_queries: int) -> str:
    """The report's text from ``(docs, build ours s, build bm25s s, BM25 q/s, BM25+fuzzy q/s, bm25s q/s,
    rank_bm25 q/s)`` rows."""
    header = ("docs", "build memofs (s)", "build bm25s (s)", "memofs BM25 q/s", "bm25s q/s (best path)",
              "ratio BM25/bm25s (target >= 0.8)", "memofs BM25+fuzzy q/s", "rank_bm25 q/s", "ratio full/rank_bm25 (target >= 20)")
    body = [(f"{n:,}", f"{bo:.2f}", f"{bb:.2f}", f"{qb:,.0f}", f"{qs_:,.0f}", f"{qb / qs_:.2f}x", f"{qf:,.0f}", f"{qr:,.1f}", f"{qf / qr:.0f}x")
            for n, bo, bb, qb, qf, qs_, qr in rows]
    return (f"Corpus: {source}, replicated with perturbation. {n_queries} three-term queries; "
            f"medians of {repeats} runs after a warm-up; rank_bm25 on {rank_bm25_queries} queries.\n\n"
            + table(header, body, "r" * len(header)))


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-lexical.md")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes, a.queries, a.repeats = [200], 10, 1
    table = run(a.sizes, a.queries, a.repeats, rank_bm25_queries=min(a.queries, 20))
    print(table)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("# Lexical benchmark\n\n" + table + "\n\n" + markdown_line(("memofs_eval.bench.lexical",)) + "\n", encoding="utf-8")
    return table


if __name__ == "__main__":
    main()
