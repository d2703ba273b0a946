"""Regenerate the README's evaluation tables from the committed reports.

    python -m memofs_eval.reporting.readme_tables [--readme README.md]

Reads ``reports/latest/results.csv`` (make eval), ``reports/locomo/latest/results.csv``
(make eval-locomo, when present), ``reports/learned/lodo/summary.json``
(``memofs-eval tune --learned``) and ``reports/bench-lexical.md``, and rewrites the blocks
between ``<!-- headline-eval:start/end -->``, ``<!-- learned-lodo:start/end -->`` and
``<!-- bench-lexical:start/end -->``, the recommended profile held out
(``reports/learned/recommended/summary.json``) into ``<!-- learned-recommended:start/end -->``, the protocol table into ``<!-- field-protocols:start/end -->``
(``reports/longmemeval`` and ``reports/locomo``), the memory systems under test into
``<!-- systems:start/end -->`` (``reports/systems``, its ``locomo`` and ``longmemeval`` folders),
and the sweep timings from each run's ``manifest.json`` into ``<!-- sweep-speed:start/end -->``.
No number in those tables is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from memofs_eval._env import REPO
from memofs_eval.reporting.markdown import table
from memofs_eval.reporting.readme_blocks import between

ROWS = (
    ("default", "reference pipeline (spec defaults)"),
    ("only:vector", "vector signal alone (MiniLM)"),
    ("only:bm25", "BM25 signal alone"),
    ("-decay", "reference without kind decay"),
    ("-recency", "reference without recency"),
    ("tuned", "reference weights tuned (CV / tune split)"),
    ("baseline:bm25s@raw", "bm25s (raw query)"),
    ("baseline:rrf@raw", "ranx RRF (raw query)"),
    ("baseline:combsum@raw", "ranx CombSUM (min-max, raw query)"),
    ("baseline:wsum:tuned@raw", "ranx weighted sum, tuned (raw query)"),
)


def _scores(path: Path) -> dict[tuple[str, str], float]:
    """(dataset, method) -> nDCG@10 on the headline subset (held-out where a split exists)."""
    if not path.is_file():
        return {}
    df = pd.read_csv(path)
    df = df[(df.metric == "ndcg@10") & (df.category == "all")]
    out = {}
    for (ds, method), g in df.groupby(["dataset", "method"]):
        sub = g[g.subset == "heldout"] if (g.subset == "heldout").any() else g[g.subset == "all"]
        if len(sub):
            out[(ds, method)] = float(sub.score.iloc[0])
    return out


def _protocols(*paths: Path) -> dict[str, str]:
    """dataset -> the protocol its rows were scored under (``memofs`` for reports older than the column)."""
    out: dict[str, str] = {}
    for path in paths:
        if path.is_file():
            df = pd.read_csv(path)
            for ds in df.dataset.unique():
                sub = df[df.dataset == ds]
                out[ds] = str(sub.protocol.iloc[0]) if "protocol" in sub else "memofs"
    return out


def headline_table(repo: Path = REPO) -> str:
    paths = (repo / "reports" / "latest" / "results.csv", repo / "reports" / "locomo" / "latest" / "results.csv")
    scores = {k: v for p in paths for k, v in _scores(p).items()}
    protocol = _protocols(*paths)
    datasets = [d for d in ("agent-memory", "tiny", "locomo") if any(k[0] == d for k in scores)]
    head = {d: f"{label}; protocol `{protocol.get(d, 'memofs')}`" for d, label in
            (("agent-memory", "agent-memory (held-out"), ("tiny", "tiny (held-out"), ("locomo", "LoCoMo (all"))}
    head = {d: h + ")" for d, h in head.items()}
    rows = [[label, *(f"{scores[(d, method)]:.3f}" if (d, method) in scores else "" for d in datasets)] for method, label in ROWS]
    summary = repo / "reports" / "learned" / "lodo" / "summary.json"
    if summary.is_file():
        # the study's in-distribution figure: grouped CV with the selection nested in it
        lodo = json.loads(summary.read_text(encoding="utf-8"))["lodo"]
        learned = {d: r["grouped_nested"] for d, r in lodo.items() if r.get("grouped_nested") is not None}
        rows.append(["learned fusion (grouped CV, nested selection: leave one project / conversation out)",
                     *(f"{learned[d]:.3f}" if d in learned else "" for d in datasets)])
    return table(["method", *(head[d] for d in datasets)], rows, "l" + "r" * len(datasets))


@dataclass(frozen=True)
class Column:
    """A README column: one report's figure for a dataset entry and metric, its header naming the protocol."""

    table: str  # the README block it belongs to
    report: str  # the folder under reports/ whose results.csv holds the figure
    dataset: str
    metric: str
    header: str


COLUMNS = tuple(Column(*c) for c in (
    ("field-protocols", "longmemeval/latest", "longmemeval-session-official", "recall_any@1", "LME session run R_any@1, official 470"),
    ("field-protocols", "longmemeval/latest", "longmemeval-session-official", "recall_any@5", "LME session run R_any@5, official 470"),
    ("field-protocols", "longmemeval/latest", "longmemeval-session-official", "ndcg_any@5", "LME session run nDCG_any@5, official 470"),
    ("field-protocols", "longmemeval/latest", "longmemeval-turn-official", "session_recall_any@5", "LME turn run session R_any@5, official 470"),
    ("field-protocols", "longmemeval/latest", "longmemeval-session-official-419", "recall_any@5", "LME session run R_any@5, official 419"),
    ("field-protocols", "longmemeval/latest", "longmemeval-turn-lenient", "session_recall_any@10",
     "LME sessions of top 10 turns, lenient (all questions)"),
    ("field-protocols", "longmemeval/latest", "longmemeval-session", "session_recall_any@5", "LME session R_any@5, memofs (ours)"),
    ("field-protocols", "locomo/latest", "locomo-paper", "locomo_recall@10", "LoCoMo R@10, locomo-paper (all categories)"),
    ("field-protocols", "locomo/latest", "locomo-paper-no-adv", "locomo_recall@10", "LoCoMo R@10, locomo-paper without category 5"),
    ("systems", "systems", "agent-memory", "ndcg@10", "agent-memory nDCG@10 (held-out, memofs)"),
    ("systems", "systems/locomo", "locomo", "ndcg@10", "LoCoMo nDCG@10 (memofs)"),
    ("systems", "systems/locomo", "locomo-paper", "locomo_recall@10", "LoCoMo R@10 (locomo-paper, all categories)"),
    ("systems", "systems/longmemeval", "longmemeval-turn", "ndcg@10", "LME dev turns nDCG@10 (memofs)"),
    ("systems", "systems/longmemeval", "longmemeval-turn-official", "recall_any@10", "LME dev turns R_any@10 (official)"),
    ("systems", "systems/longmemeval", "longmemeval-session-official", "recall_any@5", "LME dev sessions R_any@5 (official)"),
))


def _results(repo: Path, table: str) -> dict[str, pd.DataFrame]:
    """report folder -> its ``results.csv``, for the folders of ``table``'s columns where one exists."""
    folders = dict.fromkeys(c.report for c in COLUMNS if c.table == table)
    return {f: pd.read_csv(repo / "reports" / f / "results.csv") for f in folders if (repo / "reports" / f / "results.csv").is_file()}


def _present(table: str, frames: dict[str, pd.DataFrame]) -> list[Column]:
    """``table``'s columns whose report holds rows for their dataset and metric."""
    return [c for c in COLUMNS if c.table == table and c.report in frames
            and ((frames[c.report].dataset == c.dataset) & (frames[c.report].metric == c.metric)).any()]


def _row(df: pd.DataFrame, c: Column, who: str, name: str) -> pd.Series | None:
    """``df``'s row for column ``c`` and the method or system ``name`` (in field ``who``), None where absent."""
    hit = df[(df.dataset == c.dataset) & (df[who] == name) & (df.metric == c.metric)]
    return hit.iloc[0] if len(hit) else None


PROTOCOL_ROWS = (("default", "reference pipeline"), ("profile:robust", "`robust` profile"),
                 ("baseline:rank_bm25@raw", "rank_bm25 BM25Okapi (the field's BM25)"), ("baseline:bm25s@raw", "bm25s"),
                 ("baseline:dense@raw", "dense (MiniLM)"), ("baseline:rrf@raw", "ranx RRF"),
                 ("baseline:wsum:tuned@raw", "ranx weighted sum, tuned"))
def protocols_table(repo: Path = REPO) -> str:
    """The reference pipeline, the robust profile and the peers under the field's published
    protocols (``memofs_datasets.protocols``), from ``make eval-longmemeval`` / ``make eval-locomo``."""
    frames = {f: df[(df.category == "all") & (df.subset == "all")] for f, df in _results(repo, "field-protocols").items()}
    cols = _present("field-protocols", frames)
    if not cols:
        return "(run make eval-longmemeval and make eval-locomo with the protocol entries of their specs)"
    rows = []
    for method, label in PROTOCOL_ROWS:
        hits = [_row(frames[c.report], c, "method", method) for c in cols]
        rows.append([label, *("" if h is None else f"{h.score:.3f}" for h in hits)])
    return table(["method", *(c.header for c in cols)], rows, "l" + "r" * len(cols)) + "\n\n*From `reports/longmemeval/latest/results.csv` and `reports/locomo/latest/results.csv`; each column names its protocol.*"


def sample_note(scopes: object) -> str:
    """`` (n/N)`` for a system run on a seeded sample of scopes (``"2 of 10 scopes (seed 42)"``), else ``""``."""
    s = str(scopes)
    return "" if s in ("all", "nan") else f" ({s.split(' scopes')[0].replace(' of ', '/')})"


def systems_table(repo: Path = REPO) -> str:
    """Each system under test (``python -m memofs_eval.studies.systems``) on every dataset whose systems
    report exists: the mean with its bootstrap CI, ``*`` where Student's paired t against the
    reference is significant after Holm, ``(n/N)`` where the system ran on a seeded sample of
    scopes; then its ingest time and recall p50 on agent-memory."""
    eff = None
    frames = _results(repo, "systems")
    tests_at = {f: repo / "reports" / f / "significance.csv" for f in frames}
    sig = {f: pd.read_csv(p) if p.is_file() else None for f, p in tests_at.items()}
    cols = _present("systems", frames)
    if not cols:
        return "(run `python -m memofs_eval.studies.systems eval/specs/systems.toml` and its -locomo / -longmemeval specs)"
    if (repo / "reports" / "systems" / "efficiency.csv").is_file():
        eff = pd.read_csv(repo / "reports" / "systems" / "efficiency.csv")
        eff = eff[eff.dataset == "agent-memory"].set_index("system")
    systems = list(dict.fromkeys(x for f in frames.values() for x in f.system))
    rows = []
    for system in systems:
        cells = []
        for c in cols:
            df = frames[c.report]
            r = _row(df, c, "system", system)
            if r is None:
                cells.append("")
                continue
            mark, tests = "", sig[c.report]
            if tests is not None and len(tests):
                ref = df.reference.iloc[0] if "reference" in df else tests.a.iloc[0]  # compare() pairs the reference first
                t = tests[(tests.dataset == c.dataset) & (tests.a == ref) & (tests.b == system)
                          & (tests.metric == c.metric) & (tests.test == "student")]
                mark = ("*v" if t.delta.iloc[0] < 0 else "*") if len(t) and bool(t.significant.iloc[0]) else ""
            cells.append(f"{r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]{mark}{sample_note(r.get('scopes', 'all'))}")
        cost = ""
        if eff is not None and system in eff.index:
            e = eff.loc[system]
            cost = f"{e['ingest_s']:.2f} / {e['recall_p50_ms']:.1f}" if pd.notna(e["recall_p50_ms"]) else ""
        rows.append([system, *cells, cost])
    return table(["system", *(c.header for c in cols), "ingest s / recall p50 ms (agent-memory)"], rows, "l" + "r" * (len(cols) + 1)) + ("\n\n*From `reports/systems/{,locomo/,longmemeval/}results.csv`: mean [95% bootstrap CI]; "
                               "`*` Student's paired t against the report's reference (the first row) significant after Holm over the report (`v`: worse); "
                               "`(n/N)` ran on a seeded sample of n of the N scopes (conversations, haystacks) and is "
                               "scored on their questions. Each column names its dataset and protocol; the reports' "
                               "captions define them.*")


def lodo_table(repo: Path = REPO) -> str:
    """The ``robust`` profile's held-out figures beside the reference's, from
    ``reports/learned/lodo/summary.json`` (``python -m memofs_eval.studies.learned_transfer``)."""
    summary = repo / "reports" / "learned" / "lodo" / "summary.json"
    if not summary.is_file():
        return "(run `python -m memofs_eval.studies.learned_transfer`)"
    doc = json.loads(summary.read_text(encoding="utf-8"))
    lodo, robust = doc["lodo"], doc["robust"]
    rows = []
    for d, r in lodo.items():
        best = max(r["peers"].values()) if r["peers"] else float("nan")
        nested = "" if r["learned"] is None else f"{r['learned']:.3f}"
        prof = f"{robust['lodo'][d]:.3f}" if d in robust.get("lodo", {}) else ""
        within = "" if r.get("grouped_nested") is None else f"{r['grouped_nested']:.3f}"
        rows.append((f"{d} ({doc['embedders'][d]})", f"{r['reference']:.3f}", f"{best:.3f}", nested, prof, within))
    absent = doc.get("absent") or []
    note = f" Absent when generated: {', '.join(absent)}." if absent else ""
    header = ("held-out dataset (nDCG@10)", "reference (default profile)", "best peer", "learned, nested LODO",
              "`robust` profile's candidate, LODO", "learned in-distribution (grouped CV, nested)")
    return table(header, rows, "lrrrrr") + f"\n\n*`robust` = {robust['candidate']}; from `reports/learned/lodo/summary.json`.{note}*"


def recommended_table(repo: Path = REPO) -> str:
    """The ``recommended`` profile held out beside the ``robust`` candidate under the same
    protocol, and the pre-registered decision, from ``reports/learned/recommended/summary.json``
    (``python -m memofs_eval.studies.recommended``)."""
    summary = repo / "reports" / "learned" / "recommended" / "summary.json"
    if not summary.is_file():
        return "(run `python -m memofs_eval.studies.recommended`)"
    doc = json.loads(summary.read_text(encoding="utf-8"))
    rows = [(f"{d} ({doc['embedders'][d]})", h["recommended pick"], f"{h['recommended']:.3f}", f"{h['robust candidate']:.3f}",
             f"{h['difference']:+.3f}", f"{h['p (Holm)']:.3g}") for d, h in doc["heldout"].items()]
    v = doc["decision"]
    said = "replaces `robust` in this advice" if v["replaces_robust"] else "does not replace `robust`; it is reported beside it"
    header = ("held-out dataset (nDCG@10)", "recommended: the rule's pick without this dataset", "recommended",
              "`robust` candidate", "difference", "p (paired t, Holm)")
    absent = doc.get("absent") or []
    note = f" Absent when generated: {', '.join(absent)}." if absent else ""
    return (table(header, rows, "llrrrr") + f"\n\n*Decision (the rule fixed before these figures): `recommended` {said} "
            f"(higher on {len(v['higher_on'])} of {len(doc['heldout'])}; significantly below on "
            f"{', '.join(v['significantly_below_on']) or 'none'}). Shipped: {doc['shipped']}, trained on every dataset; "
            f"`robust` = {doc['robust']}. From `reports/learned/recommended/summary.json`.{note}*")


def sweep_line(repo: Path = REPO) -> str:
    """The recombination sweep's wall time, read from each run's ``manifest.json``."""
    lines = []
    for label, path in (("bundled datasets (make eval)", repo / "reports" / "latest" / "manifest.json"),
                        ("LoCoMo (make eval-locomo)", repo / "reports" / "locomo" / "latest" / "manifest.json")):
        if not path.is_file():
            continue
        m = json.loads(path.read_text(encoding="utf-8"))
        workers = tomllib.loads(m["spec"]["text"]).get("workers", 2)  # the spec's default
        for name, d in m["datasets"].items():
            t = d.get("timings", {})
            if "recombine_and_metrics_s" not in t:
                continue
            n, secs = t["n_distinct_configs"], t["recombine_and_metrics_s"]
            lines.append(f"- {label}, {name} ({d.get('queries_evaluated', '?')} queries): {n} distinct configs recombined from "
                         f"cached signals and scored with ranx in {secs:.1f} s on {workers} workers "
                         f"({n / secs:.1f} configs/s; signals extracted or read from cache in {t.get('signals_s', 0):.1f} s).")
    if not lines:
        return "(run make eval to record the sweep timings)"
    return "\n".join(lines) + "\n\n*From the `timings` of each run's `manifest.json`; machine load varies between runs.*"


def bench_file_table(path: Path) -> str:
    """A micro-benchmark's table as its script wrote it (``make bench-lexical`` / ``bench-vector``)."""
    if not path.is_file():
        return f"(run the benchmark to create `{path.name}`)"
    body = path.read_text(encoding="utf-8").split("\n", 1)[1].strip()  # drop the "# ..." title
    return body + f"\n\n*From `reports/{path.name}`.*"


def fill(text: str, start: str, end: str, body: str, where: str) -> str:
    span = between(text, start, end, where)
    assert span is not None
    a, b = span
    return text[:a] + "\n" + body + "\n" + text[b:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    a = ap.parse_args(argv)
    a.readme.write_text(render(a.readme.read_text(encoding="utf-8"), str(a.readme)), encoding="utf-8")
    return 0


def render(text: str, where: str = "README.md", repo: Path = REPO) -> str:
    """``text`` with every generated block filled from the reports under ``repo``."""
    text = fill(text, "<!-- headline-eval:start -->", "<!-- headline-eval:end -->", headline_table(repo), where)
    text = fill(text, "<!-- sweep-speed:start -->", "<!-- sweep-speed:end -->", sweep_line(repo), where)
    if "<!-- field-protocols:start -->" in text:
        text = fill(text, "<!-- field-protocols:start -->", "<!-- field-protocols:end -->", protocols_table(repo), where)
    if "<!-- systems:start -->" in text:
        text = fill(text, "<!-- systems:start -->", "<!-- systems:end -->", systems_table(repo), where)
    if "<!-- learned-lodo:start -->" in text:
        text = fill(text, "<!-- learned-lodo:start -->", "<!-- learned-lodo:end -->", lodo_table(repo), where)
    if "<!-- learned-recommended:start -->" in text:
        text = fill(text, "<!-- learned-recommended:start -->", "<!-- learned-recommended:end -->", recommended_table(repo), where)
    return fill(text, "<!-- bench-lexical:start -->", "<!-- bench-lexical:end -->", bench_file_table(repo / "reports" / "bench-lexical.md"), where)


if __name__ == "__main__":
    raise SystemExit(main())
