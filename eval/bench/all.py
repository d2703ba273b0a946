"""Every benchmark, one report: ``reports/performance.md`` + log-log PNGs in ``reports/figures/``.

    python -m memofs_eval.bench.all [--quick] [--out-dir reports] [--only recall store ...]

Runs the lexical and vector micro-benchmarks (their own ``main``), the end-to-end recall,
store and harness benchmarks, fits the growth of every cost with corpus size (log-log
slope, > 1.1 flagged), draws the scaling figures and records the machine (cores, CPU
model, library versions, thread settings). Every figure is a median (or percentile) over
repeated runs after a warm-up, next to a peer measured in the same run, as a ratio.
``make bench`` runs the default sizes; ``--quick`` is a smoke run (not a measurement).
A benchmark that fails is reported as failed and the command exits non-zero, after the
report is written.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from memofs_eval.bench import plots
from memofs_eval.reporting.readme_blocks import HEADLINE_END, HEADLINE_START, RUN_PREFIX
from memofs_eval.bench.recall import REPO, REPORTS, Section
from memofs_eval.provenance.stamp import git_commit, markdown_line, stamp
from memofs_eval.reporting.markdown import table

BENCHES: tuple[str, ...] = ("recall", "store", "processes", "lexical", "vector", "executor", "harness")  # harness last: it runs `make eval`
LIBRARIES: tuple[str, ...] = ("numpy", "scipy", "numba", "torch", "sentence-transformers", "transformers", "onnxruntime", "tokenizers", "bm25s",
                              "scikit-learn", "matplotlib", "threadpoolctl")
THREAD_VARS: tuple[str, ...] = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT", "NUMBA_NUM_THREADS",
                                "TOKENIZERS_PARALLELISM")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> str:
    """Markdown: cores, CPU, Python, library versions, thread settings and thread pools."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    lines = [
        f"- CPU: {cpu_model()}; {os.cpu_count()} logical cores, {usable} usable by this process",
        f"- OS / Python: {platform.platform()} / {platform.python_version()}",
        f"- commit: {git_commit(REPO, short=True)}, code hash {stamp(('memofs_eval.bench.all',))['code_hash']}",
    ]
    versions = []
    for lib in LIBRARIES:
        try:
            versions.append(f"{lib} {metadata.version(lib)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{lib} (absent)")
    lines.append("- libraries: " + ", ".join(versions))
    lines.append("- thread variables: " + ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in THREAD_VARS))
    runtime = []
    import numba

    runtime.append(f"numba threads {numba.config.NUMBA_NUM_THREADS} (layer {numba.config.THREADING_LAYER})")
    if "torch" in sys.modules:  # only report torch's pool if a benchmark loaded it
        torch = sys.modules["torch"]
        runtime.append(f"torch intra-op threads {torch.get_num_threads()}, inter-op {torch.get_num_interop_threads()}")
    if runtime:
        lines.append("- runtime: " + "; ".join(runtime))
    try:
        from threadpoolctl import threadpool_info

        pools = [f"{p.get('internal_api')} {p.get('version') or ''} x{p.get('num_threads')} ({p.get('user_api')})".replace("  ", " ")
                 for p in threadpool_info()]
        lines.append("- threadpoolctl: " + ("; ".join(pools) if pools else "no native pools loaded"))
    except ImportError:
        lines.append("- threadpoolctl: absent")
    return "\n".join(lines)


def _bench_runners(quick: bool, out_dir: Path, make_eval: bool) -> dict[str, Callable[[], Section]]:
    def recall() -> Section:
        from memofs_eval.bench import recall as m

        return m.run(m.quick_config() if quick else m.RecallBenchConfig(), quick)[0]

    def store() -> Section:
        from memofs_eval.bench import store as m

        return m.run(m.quick_config() if quick else m.StoreBenchConfig(), quick)

    def processes() -> Section:
        from memofs_eval.bench import processes as m

        return m.run(m.quick_config() if quick else m.ProcessBenchConfig(), quick)

    def executor() -> Section:
        from memofs_eval.bench import executor as m

        return m.run(m.quick_config() if quick else m.ExecutorBenchConfig(), quick)

    def harness() -> Section:
        from memofs_eval.bench import harness as m

        return m.run(m.quick_config() if quick else m.HarnessBenchConfig(make_eval=make_eval), quick)

    def micro(name: str) -> Callable[[], Section]:
        def go() -> Section:
            import importlib

            mod = importlib.import_module(f"memofs_eval.bench.{name}")
            argv = (["--quick"] if quick else []) + ["--out", str(out_dir / f"bench-{name}.md")]
            text = mod.main(argv)
            body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("# "))
            return Section(f"{name.title()} micro-benchmark (`memofs_eval.bench.{name}`)", body.strip())

        return go

    return {"recall": recall, "store": store, "processes": processes, "harness": harness, "executor": executor, "lexical": micro("lexical"), "vector": micro("vector")}


def headline_table(sections: list[Section]) -> str:
    return table(("measure", "memofs", "peer (same run)", "ratio memofs / peer"), [row for s in sections for row in s.headline], "lrrr")


def report(sections: list[Section], failed: dict[str, str], quick: bool, wall_s: float, out_dir: Path) -> str:
    series = [s for sec in sections for s in sec.series]
    growth = plots.growth(series)
    flagged = [g for g in growth if g.superlinear and not g.peer]
    figs = []
    titles = {"latency": "recall-latency.png", "memory": "recall-memory.png", "store": "store-rehydrate.png"}
    subtitle = f"{cpu_model()}, {os.cpu_count()} cores; medians after warm-up" + (" (--quick smoke)" if quick else "")
    for fig, name in titles.items():
        p = plots.scaling_figure(series, fig, out_dir / "figures" / name, subtitle)
        if p is not None:
            figs.append(f"![{plots.FIGURES[fig][0]}](figures/{name})")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    mode = "--quick smoke run (tiny sizes, not a measurement)" if quick else "default sizes"
    parts = [
        "# Performance",
        "",
        "<!-- generated by `python -m memofs_eval.bench.all` (make bench); do not edit by hand -->",
        markdown_line(("memofs_eval.bench.all",)),
        "",
        f"{RUN_PREFIX}{stamp}, {mode}, {wall_s / 60:.1f} min wall, commit {git_commit(REPO, short=True)}",
        "",
        "Machines here are shared and noisy: read the ratios (memofs / a peer measured in the same run) "
        "rather than the absolute times. Every figure is a median or percentile over repeated runs after a warm-up.",
        "",
        "## Machine", "", machine(), "",
        "## Headline", "", HEADLINE_START, headline_table(sections), HEADLINE_END, "",
    ]
    if failed:
        parts += ["## Failed benchmarks", ""] + [f"- **{k}**:\n\n```\n{v}\n```" for k, v in failed.items()] + [""]
    for sec in sections:
        parts += [f"## {sec.title}", "", sec.markdown, ""]
    parts += ["## Growth with corpus size", "",
              f"Least-squares slope of log(cost) on log(memories); slope > {plots.SUPERLINEAR} is flagged superlinear.", "",
              plots.growth_table(growth), ""]
    parts.append("Superlinear costs (memofs): " + (", ".join(f"**{g.name}** (slope {g.slope:.2f})" for g in flagged) if flagged else "none") + ".")
    parts += ["", "## Figures", "", *figs, ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run (< 1 min), not a measurement")
    ap.add_argument("--out-dir", type=Path, default=REPORTS)
    ap.add_argument("--only", nargs="+", choices=BENCHES, default=list(BENCHES))
    ap.add_argument("--no-make-eval", action="store_true", help="skip timing `make eval`")
    a = ap.parse_args(argv)
    runners = _bench_runners(a.quick, a.out_dir, not a.no_make_eval)
    sections: list[Section] = []
    failed: dict[str, str] = {}
    t0 = time.perf_counter()
    for i, name in enumerate(a.only, 1):
        t = time.perf_counter()
        print(f"[bench.all] {i}/{len(a.only)} {name} ...", flush=True)
        try:
            sections.append(runners[name]())
        except Exception:  # one broken benchmark must not hide the others' numbers
            failed[name] = traceback.format_exc(limit=6).strip()[-3000:]
            print(f"[bench.all] {name} FAILED:\n{failed[name]}", file=sys.stderr)
        print(f"[bench.all] {name} done in {time.perf_counter() - t:.1f} s", flush=True)
    text = report(sections, failed, a.quick, time.perf_counter() - t0, a.out_dir)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    out = a.out_dir / "performance.md"
    out.write_text(text, encoding="utf-8")
    print(f"[bench.all] wrote {out}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
