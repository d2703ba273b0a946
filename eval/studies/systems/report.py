"""The systems comparison as markdown and CSV: per dataset, each system's headline metrics
with bootstrap CIs and Holm-corrected marks against the reference, every pairwise test,
efficiency (ingest time, recall p50/p95, index bytes per memory, peak RSS, tie rate),
trivial-cutoff warnings and per-query failures. Tables use the harness's ``md_table``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from memofs_datasets.protocols import PROTOCOLS

from memofs_eval._env import REPO
from memofs_eval.inputs.data import EvalData
from memofs_eval.provenance.stamp import MODEL_FILES, markdown_line
from memofs_eval.studies.systems.config import ADAPTERS
from memofs_eval.reporting.markdown import md_table
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


# how each headline metric reads a ranking (the caption of every table names the ones it shows)
METRIC_TEXT = {
    "ndcg": "nDCG with the dataset's graded labels (ranx)",
    "mrr": "reciprocal rank of the first relevant memory (ranx)",
    "recall": "share of the relevant memories retrieved (ranx)",
    "recall_any": "LongMemEval recall_any: 1 if any gold item is in the top k",
    "recall_all": "LongMemEval recall_all: 1 if every gold item is in the top k",
    "ndcg_any": "LongMemEval ndcg_any: binary nDCG over the gold items",
    "locomo_recall": "LoCoMo paper R@k: share of a question's evidence dia_ids among the top k (1 without evidence)",
}


def metric_text(metric: str) -> str:
    """``session_recall_any@10`` -> its definition, naming the session level and the cutoff."""
    name, _, k = metric.partition("@")
    session = name.startswith("session_")
    base = METRIC_TEXT.get(name.removeprefix("session_"), name)
    return f"`{metric}`: {base}" + (" over the sessions of the ranked turns" if session else "") + (f", k = {k}" if k else "")


def caption(d: EvalData, headline: Sequence[str]) -> str:
    """The protocol of a dataset's table: corpus, question set, metric definitions."""
    ds, queries = d.dataset, d.queries
    n_scopes = len({q.scope for q in queries})
    proto = PROTOCOLS.get(d.protocol)
    subset = d.subsets()[d.headline_subset]
    return (f"*Protocol:* corpus `{ds.name}` ({len(ds.memories):,} memories in {n_scopes} scopes; each question is asked "
            f"against its own scope, which the system ingested alone); questions: {len(subset)} of the headline subset "
            f"`{d.headline_subset}` under protocol `{d.protocol}`" + (f" ({proto.label})" if proto else "") + "; metrics: "
            + "; ".join(metric_text(m) for m in headline) + ".")


def build(cmp: Comparison, headline: list[str], notes: dict[str, str], command: str, seconds: float,
          title: str = "Memory systems under the harness's measurements", data: Sequence[EvalData] = (),
          specs: Sequence[Path] = ()) -> str:
    inputs = tuple(str(p.resolve().relative_to(REPO)) for p in specs if p.resolve().is_relative_to(REPO))
    lines = [f"# {title}", "", markdown_line(CODE, (*(inputs or ("eval/specs/systems.toml", "eval/specs/default.toml")),
                                                   MODEL_FILES)), "",
             f"Regenerate: `{command}` ({seconds:.0f} s on this machine).", "",
             f"Reference: `{cmp.reference}`. Cells: mean over the headline subset's queries "
             "[percentile bootstrap 95% CI]. Marks: `*` Student's paired t, `+` Fisher randomisation, each "
             "significant against the reference after Holm-Bonferroni over every comparison of this report; "
             "`v` = worse than the reference. A failed query (error, timeout, unknown ids) is scored on what it "
             "returned (nothing: 0) and counted in `failed`. A system marked `(sample)` ran on a seeded sample "
             "of scopes (its `scopes` column): its cells cover those queries, and it is paired on the queries both "
             "sides ran.", ""]
    by_name = {d.name: d for d in data}
    for dataset in dict.fromkeys(cmp.results["dataset"]):
        res = cmp.results[cmp.results.dataset == dataset]
        lines += [f"## {dataset}", ""]
        if dataset in by_name:
            lines += [caption(by_name[dataset], headline), ""]
        table = []
        for system in dict.fromkeys(res["system"]):
            r = res[res.system == system].set_index("metric")
            sampled = "scopes" in r and r["scopes"].iloc[0] != "all"
            row = {"system": system + (" (sample)" if sampled else ""), "scopes": r["scopes"].iloc[0] if "scopes" in r else "all",
                   "queries": int(r["n_queries"].iloc[0]), "failed": int(r["n_failed"].iloc[0])}
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
                  "tie rate: share of top-10 positions whose score equals a neighbour's, empty without scores; "
                  "embed cache hit rate: share of the texts the system embedded that the harness's on-disk "
                  "MiniLM cache already held, over `embed_texts` texts, empty for systems that embed nothing "
                  "through it):", "",
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
    cmp.results.assign(reference=cmp.reference).round(10).to_csv(out / "results.csv", index=False)
    cmp.significance.round(10).to_csv(out / "significance.csv", index=False)
    cmp.efficiency.to_csv(out / "efficiency.csv", index=False)
    cmp.failures.to_csv(out / "failures.csv", index=False)
