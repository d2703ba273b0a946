"""Executor benchmark: extraction texts/s and configs/s, local vs a Dask ``LocalCluster``.

    python -m memofs_eval.bench.executor [--quick] [--readme]

For each executor (local; LocalCluster with 1 and 2 single-threaded worker processes):
* extraction: one signal group of a bundled dataset into a fresh cache (embedding batches
  + scope tasks: the harness's ``compute_frames`` on Dask; locally the same task functions
  timed one by one, which also gives the per-task costs), texts/s = the plan's distinct
  texts (memories + rewritten queries) / seconds;
* recombination: seeded random fusion configs (:func:`memofs_eval.bench.harness.random_configs`)
  through ``run_all`` on that executor, configs/s.

The scaling model prices LongMemEval_M's extraction on a 64-worker cluster from the
per-task costs measured here (the local run's embedding batches and scope tasks, and a
Dask no-op task's round trip); the corpus sizes are the inputs stated in ``LME_M``.
``--readme`` writes the model into ``eval/README.md`` between its markers.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memofs.ranking.config import RecallConfig
from memofs.signals.embedding_cache import CHUNK
from memofs_eval.bench.output import emit
from memofs_eval.reporting.readme_blocks import between
from memofs_eval.bench.recall import REPO, REPORTS, Section
from memofs_eval.bench.timing import timed
from memofs_eval.reporting.markdown import table

README = REPO / "eval" / "README.md"
MODEL_START, MODEL_END = "<!-- executor-model:start -->", "<!-- executor-model:end -->"


@dataclass(frozen=True)
class ExecutorBenchConfig:
    dataset: Path = REPO / "datasets" / "agent-memory"
    embedder: str = "minilm"
    configs: int = 24
    workers: tuple[int, ...] = (1, 2)
    noop_tasks: int = 200
    cluster_workers: int = 64


@dataclass(frozen=True)
class Corpus:
    """A corpus the model prices: texts to embed and scopes (one query each)."""

    name: str
    texts: int
    scopes: int
    source: str


# issue 21: a 100-question LongMemEval file holds 48,844 turns; LongMemEval_M is 50x that
# file (500 questions, one haystack each); no deduplication across haystacks is assumed
LME_M = Corpus("LongMemEval_M", 50 * 48_844, 500, "issue 21: 48,844 turns per 100 questions, M = 50x, one haystack per question")


def _extract(data, embedder: str, executor, root: Path) -> tuple[int, float]:
    from memofs_eval.runs.signals_cache import compute_frames, extraction_plan

    n = extraction_plan(data, RecallConfig(), embedder).n_texts
    _, dt = timed(lambda: compute_frames(data, RecallConfig(), embedder, root, executor=executor))
    return n, dt


def _recombine(frames_path: Path, frames, configs, executor) -> float:
    from memofs_eval.runs.runner import run_all

    from memofs_eval.runs.signals_cache import frames_only

    jobs = [(f"c{i}", ("g",), c) for i, c in enumerate(configs)]
    handles = {("g",): executor.shared(frames, frames_only, str(frames_path))}
    _, dt = timed(lambda: run_all(jobs, handles, workers=1, executor=executor))
    return dt


def _task_costs(data, embedder: str, root: Path) -> tuple[float, float, int, int, float]:
    """The local executor's extraction into a fresh cache, each task timed alone: seconds
    per embedded text, per (query x corpus memory) of a scope task, the mean scope size,
    the texts embedded and the total seconds (the local row)."""
    from memofs_eval.runs.signals_cache import cached_embedder, embed_batch, extraction_plan, scope_frames

    plan = extraction_plan(data, RecallConfig(), embedder)
    emb = cached_embedder(data, embedder, root)  # fitted / loaded outside the timing
    if emb is not None:
        emb.inner.encode(["warm-up"])
    _, embed_s = timed(lambda: [embed_batch(data, embedder, root, b) for b in plan.batches])
    per_text = embed_s / max(1, plan.n_texts)
    per_cell, sizes, scope_s = [], [], 0.0
    for scope in plan.scopes:
        q = next(x for x in data.queries if x.id == scope[1][0])
        size = len(data.dataset.corpus_for(q))
        _, dt = timed(lambda s=scope: scope_frames(data, RecallConfig(), embedder, root, s))
        per_cell.append(dt / (len(scope[1]) * size))
        sizes.append(size)
        scope_s += dt
    return per_text, statistics.median(per_cell), round(statistics.mean(sizes)), plan.n_texts, embed_s + scope_s


def _noop(x: int) -> int:
    return x


def scaling_model(per_text: float, per_cell: float, overhead: float, corpus: Corpus, workers: int) -> str:
    """Markdown: how ``workers`` split ``corpus``'s extraction, from measured task costs."""
    batches = math.ceil(corpus.texts / CHUNK)
    per_scope = corpus.texts / corpus.scopes
    t_batch = per_text * CHUNK
    t_scope = per_cell * per_scope  # one query per haystack
    embed_wall = math.ceil(batches / workers) * (t_batch + overhead)
    scope_wall = math.ceil(corpus.scopes / workers) * (t_scope + overhead)
    cpu = batches * t_batch + corpus.scopes * t_scope
    rows = [
        ("texts to embed", f"{corpus.texts:,}", corpus.source),
        ("embedding tasks (batches of CHUNK texts)", f"{batches:,}", f"ceil(texts / {CHUNK})"),
        ("seconds per embedding task", f"{t_batch:.2f}", f"measured {per_text * 1e3:.2f} ms per text x {CHUNK}"),
        ("scope tasks (haystacks)", f"{corpus.scopes:,}", corpus.source),
        ("seconds per scope task", f"{t_scope:.2f}", f"measured {per_cell * 1e6:.2f} us per query x memory x {per_scope:,.0f} memories"),
        ("Dask overhead per task (s)", f"{overhead:.4f}", "measured no-op task round trip"),
        (f"embedding wall on {workers} workers (s)", f"{embed_wall:,.0f}", f"ceil(tasks / {workers}) x (task + overhead)"),
        (f"scope wall on {workers} workers (s)", f"{scope_wall:,.0f}", f"ceil(tasks / {workers}) x (task + overhead)"),
        (f"extraction wall on {workers} workers (h)", f"{(embed_wall + scope_wall) / 3600:.2f}", "embedding, then scopes"),
        ("extraction on one worker (h)", f"{cpu / 3600:.1f}", "every task in turn, no overhead"),
    ]
    return table(("quantity", "value", "from"), rows, "lrl")


def run(cfg: ExecutorBenchConfig, quick: bool = False) -> Section:
    from memofs_datasets.format import load_dataset
    from memofs_eval.bench.harness import random_configs
    from memofs_eval.inputs.data import EvalData
    from memofs_eval.execution.executor import LOCAL, DaskExecutor
    from memofs_eval.runs.signals_cache import compute_frames, embed_batch, load_checked, load_frames, save_frames
    from memofs_eval.inputs.spec import DatasetRef

    data = EvalData(DatasetRef(cfg.dataset.name, cfg.dataset), load_dataset(cfg.dataset))
    configs = random_configs(cfg.configs, 0)
    rows, headline, rates = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-executor-") as tmp:
        tmp = Path(tmp)
        per_text, per_cell, mean_scope, n_local, local_s = _task_costs(data, cfg.embedder, tmp / "costs")
        frames, name = compute_frames(data, RecallConfig(), cfg.embedder, tmp / "costs")
        frames_path = tmp / "frames.npz"
        save_frames(frames_path, frames, name)
        frames = load_frames(frames_path)[0]
        runs = [("local", None)] + [(f"LocalCluster, {w} worker{'s' if w > 1 else ''}", w) for w in cfg.workers]
        overhead = float("nan")
        for label, w in runs:
            if w is None:
                ex, close = LOCAL, None
            else:
                ex = DaskExecutor(n_workers=w)
                close = ex.close
            try:
                if w is not None:  # warm the workers (imports, the embedder) before timing
                    ex.map(_noop, range(4 * w))
                    ex.map(embed_batch, [(f"warm-up {i}",) for i in range(2 * w)], ex.shared(data, load_checked, data.ref, data.content_hash),
                           cfg.embedder, tmp / "warm")
                    if w == max(cfg.workers):
                        _, dt = timed(lambda: ex.map(_noop, range(cfg.noop_tasks)))
                        overhead = dt * w / cfg.noop_tasks
                if w is None:  # the timed tasks above were the local executor's extraction
                    n, ext_s = n_local, local_s
                else:
                    n, ext_s = _extract(data, cfg.embedder, ex, tmp / f"cold-{label}")
                _recombine(frames_path, frames, configs[:4], ex)  # warm-up
                rec_s = _recombine(frames_path, frames, configs, ex)
            finally:
                if close is not None:
                    close()
            rows.append((label, f"{n / ext_s:,.1f}", f"{ext_s:.1f}", f"{len(configs) / rec_s:,.1f}"))
            rates.append((label, n / ext_s, len(configs) / rec_s))
    _, local_ext, local_rec = rates[0]
    for label, ext, rec in rates[1:]:  # the local executor, same run, is the peer
        headline.append((f"extraction texts/s, {label} ({cfg.dataset.name}, {cfg.embedder}, cold cache)", f"{ext:,.1f}",
                         f"{local_ext:,.1f} (local)", f"{ext / local_ext:.2f}x"))
        headline.append((f"sweep configs/s, {label} ({cfg.dataset.name})", f"{rec:,.1f}", f"{local_rec:,.1f} (local)", f"{rec / local_rec:.2f}x"))
    model = scaling_model(per_text, per_cell, overhead, LME_M, cfg.cluster_workers)
    lines = ["(--quick smoke sizes, not a measurement)\n"] if quick else []
    lines += [
        f"Dataset `{cfg.dataset.name}` ({len(data.queries)} queries, {n:,} distinct texts to embed, embedder {cfg.embedder}); "
        f"extraction into a fresh cache each time, workers warmed first; {len(configs)} seeded random fusion configs. "
        "One run each (a sizing figure, not a median).",
        "",
        table(("executor", "extraction texts/s", "extraction s", "configs/s"), rows, "lrrr"),
        "",
        f"Measured per-task costs (local, one task at a time): {per_text * 1e3:.2f} ms per embedded text, "
        f"{per_cell * 1e6:.2f} us per query x corpus memory in a scope task (mean scope {mean_scope:,} memories).",
        "",
        f"Scaling model: {LME_M.name} extraction on {cfg.cluster_workers} workers of this machine's speed.",
        "",
        MODEL_START, model, MODEL_END,
    ]
    return Section("Executors (`memofs_eval.bench.executor`)", "\n".join(lines), [], headline)


def quick_config() -> ExecutorBenchConfig:
    return ExecutorBenchConfig(dataset=REPO / "datasets" / "tiny", embedder="lsa", configs=8, workers=(1,), noop_tasks=20)


def write_readme(section_md: str, readme: Path = README) -> None:
    """Copy the model block of the bench's markdown into ``eval/README.md``'s markers."""
    span = between(section_md, MODEL_START, MODEL_END, "bench output")
    text = readme.read_text(encoding="utf-8")
    dest = between(text, MODEL_START, MODEL_END, str(readme))
    readme.write_text(text[: dest[0]] + section_md[span[0]:span[1]] + text[dest[1]:], encoding="utf-8")


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    ap.add_argument("--readme", action="store_true", help="also write the scaling model into eval/README.md")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-executor.md")
    a = ap.parse_args(argv)
    section = run(quick_config() if a.quick else ExecutorBenchConfig(), a.quick)
    text = emit(section, a.out, "memofs_eval.bench.executor")
    if a.readme:
        write_readme(section.markdown)
    return text


if __name__ == "__main__":
    main()
