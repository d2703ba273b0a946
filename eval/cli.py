"""``memofs-eval``: run specs, tune, write the committed baseline, and gate CI.

    memofs-eval run SPEC [--dataset PATH ...] [--quiet] [--out DIR] [--no-gate]
                    [--executor local|dask] [--scheduler tcp://host:8786] [--cache DIR]
    memofs-eval tune SPEC [--dataset PATH ...] [--quiet]
    memofs-eval tune --learned
    memofs-eval baseline SPEC [--quiet]      # writes reports/baseline.json

Exit codes: 0 ok; 1 the gate failed: the default pipeline fell below ``reports/baseline.json``
by more than the spec's tolerance (paired one-sided test where the baseline has per-query
values), or the baseline is missing (without ``--allow-missing-baseline``) or stale; 2 a bad spec, dataset or any failure that prevents a report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import memofs_eval._env  # noqa: F401  (environment before anything imports ranx)
from memofs_eval._env import REPO
from memofs_eval.execution.executor import EXECUTORS
from memofs_eval.inputs.spec import DatasetRef, Spec, load_spec

BASELINE = REPO / "reports" / "baseline.json"


def _with_datasets(spec: Spec, paths: list[str], loader: str | None) -> Spec:
    """Replace the spec's datasets by command-line paths (loader: flag, the spec's single
    entry, or detected from the path)."""
    from memofs_eval.inputs.data import detect_loader

    paths = [p for p in paths if p.strip()]  # `make eval-locomo` without LOCOMO passes ""
    if not paths:
        return spec
    loaders = {d.loader for d in spec.datasets}
    if len(paths) == 1 and len(spec.datasets) > 1 and len(loaders) == 1 and loaders != {"memofs"} \
            and loader in (None, *loaders):
        # one file read several ways (LongMemEval at turn and session granularity): keep every entry
        path = Path(paths[0]).expanduser().resolve()
        return dataclasses.replace(spec, datasets=tuple(dataclasses.replace(d, path=path) for d in spec.datasets))
    refs = []
    for p in paths:
        path = Path(p).expanduser().resolve()
        if loader:
            ld = loader
        elif len(spec.datasets) == 1 and spec.datasets[0].loader != "memofs":
            ld = spec.datasets[0].loader
        else:
            ld = detect_loader(path)
        opts = spec.datasets[0].options if len(spec.datasets) == 1 and spec.datasets[0].loader == ld else {}
        name = spec.datasets[0].name if len(paths) == 1 and len(spec.datasets) == 1 and spec.datasets[0].loader == ld else path.name
        refs.append(DatasetRef(name, path, ld, dict(opts)))
    return dataclasses.replace(spec, datasets=tuple(refs))


def headline_of(exp) -> dict[str, dict[str, float]]:
    """The default pipeline's headline metrics per dataset, on the headline subset."""
    out = {}
    for dr in exp.datasets:
        pq = dr.per_query["default"].loc[dr.data.subsets()[dr.data.headline_subset]]
        out[dr.data.name] = {"subset": dr.data.headline_subset, "content_hash": dr.data.content_hash,
                             **{m: round(float(pq[m].mean()), 6) for m in exp.spec.headline}}
    return out


def check_gate(exp, baseline_path: Path, allow_missing: bool = False) -> dict:
    """Compare the default pipeline with the committed baseline (:mod:`memofs_eval.scoring.gate`): a
    missing file or dataset fails unless ``allow_missing``; a stale baseline always fails."""
    from memofs_eval.scoring.gate import metric_verdict

    try:
        shown = baseline_path.relative_to(REPO).as_posix()
    except ValueError:
        shown = str(baseline_path)
    now = headline_of(exp)
    if not baseline_path.is_file():
        line = f"no baseline file {shown} (write one: `memofs-eval baseline {exp.spec.path}`)"
        return {"ok": allow_missing, "baseline": shown,
                "lines": [line + (": allowed by --allow-missing-baseline" if allow_missing else " FAIL")]}
    base = json.loads(baseline_path.read_text(encoding="utf-8")).get("datasets", {})
    lines, ok = [], True
    for dr in exp.datasets:
        ds, vals = dr.data.name, now[dr.data.name]
        if ds not in base:
            ok &= allow_missing
            lines.append(f"{ds}: no baseline" + (" (allowed by --allow-missing-baseline)" if allow_missing else " FAIL"))
            continue
        if base[ds].get("content_hash") not in (None, vals["content_hash"]):
            ok = False  # numbers of different data are not comparable: rewrite the baseline
            lines.append(f"{ds}: STALE baseline: the dataset changed since it was written FAIL "
                         f"(run `memofs-eval baseline {exp.spec.path}`)")
            continue
        pq = dr.per_query["default"].loc[dr.data.subsets()[dr.data.headline_subset]]
        for metric, tol in exp.spec.tolerance.items():
            if metric not in base[ds] or metric not in vals:
                continue
            v = metric_verdict(metric, vals[metric], base[ds][metric], tol,
                               pq[metric].to_dict() if metric in pq else None,
                               base[ds].get("per_query", {}).get(metric))
            ok &= not v.bad
            lines.append(v.line(ds))
    return {"ok": ok, "baseline": shown, "lines": lines}


def _with_executor(spec: Spec, args) -> Spec:
    """The spec with the command line's executor; ``--scheduler`` alone implies dask."""
    kind = args.executor or ("dask" if args.scheduler else spec.executor)
    return dataclasses.replace(spec, executor=kind, scheduler=args.scheduler or spec.scheduler)


def _experiment(args):
    from memofs_eval.experiments.experiment import run_experiment

    spec = _with_executor(_with_datasets(load_spec(args.spec), args.dataset or [], args.loader), args)
    return run_experiment(spec, progress=not args.quiet, cache_root=Path(args.cache) if args.cache else None)


def cmd_run(args) -> int:
    from memofs_eval.reporting.report import write_report

    exp = _experiment(args)
    gate = None if args.no_gate else check_gate(exp, Path(args.baseline), args.allow_missing_baseline)
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{exp.spec.name}"
    reports = Path(args.out) if args.out else REPO / "reports"
    out = write_report(exp, reports / run_id, run_id=run_id, gate=gate, latest=reports / "latest")
    _summary(exp, gate, out, args.quiet)
    return 1 if gate is not None and not gate["ok"] else 0


def cmd_tune(args) -> int:
    if args.learned:  # the learned fusion held out by dataset (LODO), its models and its own report
        from memofs_eval.studies import learned_transfer

        reports = Path(args.out) if args.out else REPO / "reports"
        return learned_transfer.main(["--out", str(reports / "learned" / "lodo")])
    if args.spec is None:
        raise SystemExit("tune needs a SPEC (or --learned)")
    from memofs_eval.reporting.report import write_report

    spec = load_spec(args.spec)
    if spec.tune is None or not spec.tune.grid:
        raise SystemExit(f"{args.spec}: the spec has no [tune.grid] to search")
    exp = _experiment(args)
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-tune-{exp.spec.name}"
    reports = Path(args.out) if args.out else REPO / "reports"
    out = write_report(exp, reports / run_id, run_id=run_id, latest=None)
    for dr in exp.datasets:
        t = dr.tune
        print(f"{dr.data.name}: {t.metric} cross-validated {t.cv_mean:.4f}"
              + (f"; held-out {t.heldout_mean:.4f} with {t.heldout_candidate}" if t.heldout_candidate else "")
              + f"; in-sample best {max(t.mean_by_candidate.values()):.4f} (optimistic)")
        for f in t.folds:
            print(f"  fold {f['fold']}: {f['chosen']} train {f['train_mean']:.4f} test {f['test_mean']:.4f} (n={f['n_test']})")
    print(f"report: {out}")
    return 0


def cmd_baseline(args) -> int:
    """Only the default pipeline is needed: ablations, baselines and tuning are dropped."""
    from memofs_eval.experiments.experiment import run_experiment

    spec = _with_executor(_with_datasets(load_spec(args.spec), args.dataset or [], args.loader), args)
    spec = dataclasses.replace(spec, toggles=(), sweeps={}, grids=(), embedders=(), baselines=(), tune=None)
    exp = run_experiment(spec, progress=not args.quiet, cache_root=Path(args.cache) if args.cache else None)
    heads = headline_of(exp)
    for dr in exp.datasets:  # per-query values: the gate's verdict is paired (memofs_eval.scoring.gate)
        pq = dr.per_query["default"].loc[dr.data.subsets()[dr.data.headline_subset]]
        heads[dr.data.name]["per_query"] = {m: {q: round(float(x), 6) for q, x in pq[m].items()} for m in exp.spec.headline}
    data = {"spec": str(Path(args.spec)), "metrics": list(exp.spec.headline), "datasets": heads,
            "written_by": "memofs-eval baseline " + str(args.spec)}
    path = Path(args.baseline)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


def _summary(exp, gate, out: Path, quiet: bool) -> None:
    for ds, vals in headline_of(exp).items():
        print(f"{ds} [{vals['subset']}] default: " + ", ".join(f"{m} {vals[m]:.4f}" for m in exp.spec.headline))
    if gate is not None:
        print("gate: " + ("PASS" if gate["ok"] else "FAIL"))
        for line in gate["lines"]:
            if not quiet or "FAIL" in line or "STALE" in line:
                print("  " + line)
    if not quiet:
        for dr in exp.datasets:
            print(f"{dr.data.name}: timings {dr.timings}")
    print(f"report: {out}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memofs-eval", description="MemoFS evaluation harness")
    sub = p.add_subparsers(dest="command", required=True)
    for name, fn, helptext in (("run", cmd_run, "run a spec and write a report (CI gate)"),
                               ("tune", cmd_tune, "cross-validated grid search over [tune.grid]"),
                               ("baseline", cmd_baseline, "write reports/baseline.json from a spec")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("spec", nargs="?" if name == "tune" else None, help="TOML experiment spec (e.g. eval/specs/default.toml)")
        if name == "tune":
            s.add_argument("--learned", action="store_true", help="the learned-fusion study instead: leave one dataset out, shipped models (python -m memofs_eval.studies.learned_transfer)")
        s.add_argument("--dataset", action="append", help="dataset path replacing the spec's datasets (repeatable)")
        s.add_argument("--loader", choices=("memofs", "locomo", "longmemeval", "beir", "trec"), help="loader for --dataset paths")
        s.add_argument("--quiet", action="store_true", help="no progress bars (CI)")
        s.add_argument("--out", help="reports folder (default: <repo>/reports)")
        s.add_argument("--baseline", default=str(BASELINE), help="baseline JSON for the gate")
        s.add_argument("--no-gate", action="store_true", help="skip the baseline comparison")
        s.add_argument("--executor", choices=EXECUTORS, help="where extraction and recombination run (default: the spec's, else local)")
        s.add_argument("--scheduler", help="Dask scheduler address (tcp://host:8786); without it, --executor dask starts a LocalCluster")
        s.add_argument("--cache", help="embedding and signal cache folder, shared by every worker (default: $MEMOFS_EVAL_CACHE or <repo>/.cache)")
        s.add_argument("--allow-missing-baseline", action="store_true",
                       help="a first run: pass the gate when the baseline file or a dataset's entry is missing")
        s.set_defaults(fn=fn)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    warnings.filterwarnings("ignore", message=".*unsafe cast.*")  # numba noise inside ranx
    try:
        return args.fn(args)
    except SystemExit:
        raise
    except Exception as exc:  # any failure means no report: CI must see it
        if not args.quiet:
            traceback.print_exc()
        print(f"memofs-eval: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
