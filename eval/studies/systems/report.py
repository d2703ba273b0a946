"""The systems comparison as markdown and CSV: per dataset, each system's headline metrics
with bootstrap CIs and Holm-corrected marks against the reference, every pairwise test,
efficiency (ingest time, recall p50/p95, index bytes per memory, peak RSS, tie rate),
trivial-cutoff warnings and per-query failures. Tables use the harness's ``md_table``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memofs_eval.provenance.stamp import MODEL_FILES, markdown_line
from memofs_eval.studies.systems.config import ADAPTERS
from memofs_eval.reporting.report import md_table
from memofs_eval.studies.systems.compare import Comparison

# what computes the figures: the entry point and every adapter (they are imported by name,
# in the systems' own processes, so no import statement leads to them)
CODE: tuple[str, ...] = ("memofs_eval.studies.systems.__main__", *sorted({a.partition(":")[0] for a in ADAPTERS.values()}))


def _cell(row: pd.Series, mark: str) -> str:
    return f"{row['mean']:.4f} [{row['lo']:.4f}, {row['hi']:.4f}]{mark}"


def _marks(cmp: Comparison, dataset: str, system: str, metric: str) -> str:
    sig = cmp.significance
    rows = sig[(sig.dataset == dataset) & (sig.a == cmp.reference) & (sig.b == system) & (sig.metric == metric)]
    out = "".join({"student": "*", "fisher": "+"}.get(r.test, "?") for r in rows.itertuples() if r.significant)
    return f" {out}{'v' if out and rows['delta'].iloc[0] < 0 else ''}" if out else ""


def build(cmp: Comparison, headline: list[str], notes: dict[str, str], command: str, seconds: float,
          title: str = "Memory systems under the harness's measurements") -> str:
    lines = [f"# {title}", "", markdown_line(CODE, ("eval/specs/systems.toml", "eval/specs/default.toml", MODEL_FILES)), "",
             f"Regenerate: `{command}` ({seconds:.0f} s on this machine).", "",
             f"Reference: `{cmp.reference}`. Cells: mean over the headline subset's queries "
             "[percentile bootstrap 95% CI]. Marks: `*` Student's paired t, `+` Fisher randomisation, each "
             "significant against the reference after Holm-Bonferroni over every comparison of this report; "
             "`v` = worse than the reference. A failed query (error, timeout, unknown ids) is scored on what it "
             "returned (nothing: 0) and counted in `failed`.", ""]
    for dataset in dict.fromkeys(cmp.results["dataset"]):
        res = cmp.results[cmp.results.dataset == dataset]
        lines += [f"## {dataset}", ""]
        table = []
        for system in dict.fromkeys(res["system"]):
            r = res[res.system == system].set_index("metric")
            row = {"system": system, "queries": int(r["n_queries"].iloc[0]), "failed": int(r["n_failed"].iloc[0])}
            row.update({m: _cell(r.loc[m], _marks(cmp, dataset, system, m)) for m in headline})
            table.append(row)
        lines += [md_table(pd.DataFrame(table)), ""]
        triv = cmp.trivial[(cmp.trivial.dataset == dataset) & (cmp.trivial.n_trivial > 0)]
        for t in triv.itertuples():
            lines.append(f"- **Trivial cutoff:** `{t.metric}` is 1 for any ranking on {t.n_trivial} of {t.n_queries} "
                         "queries (their scope holds at most that many candidates).")
        eff = cmp.efficiency[cmp.efficiency.dataset == dataset].drop(columns=["dataset"])
        lines += ["", "**Efficiency** (ingest: total seconds over the scopes; recall: per call; index: bytes on disk "
                  "per memory ingested, empty for in-memory systems; peak RSS of the system's own process; "
                  "tie rate: share of top-10 positions whose score equals a neighbour's, empty without scores):", "",
                  md_table(eff, "{:.3f}"), ""]
        sig = cmp.significance[cmp.significance.dataset == dataset]
        if len(sig):
            wide = sig.pivot_table(index=["a", "b", "metric"], columns="test", values=["p_holm"], aggfunc="first")
            wide.columns = [f"p_holm ({t})" for _, t in wide.columns]
            delta = sig.groupby(["a", "b", "metric"], sort=False)["delta"].first()
            pairs = wide.join(delta).reset_index()[["a", "b", "metric", "delta", *wide.columns]]
            lines += ["**Paired tests** (delta = b - a on the headline subset; Holm-adjusted p):", "",
                      md_table(pairs), ""]
        fails = cmp.failures[cmp.failures.dataset == dataset]
        if len(fails):
            lines += ["**Failures** (first per system):", ""]
            for system, grp in fails.groupby("system", sort=False):
                lines.append(f"- `{system}`: {len(grp)} queries; e.g. `{grp['query'].iloc[0]}`: {grp['reason'].iloc[0]}")
            lines.append("")
    if notes:
        lines += ["## Systems", ""] + [f"- `{name}`: {text}" for name, text in notes.items()] + [""]
    return "\n".join(lines)


def write(cmp: Comparison, out: Path, markdown: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(markdown, encoding="utf-8")
    cmp.results.round(10).to_csv(out / "results.csv", index=False)
    cmp.significance.round(10).to_csv(out / "significance.csv", index=False)
    cmp.efficiency.to_csv(out / "efficiency.csv", index=False)
    cmp.failures.to_csv(out / "failures.csv", index=False)
