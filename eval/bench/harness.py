"""Harness benchmark: sweep throughput with warm caches, and the wall time of ``make eval``.

    python -m memofs_eval.bench.harness [--quick] [--no-make-eval]

* signals: every query's :class:`SignalFrame` of a bundled dataset, extracted once with the
  harness's ``compute_frames``, with the embedding cache already warm;
* recombination: N seeded random configs that differ only in fusion fields, each fused over
  every query's cached frame by the harness's ``run_all``: configs per second at 1 and 2 workers;
* peer: the same sweep without the signal cache, i.e. extraction + fusion per config
  (configs/s = 1 / (extraction s + fusion s per config)); ratio = warm / cold;
* ``make eval`` wall time, run once, when its default spec exists.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from memofs.ranking.config import RecallConfig
from memofs.signals.frame import SignalFrame
from memofs_eval.bench.recall import REPO, REPORTS, Section
from memofs_eval.bench.timing import timed
from memofs_eval.reporting.markdown import table
from memofs_eval.bench.output import emit


@dataclass(frozen=True)
class HarnessBenchConfig:
    dataset: Path = REPO / "datasets" / "agent-memory"
    configs: int = 200
    embedder: str = "minilm"
    workers: tuple[int, ...] = (1, 2)
    make_eval: bool = True
    seed: int = 0


def random_configs(n: int, seed: int) -> list[RecallConfig]:
    """``n`` configs varying only fusion fields (so all share one signal group):
    relevance/recency/confidence weights from a flat Dirichlet (they sum to 1)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        g = [rng.expovariate(1.0) for _ in range(3)]
        s = sum(g)
        out.append(RecallConfig().replace(
            w_vec=round(rng.random(), 3), rerank_blend=round(rng.random(), 3),
            w_relevance=g[0] / s, w_recency=g[1] / s, w_confidence=g[2] / s * 0.999999,
            half_life_days=rng.choice([7.0, 14.0, 30.0, 60.0, 90.0]), saturation_c=round(rng.uniform(0.5, 4.0), 2),
            dynamic_weights=rng.random() < 0.8, use_recency=rng.random() < 0.8, use_drift=rng.random() < 0.8,
            use_decay=rng.random() < 0.8, use_fuzzy=rng.random() < 0.8,
        ))
    return out


def extract(path: Path, embedder_name: str) -> tuple[dict[str, SignalFrame], str, float]:
    """Frames (second call timed: embedding cache and numba kernels warm) and which path ran."""
    from memofs_datasets.format import load_dataset

    from memofs_eval._env import cache_root
    from memofs_eval.inputs.data import EvalData
    from memofs_eval.runs.signals_cache import compute_frames
    from memofs_eval.inputs.spec import DatasetRef

    data = EvalData(DatasetRef(path.name, path), load_dataset(path))

    def go() -> dict[str, SignalFrame]:
        return compute_frames(data, RecallConfig(), embedder_name, cache_root())[0]

    how = "memofs_eval.runs.signals_cache.compute_frames"
    go()
    frames, dt = timed(go)
    return frames, how, dt


def recombine(frames: dict[str, SignalFrame], configs: list[RecallConfig], workers: int) -> tuple[float, str]:
    """Seconds to fuse every config over every query."""
    from memofs_eval.runs.runner import run_all

    jobs = [(f"c{i}", ("g",), c) for i, c in enumerate(configs)]
    _, dt = timed(lambda: run_all(jobs, {("g",): frames}, workers=workers))
    return dt, "memofs_eval.runs.runner.run_all"


def make_eval_command(makefile: Path = REPO / "Makefile") -> list[str]:
    """The ``eval`` target's recipe with ``$(PY)`` = this interpreter. Its ``install``
    prerequisite is left out on purpose: a benchmark must never pip-install."""
    lines = makefile.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("eval:"):
            recipe = [ln.strip() for ln in lines[i + 1:] if ln.startswith("\t")][:1]
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if not nxt.startswith("\t") or not recipe:
                raise ValueError(f"{makefile}:{i + 2}: target 'eval' has no recipe line")
            return shlex.split(recipe[0].replace("$(PY)", sys.executable))
    raise ValueError(f"{makefile}: no 'eval:' target")


def make_eval_wall(enabled: bool) -> str:
    if not enabled:
        return "`make eval`: not run (--quick / --no-make-eval)."
    cmd = make_eval_command()
    spec = next((c for c in cmd if c.endswith(".toml")), None)
    if spec is not None and not (REPO / spec).is_file():
        return f"`make eval`: skipped, {spec} is absent."
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
           "TOKENIZERS_PARALLELISM": "false", "NUMBA_CACHE_DIR": str(REPO / ".cache" / "numba")}
    proc, dt = timed(lambda: subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env))
    status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1]})"
    shown = " ".join(["python", *cmd[1:]])
    return (f"`make eval` wall time (its recipe `{shown}`, one run, caches as earlier runs left them; "
            f"the install step is not timed): {dt:.1f} s, {status}. No peer: a one-off wall time.")


def run(cfg: HarnessBenchConfig, quick: bool = False) -> Section:
    frames, how, extract_s = extract(cfg.dataset, cfg.embedder)
    configs = random_configs(cfg.configs, cfg.seed)
    rows, headline = [], []
    per_config_fuse = None
    for w in cfg.workers:
        recombine(frames, configs[: max(2, len(configs) // 10)], w)  # warm-up (pool start, first fuse)
        dt, rhow = recombine(frames, configs, w)
        if per_config_fuse is None:
            per_config_fuse = dt / len(configs)
        cold_rate = 1.0 / (extract_s + per_config_fuse)
        rate = len(configs) / dt
        rows.append((w, f"{rate:,.1f}", f"{1e3 * dt / (len(configs) * len(frames)):.3f}", f"{cold_rate:,.2f}", f"{rate / cold_rate:,.0f}x", rhow))
        headline.append((f"sweep configs/s, warm caches, {w} worker{'s' if w > 1 else ''} ({cfg.dataset.name})",
                         f"{rate:,.1f}", f"{cold_rate:,.2f} (re-extract per config)", f"{rate / cold_rate:,.0f}x"))
    lines = ["(--quick smoke sizes, not a measurement)\n"] if quick else []
    lines += [
        f"Dataset `{cfg.dataset.name}`: {len(frames)} queries with judgements; frames by {how} "
        f"({extract_s:.2f} s for all queries, embedding cache warm, embedder {cfg.embedder}). "
        f"{len(configs)} seeded random configs varying fusion fields only. Peer: the same sweep re-extracting signals "
        "for every config (extraction + fusion per config).",
        "",
        table(("workers", "configs/s (warm)", "ms per config per query", "configs/s (re-extract)", "ratio", "recombination by"), rows, "rrrrrl"),
        "", make_eval_wall(cfg.make_eval and not quick),
    ]
    return Section("Harness", "\n".join(lines), [], headline)


def quick_config() -> HarnessBenchConfig:
    return HarnessBenchConfig(dataset=REPO / "datasets" / "tiny", configs=12, workers=(1,), make_eval=False)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    ap.add_argument("--no-make-eval", action="store_true")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-harness.md")
    a = ap.parse_args(argv)
    cfg = quick_config() if a.quick else HarnessBenchConfig(make_eval=not a.no_make_eval)
    section = run(cfg, a.quick)
    return emit(section, a.out, "memofs_eval.bench.harness")


if __name__ == "__main__":
    main()
