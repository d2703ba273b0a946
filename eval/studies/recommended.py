"""``python -m memofs_eval.studies.recommended [--out reports/learned/recommended] [--models DIR]``

The ``recommended`` profile (issue 46, item 4): chosen by a rule written down before any of its
held-out figures existed, and scored on every dataset by a model that never saw it.

* Space (:data:`MODES` x the LODO study's candidates): the learned-fusion study's 2 model
  families x 7 feature sets (:func:`memofs_eval.studies.learned_lodo.candidates`), crossed with
  4 query modes: the study's ``rewritten`` and ``raw`` and each of them with Snowball English
  stemming in BM25 and fuzzy (``stem = true``, :mod:`memofs.text.stem`): 56 candidates.
* Selection (:meth:`memofs_eval.studies.learned_lodo.Lab.select`): the candidate whose worst
  inner leave-one-dataset-out fold is best (maximin nDCG@10), ties by the inner mean, then by
  the space's order. The shipped profile applies it to every present dataset and is retrained
  on all of them (``profile-recommended.json``, ``learned-recommended-v1.json``).
* Held out: for each dataset D the same rule runs on the other datasets only, and its pick,
  trained on them, is scored on D's scored queries. That model ships as
  ``learned-recommended-heldout-<D>.json`` (listed in the profile file's ``heldout_models``),
  so the systems study scores D with a model that never saw D.
* The comparison it is bound to: the ``robust`` profile's candidate under the same protocol
  (trained on the other datasets, scored on D). ``recommended`` replaces ``robust`` in the
  README's advice only if on no dataset it is significantly below (paired Student's t, Holm
  over the datasets, alpha :data:`ALPHA`) and it is higher on at least two of three
  (:func:`decision`); otherwise it is reported beside ``robust``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import memofs_eval._env  # noqa: F401  (cache and offline variables before ranx / torch)
import pandas as pd

from memofs.ranking.learned import Model
from memofs.ranking.profiles import MODELS_DIR, profile_file
from memofs_eval._env import REPO
from memofs_eval.provenance.stamp import MODEL_FILES, stamp
from memofs_eval.reporting.report import render_md
from memofs_eval.runs.runner import Ranked
from memofs_eval.scoring.stats import holm, paired_pvalues
from memofs_eval.studies import learned_lodo as LD
from memofs_eval.studies.learned_bench import Bench, ndcg
from memofs_eval.studies.learned_transfer import check_figure

#: query modes of the space: the LODO study's two, and each with stemming
MODES: dict[str, dict[str, bool]] = {**LD.QUERY_MODES, "rewritten+stem": {**LD.QUERY_MODES["rewritten"], "stem": True},
                                     "raw+stem": {**LD.QUERY_MODES["raw"], "stem": True}}
ALPHA = 0.05
PROFILE = "recommended"
MODEL_FILE = "learned-recommended-v1.json"
OUTPUTS = ("memofs/ranking/models/learned-recommended-*.json", "memofs/ranking/models/profile-recommended.json")


def heldout_file(dataset: str) -> str:
    return f"learned-recommended-heldout-{dataset}.json"


def space() -> list[LD.Candidate]:
    return LD.candidates(queries=tuple(MODES))


def robust_candidate(models: Path = MODELS_DIR) -> LD.Candidate:
    """The shipped ``robust`` profile's candidate, read from its profile file."""
    path = models / profile_file("robust").name
    name = json.loads(path.read_text(encoding="utf-8"))["candidate"]
    by_name = {c.name: c for c in LD.candidates()}
    if name not in by_name:
        raise ValueError(f"{path}: candidate: {name!r} is not in the LODO study's space")
    return by_name[name]


def decision(rec: Mapping[str, pd.Series], robust: Mapping[str, pd.Series], p_holm: Mapping[str, float],
             alpha: float = ALPHA) -> dict:
    """The pre-registered rule: ``recommended`` replaces ``robust`` only if on no dataset its
    held-out mean is significantly below robust's (Holm-adjusted p < ``alpha`` with a negative
    difference) and its mean is higher on at least two datasets (of three)."""
    delta = {d: float(rec[d].mean() - robust[d].mean()) for d in rec}
    below = [d for d in rec if delta[d] < 0 and p_holm[d] < alpha]
    higher = [d for d in rec if delta[d] > 0]
    replaces = not below and len(higher) >= min(2, len(rec))
    return {"replaces_robust": replaces, "significantly_below_on": below, "higher_on": higher, "delta": delta}


def paired(qrels: Mapping[str, Mapping[str, int]], a: Ranked, b: Ranked) -> float:
    """Two-sided paired Student's t (ranx) of run ``a`` against run ``b`` on nDCG@10."""
    judged = {q: qrels[q] for q in a}
    return paired_pvalues(judged, b, a, ["ndcg@10"], "student")["ndcg@10"]


@dataclass
class Result:
    """What the study found: per dataset its held-out pick, both runs and their scores; the
    paired tests and the decision; the pick over every dataset (the shipped one)."""

    present: list[str]
    robust: LD.Candidate
    picks: dict[str, LD.Candidate] = field(default_factory=dict)
    inner: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    runs: dict[str, dict[str, Ranked]] = field(default_factory=dict)  # dataset -> {"recommended", "robust"} -> run
    scores: dict[str, pd.DataFrame] = field(default_factory=dict)
    p_raw: dict[str, float] = field(default_factory=dict)
    p_holm: dict[str, float] = field(default_factory=dict)
    verdict: dict = field(default_factory=dict)
    final: LD.Candidate | None = None
    final_folds: dict[str, list[float]] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        rows = []
        for d in self.present:
            s = self.scores[d].mean()
            rows.append({"held-out dataset": d, "queries": len(self.scores[d]), "trained on": " + ".join(x for x in self.present if x != d),
                         "recommended pick": self.picks[d].name, "recommended": float(s["recommended"]),
                         "robust candidate": float(s["robust"]), "difference": float(s["recommended"] - s["robust"]),
                         "p (Student)": self.p_raw[d], "p (Holm)": self.p_holm[d]})
        return pd.DataFrame(rows)


def study(lab: LD.Lab, robust: LD.Candidate, cands: Sequence[LD.Candidate] | None = None) -> Result:
    """The rule of the module docstring on every dataset of ``lab``: held out per dataset,
    then over all of them."""
    cands = list(cands or space())
    r = Result(lab.names, robust)
    for d in r.present:
        others = [x for x in r.present if x != d]
        r.picks[d], r.inner[d] = lab.select(others, cands)
        qids = lab.test_qids(d)
        r.runs[d] = {name: lab.run(lab.train(c, lab.all_parts(others)), c, d, qids)
                     for name, c in (("recommended", r.picks[d]), ("robust", robust))}
        r.scores[d] = pd.DataFrame({name: ndcg(lab.benches[d], run) for name, run in r.runs[d].items()})
        lab.log(f"{d}: held-out pick {r.picks[d].name}")
    r.p_raw = {d: paired(lab.benches[d].qrels, r.runs[d]["recommended"], r.runs[d]["robust"]) for d in r.present}
    r.p_holm = dict(zip(r.present, holm([r.p_raw[d] for d in r.present]), strict=True))
    r.verdict = decision({d: r.scores[d]["recommended"] for d in r.present}, {d: r.scores[d]["robust"] for d in r.present}, r.p_holm)
    r.final, r.final_folds = lab.select(r.present, cands)
    lab.log(f"shipped pick over {', '.join(r.present)}: {r.final.name}")
    return r


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    log = lambda m: print(f"[{time.time() - t0:6.0f}s] {m}", flush=True)  # noqa: E731
    present, absent = LD.available(args.datasets)
    if len(present) < 2:
        raise SystemExit(f"recommended profile study: needs two datasets at least, present: {', '.join(present) or 'none'}")
    lab = LD.Lab({n: Bench.load(n) for n in present}, log=log, modes=MODES)
    robust = robust_candidate(args.models)
    log(f"{len(space())} candidates over {', '.join(present)}; robust = {robust.name}")
    r = study(lab, robust)
    models = ship(lab, r, args.models)
    md = write(args.out, lab, r, absent, models)
    log(f"wrote {md}")
    return 0


def ship(lab: LD.Lab, r: Result, out: Path) -> list[Path]:
    """The profile's model (every dataset), one held-out model per dataset and ``profile-recommended.json``."""
    out.mkdir(parents=True, exist_ok=True)
    final, present = r.final, r.present
    assert final is not None
    paths = []

    def save(m: Model, cand: LD.Candidate, name: str, trained_on: Sequence[str]) -> None:
        m.training["query_settings"] = MODES[cand.query]
        m.cv = {"candidate": cand.name, "trained_on": list(trained_on), "check": check_figure(lab, m, cand)}
        paths.append(m.save(out / name))

    save(lab.train(final, lab.all_parts(present)), final, MODEL_FILE, present)
    held = {}
    for d, cand in r.picks.items():
        others = [x for x in present if x != d]
        save(lab.train(cand, lab.all_parts(others)), cand, heldout_file(d), others)
        held[d] = {"model": heldout_file(d), "candidate": cand.name, "settings": {"fusion": "learned", **MODES[cand.query]}}
    doc = {"profile": PROFILE, "candidate": final.name,
           "settings": {"fusion": "learned", "learned_model": MODEL_FILE, **MODES[final.query]},
           "trained_on": {d: len(q) for d, q in lab.all_parts(present)},
           "inner_lodo_ndcg@10": dict(zip(present, r.final_folds[final.name], strict=True)),
           "heldout_models": held}
    target = out / profile_file(PROFILE).name
    target.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return [*paths, target]


def inner_table(folds: Mapping[str, list[float]], columns: Sequence[str], top: int = 10) -> pd.DataFrame:
    """The ``top`` candidates by the rule (worst inner fold, then mean)."""
    t = pd.DataFrame([{"candidate": c, **dict(zip(columns, f, strict=True)), "worst": min(f), "mean": sum(f) / len(f)}
                      for c, f in folds.items()])
    return t.sort_values(["worst", "mean"], ascending=False).head(top)


def write(out: Path, lab: LD.Lab, r: Result, absent: Sequence[str], models: Sequence[Path]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    head, scores, picks, inner, verdict, robust = r.table(), r.scores, r.picks, r.inner, r.verdict, r.robust
    final, final_folds = r.final, r.final_folds
    assert final is not None
    for d, s in scores.items():
        s.to_csv(out / f"per-query-{d}.csv", index_label="query")
    head.to_csv(out / "results.csv", index=False)
    present = list(scores)
    said = ("**replaces `robust`** in the README's advice" if verdict["replaces_robust"] else
            "**does not replace `robust`**; it is reported beside it")
    blocks: list[tuple[str, object]] = [
        ("h1", "The recommended profile: selected and scored leave one dataset out"),
        ("p", "Generated by `python -m memofs_eval.studies.recommended`. nDCG@10 (ranx, the datasets' graded labels), K = 10, ties "
              "broken by id, on the scored queries (agent-memory: its heldout split; every query elsewhere), each ranked by the "
              "online scorer over the reference pools of its query mode."),
        ("p", "Datasets: " + ", ".join(f"{d} ({len(scores[d])} scored queries, embedder {lab.benches[d].embedder})" for d in present)
              + (f". Absent here (shared data missing), so left out: {', '.join(absent)}." if absent else ".")),
        ("h2", "The rule (written in the issue 46 note before any of these figures existed)"),
        ("p", f"* Space: {len(space())} candidates, the learned-fusion study's 2 families x 7 feature sets x 4 query modes "
              "(`rewritten`, `raw`, and each with `stem = true`).\n"
              "* Selection: the candidate whose worst inner leave-one-dataset-out fold is best, ties by the inner mean, then by "
              "the space's order (`Lab.select`).\n"
              "* Held out: for each dataset, the rule runs on the other datasets only; its pick is trained on them and scored "
              "on the dataset.\n"
              f"* Comparison: the `robust` profile's candidate ({robust.name}) under the same protocol. `recommended` replaces "
              f"`robust` only if on no dataset it is significantly below it (paired Student's t, Holm over the datasets, "
              f"alpha {ALPHA}) and it is higher on at least two of three."),
        ("h2", "1. Held out, against the robust candidate"),
        ("table", head),
        ("p", f"Decision: `recommended` {said}. Higher on: {', '.join(verdict['higher_on']) or 'none'}; significantly below "
              f"on: {', '.join(verdict['significantly_below_on']) or 'none'}."),
        ("h2", "2. The shipped profile"),
        ("p", f"Selected over {', '.join(present)}: **{final.name}**, retrained on every present dataset. Its inner folds: "
              + ", ".join(f"{d} {v:.4f}" for d, v in zip(present, final_folds[final.name], strict=True))
              + ". These read every dataset, so they are not held-out figures; section 1 is. `\"profile\": \"recommended\"` in "
                "`.memofs/config.json` or `memofs init --profile recommended`; the reference stays the default.\n"
              + "\n".join(f"* `{p.relative_to(REPO) if p.is_relative_to(REPO) else p}`" for p in models)),
        ("table", inner_table(final_folds, present)),
    ]
    for d in present:
        cols = [x for x in present if x != d]
        blocks += [("h2", f"3. {d} held out: the inner selection (the ten best by the rule)"),
                   ("p", f"Inner folds over {' and '.join(cols)} only; the pick is {picks[d].name}."),
                   ("table", inner_table(inner[d], cols))]
    (out / "summary.json").write_text(json.dumps({
        **stamp(("memofs_eval.studies.recommended",), (MODEL_FILES,), outputs=OUTPUTS), "metric": "ndcg@10",
        "datasets": present, "absent": list(absent), "embedders": {d: lab.benches[d].embedder for d in present},
        "space": len(space()), "robust": robust.name, "shipped": final.name,
        "heldout": {r["held-out dataset"]: {k: v for k, v in r.items() if k != "held-out dataset"} for r in head.to_dict(orient="records")},
        "decision": verdict}, indent=1, default=str) + "\n")
    md = out / "report.md"
    md.write_text(render_md(blocks, out), encoding="utf-8")
    return md


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memofs_eval.studies.recommended", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "learned" / "recommended")
    ap.add_argument("--models", type=Path, default=MODELS_DIR)
    ap.add_argument("--datasets", nargs="+", default=list(LD.DATASETS))
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
