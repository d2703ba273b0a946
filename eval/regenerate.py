"""``make reports``: regenerate exactly the committed reports whose stamp is stale.

    python -m memofs_eval.regenerate [--dry-run] [--all] [--only PATH ...] [--compare]

:data:`REPORTS` lists every committed report: the file that records its stamp
(:mod:`memofs_eval.provenance.stamp`), the command that regenerates it, and the files holding its
figures. A report is stale when :func:`memofs_eval.provenance.stamp.stale` gives a reason; timing
reports (``timing=True``) record their commit but are never stale by a hash, since a rerun
measures the machine as much as the code: they regenerate only with ``--all`` or ``--only``.
Reports run in the listed order (the learned study writes model files that the others read).
After any run the README's generated blocks are rewritten.

``--compare`` checks, figure by figure, each regenerated report against the copy it replaced,
so a refactor can show "no figure changed" (:func:`figure_changes`).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from memofs_eval._env import REPO
from memofs_eval.provenance.stamp import recorded, stale

SHARED = REPO.parent / "shared" / "datasets"
PY = sys.executable


@dataclass(frozen=True)
class Committed:
    """One committed report: where its stamp is, how to remake it, where its figures are."""

    stamp: str
    command: tuple[str, ...]
    figures: tuple[str, ...] = ()
    timing: bool = False
    needs: tuple[str, ...] = ()  # paths (relative to the repo) that must exist to regenerate it

    def recorded(self, repo: Path = REPO) -> dict | None:
        path = repo / self.stamp
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if path.suffix == ".json" else recorded(text)

    def why_stale(self, repo: Path = REPO) -> list[str]:
        rec = self.recorded(repo)
        if rec is None:
            return [f"{self.stamp} is missing or records no provenance"]
        return [] if self.timing else stale(rec, repo)


_LOCOMO = "../shared/datasets/locomo"
_LME = "../shared/datasets/longmemeval-dev/longmemeval_dev.json"
_RUN_FIGURES = ("results.csv", "confidence_intervals.csv", "significance.csv", "attribution.csv", "briefing_curve.csv")

REPORTS: tuple[Committed, ...] = (
    Committed("reports/learned/lodo/summary.json", (PY, "-m", "memofs_eval.studies.learned_transfer"),
              ("reports/learned/lodo/summary.json",), needs=(_LOCOMO, _LME)),
    # after LODO (it reads the robust profile it ships), before the systems reports (they read its models)
    Committed("reports/learned/recommended/summary.json", (PY, "-m", "memofs_eval.studies.recommended"),
              ("reports/learned/recommended/summary.json", "reports/learned/recommended/results.csv"), needs=(_LOCOMO, _LME)),
    Committed("reports/latest/manifest.json", ("make", "eval"), tuple(f"reports/latest/{f}" for f in _RUN_FIGURES)),
    Committed("reports/locomo/latest/manifest.json", ("make", "eval-locomo", f"LOCOMO={_LOCOMO}"),
              tuple(f"reports/locomo/latest/{f}" for f in _RUN_FIGURES), needs=(_LOCOMO,)),
    Committed("reports/longmemeval/latest/manifest.json", ("make", "eval-longmemeval", f"LONGMEMEVAL={_LME}"),
              tuple(f"reports/longmemeval/latest/{f}" for f in _RUN_FIGURES), needs=(_LME,)),
    Committed("reports/supersession/supersession.md",
              (PY, "-m", "memofs_eval.studies.supersession_sweep", "--out", "reports/supersession",
               "--count", f"locomo={_LOCOMO}:locomo", "--count", f"longmemeval-dev={_LME}:longmemeval"),
              ("reports/supersession/supersession.csv",), needs=(_LOCOMO, _LME)),
    Committed("reports/systems/report.md", (PY, "-m", "memofs_eval.studies.systems", "eval/specs/systems.toml"),
              ("reports/systems/results.csv", "reports/systems/significance.csv")),
    Committed("reports/systems/locomo/report.md", (PY, "-m", "memofs_eval.studies.systems", "eval/specs/systems-locomo.toml"),
              ("reports/systems/locomo/results.csv", "reports/systems/locomo/significance.csv"), needs=(_LOCOMO,)),
    Committed("reports/systems/longmemeval/report.md",
              (PY, "-m", "memofs_eval.studies.systems", "eval/specs/systems-longmemeval.toml"),
              ("reports/systems/longmemeval/results.csv", "reports/systems/longmemeval/significance.csv"), needs=(_LME,)),
    Committed("reports/performance.md", ("make", "bench"), timing=True),
    Committed("reports/bench-lexical.md", ("make", "bench-lexical"), timing=True),
    Committed("reports/bench-vector.md", ("make", "bench-vector"), timing=True),
    Committed("reports/bench-processes.md", ("make", "bench-processes"), timing=True),
    Committed("reports/bench-rerank.md", ("make", "bench-rerank"), timing=True),
)
README_WRITERS: tuple[tuple[str, ...], ...] = (
    (PY, "-m", "memofs_eval.reporting.readme_tables"), (PY, "-m", "memofs_eval.reporting.readme_blocks"), (PY, "-m", "memofs_eval.reporting.readme_tour"))

# fields that describe a run rather than its figures
_NOT_FIGURES = frozenset({"git_commit", "code_hash", "code_entries", "code_inputs", "code_outputs", "code_files", "run_id", "timings",
                          "packages", "cache", "path", "wall_s", "seconds", "elapsed_s"})


def _leaves(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            if k not in _NOT_FIGURES:
                out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_leaves(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def figure_changes(name: str, old: bytes, new: bytes) -> list[str]:
    """Each figure that differs between two versions of one figures file (CSV or JSON)."""
    if name.endswith(".csv"):
        a, b = pd.read_csv(io.BytesIO(old)), pd.read_csv(io.BytesIO(new))
        out = [f"{name}: column {c} {'added' if c in b else 'removed'}" for c in sorted(set(a.columns) ^ set(b.columns))]
        common = [c for c in a.columns if c in b.columns]
        # rows are matched by their text columns (method, dataset, query ...); a figure is a number
        keys = [c for c in common if not (pd.api.types.is_numeric_dtype(a[c]) and pd.api.types.is_numeric_dtype(b[c]))]
        a, b = a.astype({k: str for k in keys}), b.astype({k: str for k in keys})  # one dtype per key column
        if not keys or a.duplicated(keys).any() or b.duplicated(keys).any():
            if len(a) != len(b):
                return out + [f"{name}: {len(a)} rows -> {len(b)} rows"]
            a, b, keys = a.assign(_row=range(len(a))), b.assign(_row=range(len(b))), ["_row"]
        m = a[common + [k for k in keys if k not in common]].merge(
            b[common + [k for k in keys if k not in common]], on=keys, how="outer", suffixes=("_old", "_new"), indicator=True)
        out += [f"{name}: row {dict(zip(keys, r))} {'added' if side == 'right_only' else 'removed'}"
                for *r, side in m.loc[m["_merge"] != "both", keys + ["_merge"]].itertuples(index=False)]
        both = m[m["_merge"] == "both"]
        for col in (c for c in common if c not in keys):
            for r, x, y in zip(both[keys].itertuples(index=False), both[f"{col}_old"], both[f"{col}_new"], strict=True):
                if not _same(x, y):
                    out.append(f"{name}: {dict(zip(keys, r))} {col}: {x} -> {y}")
        return out
    la, lb = _leaves(json.loads(old)), _leaves(json.loads(new))
    out = [f"{name}: {k}: {la.get(k)} -> {lb.get(k)}" for k in sorted(set(la) | set(lb)) if not _same(la.get(k), lb.get(k))]
    return out


def regenerate(reports: Sequence[Committed], compare: bool, repo: Path = REPO) -> int:
    status = 0
    with tempfile.TemporaryDirectory() as keep:
        for rep in reports:
            saved = {}
            for rel in rep.figures:
                if (repo / rel).is_file():
                    saved[rel] = Path(keep) / rel.replace("/", "__")
                    shutil.copyfile(repo / rel, saved[rel])
            print(f"== {rep.stamp}: {' '.join(rep.command)}", flush=True)
            rc = subprocess.run(rep.command, cwd=repo).returncode
            if rc != 0:
                print(f"memofs-eval: error: {' '.join(rep.command)} exited {rc}", file=sys.stderr)
                status = 1
                continue
            if compare:
                changes = [c for rel, old in saved.items() if (repo / rel).is_file()
                           for c in figure_changes(rel, old.read_bytes(), (repo / rel).read_bytes())]
                print(f"   {rep.stamp}: no figure changed" if not changes else
                      f"   {rep.stamp}: {len(changes)} figures changed, first: " + "; ".join(changes[:5]), flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memofs_eval.regenerate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="only say which reports are stale and why")
    ap.add_argument("--all", action="store_true", help="regenerate every report, timing reports included")
    ap.add_argument("--only", nargs="+", default=[], metavar="PATH", help="regenerate these reports (their stamp paths)")
    ap.add_argument("--compare", action="store_true", help="check figure by figure against the replaced copies")
    args = ap.parse_args(argv)
    known = {r.stamp: r for r in REPORTS}
    unknown = [p for p in args.only if p not in known]
    if unknown:
        print(f"memofs-eval: error: --only {unknown[0]}: not a committed report (known: {', '.join(known)})", file=sys.stderr)
        return 2
    todo = []
    for rep in REPORTS:
        why = rep.why_stale()
        chosen = args.all or rep.stamp in args.only or (not args.only and why)
        print(f"{rep.stamp}: {'stale: ' + '; '.join(why) if why else 'up to date'}")
        missing = [n for n in rep.needs if not (REPO / n).exists()]
        if chosen and missing:
            print(f"   skipped: needs {', '.join(missing)}")
        elif chosen:
            todo.append(rep)
    if args.dry_run or not todo:
        return 0
    status = regenerate(todo, args.compare)
    for cmd in README_WRITERS:
        status |= subprocess.run(cmd, cwd=REPO).returncode != 0
    return status


if __name__ == "__main__":
    raise SystemExit(main())
