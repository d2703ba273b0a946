"""``python -m memofs_eval.studies.systems SPEC [--out DIR] [--dataset NAME ...] [--scopes N]``: every
system of a systems spec through its harness spec's datasets, then the comparison report
(:mod:`.report`) in ``reports/systems/<the spec's report folder>``. ``--scopes N``: every system
on the same seeded sample of at most N scopes per dataset (a small run). Exit 0 on success, 2
with one line when the spec or a dataset is bad, 1 with one line (and no report) when a system
failed every query of a dataset, unless ``--allow-failed``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from memofs_eval._env import REPO
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.studies.systems import report
from memofs_eval.studies.systems.compare import compare
from memofs_eval.studies.systems.config import load_systems_spec
from memofs_eval.studies.systems.run import run_in_process, run_isolated


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memofs_eval.studies.systems", description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="default: reports/systems/<the spec's report folder>")
    ap.add_argument("--dataset", action="append", default=[], help="only these datasets of the spec (repeatable)")
    ap.add_argument("--system", action="append", default=[], help="only these systems (repeatable; the reference is kept)")
    ap.add_argument("--scopes", type=int, default=None, help="at most this many scopes per dataset, a seeded sample")
    ap.add_argument("--allow-failed", action="store_true",
                    help="write the report even when a system failed every query of a dataset (shown as failed)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        spec = load_systems_spec(args.spec)
        refs = [d for d in spec.harness.datasets if not args.dataset or d.name in args.dataset]
        if not refs:
            raise ValueError(f"--dataset: none of {args.dataset} is in the spec")
        data = [EvalData(ref, load(ref)) for ref in refs]
    except (ValueError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    systems = [s for s in spec.systems if not args.system or s.name in args.system or s.name == spec.reference]
    runner = run_isolated if spec.isolate else run_in_process
    runs = {}
    for s in systems:
        t = time.perf_counter()
        runs[s.name] = runner(s, data, spec.harness.k, spec.timeout_s, spec.harness.seed, args.scopes)
        failed = sum(len(r.failures) for r in runs[s.name])
        print(f"{s.name}: {time.perf_counter() - t:.1f} s, {failed} failed queries", file=sys.stderr)
    dead = [r for rs in runs.values() for r in rs if r.failures and set(r.failures) >= set(r.ranked)]
    if dead and not args.allow_failed:
        # a system that answered nothing is a broken setup far more often than a finding:
        # its zeros would enter the report and its significance family unnoticed
        r = dead[0]
        first = next(iter(r.failures.values()))
        print(f"error: {r.system} failed every one of its {len(r.failures)} queries on {r.dataset} "
              f"(e.g. {first}); no report written (--allow-failed writes it)", file=sys.stderr)
        return 1
    cmp = compare(spec.harness, data, runs, spec.reference)
    rel = args.spec.resolve().relative_to(REPO) if args.spec.resolve().is_relative_to(REPO) else args.spec
    command = f"python -m memofs_eval.studies.systems {rel}" + "".join(f" --dataset {d}" for d in args.dataset)
    command += "".join(f" --system {s}" for s in args.system) + (f" --scopes {args.scopes}" if args.scopes else "")
    command += " --allow-failed" if args.allow_failed else ""
    out = args.out or REPO / "reports" / "systems" / spec.report
    md = report.build(cmp, list(spec.harness.headline), {s.name: s.note for s in systems if s.note}, command,
                      time.perf_counter() - t0, data=data, specs=(spec.path, *(p for p in (spec.systems_from,) if p), spec.harness.path))
    report.write(cmp, out, md)
    print(f"wrote {out / 'report.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
