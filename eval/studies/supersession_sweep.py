"""The supersession penalty's sweep (issue 20): how ``RecallConfig.superseded_penalty``
ranks superseded memories against their replacements, and how its default was chosen.

For each penalty in :data:`PENALTIES` (1.0 = supersession off) the default pipeline is
recombined from the harness's cached signal frames (``run_all`` over ``fuse``, as
``memofs-eval run`` does) and scored with the harness's metrics and temporal measures
(:mod:`memofs_eval.scoring.measures`) on the temporal queries (:data:`TEMPORAL_CATEGORIES`) and on
all queries, per split. The default is chosen on the **tune** split's temporal queries
alone, for the penalty's purpose (the spec: superseded knowledge is outranked): the
penalties with the lowest mean ``superseded_above_current``, among them the best mean
``ndcg@10``, ties to the mildest (closest to 1). The held-out split is reported, never
used to choose. Superseded versions are judged relevant at grade 1 in agent-memory, so
demoting them costs some nDCG: the tables show how much.

Datasets whose memories nothing supersedes (LoCoMo and LongMemEval as loaded: their
loaders set no ``supersedes`` and they have no graph) are counted, not swept: every
penalty ranks them identically, which :func:`superseded_count` shows.

Run (writes ``supersession.md`` and ``supersession.csv`` into ``--out``)::

    python -m memofs_eval.studies.supersession_sweep --out reports/supersession \
        --count locomo=../shared/datasets/locomo:locomo \
        --count longmemeval=../shared/datasets/longmemeval-dev/longmemeval_dev.json:longmemeval
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import memofs_eval._env  # noqa: F401  (cache and offline variables before ranx/torch)
import pandas as pd

from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.config import RecallConfig
from memofs.ranking.recall import Recaller

from memofs_eval.scoring import measures as MS
from memofs_eval._env import cache_root
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.runs.runner import run_all
from memofs_eval.runs.signals_cache import SignalCache
from memofs_eval.inputs.spec import DatasetRef, load_spec
from memofs_eval.reporting.markdown import table as md

PENALTIES: tuple[float, ...] = (1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
TEMPORAL_CATEGORIES: tuple[str, ...] = ("temporal_superseded", "temporal_recency")
METRICS: tuple[str, ...] = ("ndcg@10", "mrr@10", "superseded_above_current", "current_first")
TARGET_METRIC = "superseded_above_current"  # lower is better
SELECT_METRIC = "ndcg@10"
COUNT_OPTIONS: dict[str, dict[str, str]] = {"locomo": {"unit": "turn"}, "longmemeval": {"granularity": "turn"}}
"""Loader options of the counted datasets: those of eval/specs/locomo.toml and longmemeval.toml."""
DEFAULT_SPEC = Path(__file__).resolve().parents[1] / "specs" / "default.toml"


def superseded_count(data: EvalData) -> tuple[int, int]:
    """Memories of ``data`` that some memory of their own corpus supersedes, summed over its
    namespaces: (memory level only, memory or graph level; :meth:`Recaller.superseded_by`)."""
    memory_level = total = 0
    for ns in data.dataset.namespaces:
        mems = [m for m in data.dataset.memories if m.namespace == ns]
        for graph, count_total in ((EntityGraph(), False), (EntityGraph(*data.dataset.graph_for(ns)), True)):
            rec = Recaller(RecallConfig(), graph=graph)
            rec.add(mems, vectors=None)
            if count_total:
                total += len(rec.superseded_by())
            else:
                memory_level += len(rec.superseded_by())
    return memory_level, total


def sweep(data: EvalData, base: RecallConfig, embedder: str, cache: SignalCache,
          penalties: Sequence[float] = PENALTIES, workers: int = 1) -> pd.DataFrame:
    """Long table: penalty, split, subset (temporal | all), metric, mean, n (queries counted)."""
    qids = [q.id for q in data.queries]
    frames = cache.frames(data, base, embedder).frames
    jobs = [(f"p={p}", "g", base.replace(superseded_penalty=p)) for p in penalties]
    facts = MS.build_facts(data.dataset, base.kind_expiry_days, qids)
    ranked, _ = run_all(jobs, {"g": {q: frames[q] for q in qids}}, workers=workers)
    splits = data.subsets()
    temporal = {q for q in qids if data.category[q] in TEMPORAL_CATEGORIES}
    rows = []
    for p, (name, _, _) in zip(penalties, jobs, strict=True):
        pq = MS.per_query(facts, data.qrels, ranked[name], list(METRICS))
        for split, members in splits.items():
            for subset, keep in (("temporal", [q for q in members if q in temporal]), ("all", members)):
                sub = pq.loc[keep]
                for metric in METRICS:
                    col = sub[metric].dropna()
                    rows.append({"penalty": p, "split": split, "subset": subset, "metric": metric,
                                 "mean": float(col.mean()) if len(col) else float("nan"), "n": int(len(col))})
    return pd.DataFrame(rows)


def choose(table: pd.DataFrame, split: str = "tune") -> float:
    """On ``split``'s temporal queries: the penalties with the lowest mean
    :data:`TARGET_METRIC`, then among them the best mean :data:`SELECT_METRIC`, then the
    larger (milder) penalty."""
    sel = table[(table.split == split) & (table.subset == "temporal")]
    wide = sel.pivot(index="penalty", columns="metric", values="mean")
    wide = wide[wide[TARGET_METRIC] <= wide[TARGET_METRIC].min() + 1e-12]
    wide = wide[wide[SELECT_METRIC] >= wide[SELECT_METRIC].max() - 1e-12]
    return float(wide.index.max())


def markdown(table: pd.DataFrame, chosen: float, dataset: str, embedder: str, counts: dict[str, tuple[int, int]]) -> str:
    """The report: the sweep per split and subset, the chosen default, the no-op datasets."""
    def cell(v: float) -> str:
        return "n/a" if v != v else f"{v:.4f}"

    from memofs_eval.provenance.stamp import markdown_line

    lines = [f"# Supersession penalty sweep ({dataset}, embedder {embedder})", "", markdown_line(("memofs_eval.studies.supersession_sweep",), ("eval/specs/*.toml",)), "",
             f"Default pipeline, `superseded_penalty` swept (1.0 = off). Chosen on the tune split's "
             f"temporal queries ({', '.join(TEMPORAL_CATEGORIES)}): lowest mean {TARGET_METRIC} "
             f"(lower is better), then best mean {SELECT_METRIC}, then the mildest: **{chosen}**. "
             "Superseded versions are judged relevant at grade 1, so demoting them costs some nDCG. "
             "n: queries with a value (superseded_above_current and current_first are NaN where "
             "no pair is in play / no mix of current and outdated relevant memories).", ""]
    for (split, subset), part in table.groupby(["split", "subset"], sort=False):
        n = part.groupby("metric")["n"].max().to_dict()
        wide = part.pivot(index="penalty", columns="metric", values="mean").sort_index(ascending=False)
        mark = {chosen: " (chosen)", 1.0: " (off)"} if chosen != 1.0 else {chosen: " (chosen)"}
        rows = [[f"{p}{mark.get(p, '')}", *(cell(r[m]) for m in METRICS)] for p, r in wide.iterrows()]
        lines += [f"## {split} split, {subset} queries", "",
                  md(["penalty", *(f"{m} (n={n[m]})" for m in METRICS)], rows), ""]
    lines += ["## Superseded memories per dataset", "",
              md(["dataset", "by a memory's supersedes", "by a memory or a graph supersedes edge"],
                 [[name, a, b] for name, (a, b) in counts.items()])]
    lines += ["", "A dataset with 0 ranks identically under every penalty (the penalty multiplies "
              "only superseded memories), so its figures are unchanged.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memofs_eval.studies.supersession_sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for supersession.md and supersession.csv")
    ap.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="spec whose datasets and pipeline are used")
    ap.add_argument("--dataset", default="agent-memory", help="the dataset of the spec to sweep")
    ap.add_argument("--embedder", default=None, help="override the spec's embedder (e.g. lsa)")
    ap.add_argument("--count", action="append", default=[], metavar="NAME=PATH:LOADER",
                    help="also count superseded memories of another dataset, e.g. locomo=../shared/datasets/locomo:locomo "
                         "or longmemeval=../shared/datasets/longmemeval-dev/longmemeval_dev.json:longmemeval")
    args = ap.parse_args(argv)
    spec = load_spec(args.spec)
    refs = {r.name: r for r in spec.datasets}
    if args.dataset not in refs:
        print(f"memofs-eval: error: {args.spec}: no dataset {args.dataset!r} (has {', '.join(refs)})", file=sys.stderr)
        return 1
    others: list[DatasetRef] = []
    for item in args.count:  # checked before the sweep runs
        name, _, rest = item.partition("=")
        path, _, loader = rest.rpartition(":")
        if not name or not path or not loader:
            print(f"memofs-eval: error: --count {item!r}: expected NAME=PATH:LOADER", file=sys.stderr)
            return 1
        others.append(DatasetRef(name, Path(path), loader, dict(COUNT_OPTIONS.get(loader, {}))))
    data = EvalData(refs[args.dataset], load(refs[args.dataset]))
    embedder = args.embedder or spec.embedder
    table = sweep(data, spec.default_config(), embedder, SignalCache(cache_root()))
    chosen = choose(table)
    counts = {args.dataset: superseded_count(data)}
    for ref in others:
        try:
            counts[ref.name] = superseded_count(EvalData(ref, load(ref)))
        except (OSError, ValueError) as exc:  # DatasetError is a ValueError naming file, line and field
            print(f"memofs-eval: error: --count {ref.name}: {exc}", file=sys.stderr)
            return 1
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "supersession.csv", index=False)
    (args.out / "supersession.md").write_text(markdown(table, chosen, args.dataset, embedder, counts))
    print(f"chosen superseded_penalty = {chosen}; wrote {args.out / 'supersession.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
