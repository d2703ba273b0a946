"""What the notebooks under ``notebooks/`` call: the harness's outputs and a small re-run path.

Nothing here scores, fuses or tests on its own. Reading goes through the files
:func:`memofs_eval.reporting.report.write_report` writes; re-running goes through the harness's
spec expansion (:meth:`Spec.variants`), signal cache (:class:`SignalCache`), recombination
(:func:`memofs_eval.runs.runner.run_all`, i.e. ``memofs.ranking.fusion.fuse``), metrics
(:func:`memofs_eval.scoring.metrics.per_query`) and peer baselines (:mod:`memofs_eval.runs.baselines`).

Parameters come from the environment so ``python -m memofs_eval.reporting.notebooks`` can point
every notebook at another spec, dataset, report or figure folder (the tests do):

=====================  ==========================================  ================================
variable               meaning                                     default
=====================  ==========================================  ================================
``MEMOFS_NB_SPEC``     spec whose pipeline and baselines are used  ``eval/specs/default.toml``
``MEMOFS_NB_DATASET``  dataset name inside that spec               ``agent-memory`` (else the first)
``MEMOFS_NB_REPORT``   report folder of ``memofs-eval run``        ``reports/latest``
``MEMOFS_NB_FIGURES``  where figures are saved                     ``reports/figures``
``MEMOFS_LOCOMO``      LoCoMo release (file or folder)             LoCoMo in ``$MEMOFS_SHARED``
``MEMOFS_NB_SYSTEMS``  systems study report (notebook 06)          ``reports/systems``
=====================  ==========================================  ================================
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import memofs_eval._env  # noqa: F401  (cache and offline variables before ranx/torch)
import matplotlib

# the harness's tqdm.auto would warn in every kernel without ipywidgets; its bars are off here
warnings.filterwarnings("ignore", message="IProgress not found")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from memofs.ranking.config import RecallConfig  # noqa: E402
from memofs.ranking.fusion import fuse  # noqa: E402
from memofs.ranking.recall import explain_row  # noqa: E402
from memofs.signals.frame import SignalFrame  # noqa: E402
from memofs_eval.scoring import attribution as A  # noqa: E402
from memofs_eval.scoring import metrics as M  # noqa: E402
from memofs_eval._env import REPO, cache_root  # noqa: E402
from memofs_eval.runs.baselines import bm25_scores, dense_scores, fused  # noqa: E402
from memofs_eval.inputs.data import EvalData, load  # noqa: E402
from memofs_eval.runs.runner import Ranked, rank_scores, run_all  # noqa: E402
from memofs_eval.runs.signals_cache import SignalCache  # noqa: E402
from memofs_eval.inputs.spec import DatasetRef, Spec, Variant, load_spec  # noqa: E402
from memofs_datasets.shared import locomo_path as shared_locomo_path  # noqa: E402

SPEC_ENV, DATASET_ENV, REPORT_ENV, FIGURES_ENV, LOCOMO_ENV, SYSTEMS_ENV = (
    "MEMOFS_NB_SPEC", "MEMOFS_NB_DATASET", "MEMOFS_NB_REPORT", "MEMOFS_NB_FIGURES", "MEMOFS_LOCOMO", "MEMOFS_NB_SYSTEMS")
DEFAULT_SPEC = REPO / "eval" / "specs" / "default.toml"
DEFAULT_DATASET = "agent-memory"
LOCOMO_SPEC = REPO / "eval" / "specs" / "locomo.toml"
_FIG_NAME = re.compile(r"^nb\d\d_[a-z0-9_.-]+\.png$")


class NotebookInputError(RuntimeError):
    """A missing or defective harness output; the message names the file and what to run."""


# --------------------------------------------------------------------------- parameters


def _env_path(var: str, default: Path) -> Path:
    raw = os.environ.get(var)
    return Path(raw).expanduser().resolve() if raw else default


def spec_path() -> Path:
    return _env_path(SPEC_ENV, DEFAULT_SPEC)


def report_dir() -> Path:
    return _env_path(REPORT_ENV, REPO / "reports" / "latest")


def figures_dir() -> Path:
    return _env_path(FIGURES_ENV, REPO / "reports" / "figures")


def systems_dir() -> Path:
    """The systems study's report folder (its ``locomo/`` and ``longmemeval/`` folders inside)."""
    return _env_path(SYSTEMS_ENV, REPO / "reports" / "systems")


def locomo_path() -> Path | None:
    """``$MEMOFS_LOCOMO``, else LoCoMo in shared data (:mod:`memofs_datasets.shared`), when it exists."""
    raw = os.environ.get(LOCOMO_ENV)
    if not raw:
        return shared_locomo_path()
    p = Path(raw).expanduser().resolve()
    return p if p.exists() else None


# --------------------------------------------------------------------------- report files


@dataclass(frozen=True)
class Report:
    """One ``memofs-eval run`` report folder, read back."""

    path: Path
    results: pd.DataFrame  # method x dataset x subset x category x metric -> score
    cis: pd.DataFrame  # dataset, method, subset, metric, mean, lo, hi (bootstrap 95%)
    significance: pd.DataFrame  # dataset, method, metric, test, p, delta, p_holm, significant
    manifest: dict

    def scores(self, dataset: str, subset: str, metric: str, category: str = "all") -> pd.Series:
        """Mean ``metric`` per method on one dataset/subset/category."""
        r = self.results
        sub = r[(r.dataset == dataset) & (r.subset == subset) & (r.metric == metric) & (r.category == category)]
        return sub.set_index("method")["score"]

    def marks(self, dataset: str, method: str, metric: str) -> str:
        """The report's marks: ``*`` Student's t, ``+`` Fisher (significant after Holm over the
        whole report), ``v`` = worse than default. Same rule as the report tables."""
        s = self.significance
        hit = s[(s.dataset == dataset) & (s.method == method) & (s.metric == metric) & s.significant.astype(bool)]
        if hit.empty:
            return ""
        order = ["student", "fisher"]
        tests = sorted(hit.test.unique(), key=lambda t: order.index(t) if t in order else len(order))
        return "".join({"student": "*", "fisher": "+"}.get(t, "?") for t in tests) + ("v" if float(hit.delta.iloc[0]) < 0 else "")


def load_report(path: Path | None = None) -> Report:
    """Read ``results.parquet``, ``confidence_intervals.csv``, ``significance.csv`` and
    ``manifest.json`` of a report folder (default :func:`report_dir`)."""
    path = Path(path) if path is not None else report_dir()
    need = ("results.parquet", "confidence_intervals.csv", "significance.csv", "manifest.json")
    missing = [n for n in need if not (path / n).is_file()]
    if missing:
        raise NotebookInputError(f"{path}: missing {', '.join(missing)}; run `make eval` (or "
                                 f"`memofs-eval run SPEC --out DIR`, then set {REPORT_ENV}=DIR/latest)")
    res = pd.read_parquet(path / "results.parquet")
    cols = {"dataset", "method", "group", "axis", "value", "subset", "category", "metric", "score", "n_queries"}
    if not cols <= set(res.columns):
        raise NotebookInputError(f"{path / 'results.parquet'}: columns {sorted(cols - set(res.columns))} missing")
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    return Report(path, res, pd.read_csv(path / "confidence_intervals.csv"), pd.read_csv(path / "significance.csv"), manifest)


# --------------------------------------------------------------------------- spec and data


def spec(path: Path | None = None, **changes) -> Spec:
    """The spec (default :func:`spec_path`), optionally with fields replaced, e.g.
    ``spec(sweeps={"w_vec": (0.0, 0.5)}, toggles=(), grids=())``. Variants of the result
    come from the harness's own expansion (:meth:`Spec.variants`)."""
    s = load_spec(path or spec_path())
    return dataclasses.replace(s, **changes) if changes else s


def only_axes(s: Spec, *, toggles: Sequence[str] = (), sweeps: Mapping[str, Sequence] | None = None,
              grids: Sequence[Mapping[str, Sequence]] = (), embedders: Sequence[str] = ()) -> Spec:
    """``s`` reduced to the given ablation axes (nothing else is expanded)."""
    return dataclasses.replace(s, toggles=tuple(toggles), sweeps={k: tuple(v) for k, v in (sweeps or {}).items()},
                               grids=tuple({k: tuple(v) for k, v in g.items()} for g in grids), embedders=tuple(embedders))


def dataset(s: Spec, name: str | None = None) -> EvalData:
    """A dataset of the spec by name (``$MEMOFS_NB_DATASET``, else agent-memory, else the first)."""
    name = name or os.environ.get(DATASET_ENV)
    refs = {r.name: r for r in s.datasets}
    if name is None:
        name = DEFAULT_DATASET if DEFAULT_DATASET in refs else s.datasets[0].name
    if name not in refs:
        raise NotebookInputError(f"{s.path}: no dataset {name!r} in the spec (has {', '.join(refs)})")
    return EvalData(refs[name], load(refs[name]))


def locomo_dataset(path: Path, s: Spec) -> EvalData:
    """LoCoMo at ``path`` with the loader options of ``s``'s LoCoMo entry."""
    ref = next((r for r in s.datasets if r.loader == "locomo"), None)
    opts = dict(ref.options) if ref is not None else {"unit": "turn"}
    r = DatasetRef(ref.name if ref is not None else "locomo", path, "locomo", opts)
    return EvalData(r, load(r))


def tune_subset(data: EvalData) -> tuple[str, list[str]]:
    """Queries a tuning view may look at: the tune split when the dataset fixes one, else all."""
    subsets = data.subsets()
    name = "tune" if "tune" in subsets else "all"
    return name, subsets[name]


def headline_subset(data: EvalData) -> tuple[str, list[str]]:
    return data.headline_subset, data.subsets()[data.headline_subset]


# --------------------------------------------------------------------------- re-running


def _cache() -> SignalCache:
    return SignalCache(cache_root(), progress=False)


def frames(data: EvalData, cfg: RecallConfig, embedder: str, cache: SignalCache | None = None) -> dict[str, SignalFrame]:
    """Every query's signal frame for ``cfg``'s signal settings (from the harness's cache)."""
    return (cache or _cache()).frames(data, cfg, embedder).frames


def _jobs(variants: Iterable[Variant], k: int | None) -> dict[tuple, list[tuple[str, RecallConfig, list[str]]]]:
    """Jobs per signal group: one per distinct config (a sweep value equal to a grid point
    is computed once) with every variant name that shares it. ``k`` overrides the depth."""
    groups: dict[tuple, dict[str, tuple[str, RecallConfig, list[str]]]] = defaultdict(dict)
    for v in variants:
        cfg = v.config if k is None else v.config.replace(top_k=k)
        jobs = groups[v.signal_group]
        h = cfg.config_hash()
        if h in jobs:
            jobs[h][2].append(v.name)
        else:
            jobs[h] = (v.name, cfg, [v.name])
    return {g: list(j.values()) for g, j in groups.items()}


def _run(data: EvalData, variants: Iterable[Variant], qids: Sequence[str], k: int | None, workers: int, post=None):
    cache = _cache()
    ranked_out: dict[str, Ranked] = {}
    post_out: dict[str, object] = {}
    for gkey, jobs in _jobs(variants, k).items():
        fs = frames(data, jobs[0][1], _embedder_of(gkey), cache)
        ranked, extra = run_all([(name, gkey, cfg) for name, cfg, _ in jobs], {gkey: {q: fs[q] for q in qids}},
                                workers=workers, post=post)
        for name, _, names in jobs:
            for n in names:
                ranked_out[n], post_out[n] = ranked[name], extra[name]
    return ranked_out, post_out


def _embedder_of(signal_group: tuple) -> str:
    return signal_group[1]  # Variant.signal_group = (config.signal_key(), embedder)


def evaluate_variants(data: EvalData, variants: Iterable[Variant], qids: Sequence[str] | None = None,
                      metrics: Sequence[str] = ("ndcg@10", "mrr@10"), k: int | None = None, workers: int = 2) -> dict[str, pd.DataFrame]:
    """Per-query metrics (query x metric) for each variant on ``qids`` (default: all judged
    queries), computed as ``memofs-eval run`` does: cached frames, ``run_all`` over ``fuse``,
    ranx metrics in the worker. ``k`` overrides the run depth (default: the variant's)."""
    qids = list(qids) if qids is not None else [q.id for q in data.queries]
    judged = {q: data.qrels[q] for q in qids}
    metrics = list(metrics)

    def post(ranked: Ranked) -> pd.DataFrame:
        return M.per_query(judged, ranked, metrics)

    post({})  # compile ranx's kernels before the pool forks (as the harness does)
    return _run(data, variants, qids, k, workers, post)[1]


def ranked_runs(data: EvalData, variants: Iterable[Variant], qids: Sequence[str] | None = None, k: int | None = None,
                workers: int = 2) -> dict[str, Ranked]:
    """Ranked ids per query for each variant (``run_all`` over ``fuse``); ``k`` overrides the depth."""
    qids = list(qids) if qids is not None else [q.id for q in data.queries]
    return _run(data, variants, qids, k, workers)[0]


def sweep_table(per_query: Mapping[str, pd.DataFrame], variants: Iterable[Variant]) -> pd.DataFrame:
    """Long table: method, group, axis, value, metric, mean over the queries evaluated."""
    rows = []
    for v in variants:
        if v.name not in per_query:
            continue
        for metric, mean in per_query[v.name].mean(axis=0).items():
            rows.append({"method": v.name, "group": v.group, "axis": v.axis, "value": v.value, "metric": metric, "score": float(mean)})
    return pd.DataFrame(rows)


@dataclass
class _QuerySubset(EvalData):
    """``data`` with only the queries in ``keep`` (same corpus, qrels and splits)."""

    keep: frozenset = frozenset()

    @cached_property
    def queries(self):
        return tuple(q for q in super().queries if q.id in self.keep)


@dataclass
class PeerScores:
    """bm25s and dense scores of the harness's peer baselines, computed once per query set."""

    data: EvalData
    qids: list[str]
    k: int
    bm25: dict[str, dict[str, float]]
    dense: dict[str, dict[str, float]]

    def run(self, method: str, params: dict | None = None) -> Ranked:
        """``bm25s`` | ``dense`` | ranx fusion ``rrf`` | ``combsum`` | ``combmnz`` | ``wsum``."""
        if method == "bm25s":
            return {q: rank_scores(self.bm25.get(q, {}), self.k) for q in self.qids}
        if method == "dense":
            return {q: rank_scores(self.dense.get(q, {}), self.k) for q in self.qids}
        return fused(method, self.bm25, self.dense, self.qids, self.k, params)

    def wsum(self, dense_weight: float) -> Ranked:
        """Weighted sum of min-max normalised runs: (1 - w) * bm25 + w * dense."""
        return self.run("wsum", {"weights": (1.0 - dense_weight, dense_weight)})

    def evaluate(self, ranked: Ranked, metrics: Sequence[str] = ("ndcg@10", "mrr@10")) -> pd.DataFrame:
        return M.per_query({q: self.data.qrels[q] for q in self.qids}, ranked, list(metrics))


def peer_scores(data: EvalData, s: Spec, qids: Sequence[str] | None = None, k: int | None = None) -> PeerScores:
    """The harness's baseline inputs (bm25s Lucene with the pipeline's k1/b, the spec's
    embedder's cosine) on the spec's query text choice, restricted to ``qids``, at depth
    ``k`` (default the spec's: the fusions then see what ``baseline:*`` saw)."""
    k = s.k if k is None else k
    qids = list(qids) if qids is not None else [q.id for q in data.queries]
    # the baseline functions iterate data.queries: a view holding only the wanted ones
    sub = _QuerySubset(data.ref, data.dataset, frozenset(qids))
    cfg = s.default_config()
    if s.baseline_query == "raw":
        texts = {q.id: q.text for q in sub.queries}
    else:
        fr = frames(data, cfg, s.embedder)
        texts = {q: fr[q].query_text for q in qids}
    bm25 = bm25_scores(sub, texts, k, cfg.k1, cfg.b)
    dense = dense_scores(sub, texts, k, s.embedder, cache_root())
    return PeerScores(data, qids, k, bm25, dense)


def paired_deltas(control: pd.DataFrame, treatment: pd.DataFrame, metric: str, groups: Mapping[str, str],
                  seed: int = 42, n_boot: int = 1000, n_perm: int = 1000) -> pd.DataFrame:
    """Per group of queries (``groups``: query -> label, plus ``all``): n, mean of
    d = treatment - control, its percentile-bootstrap 95% CI (:func:`stats.bootstrap_ci` on
    d) and the two-sided Fisher randomisation p (:func:`stats.fisher_randomisation`)."""
    from memofs_eval.scoring import stats as S

    d = (treatment[metric] - control[metric]).dropna()
    labels = {"all": list(d.index)}
    for q in d.index:
        labels.setdefault(groups[q], []).append(q)
    rows = []
    for g in ["all"] + sorted(k for k in labels if k != "all"):
        x = d.loc[labels[g]].to_numpy()
        lo, hi = S.bootstrap_ci(x, n_boot, seed)
        p = S.fisher_randomisation(control.loc[labels[g], metric].to_numpy(), treatment.loc[labels[g], metric].to_numpy(), n_perm, seed)
        rows.append({"group": g, "n": len(x), "delta": float(x.mean()), "lo": lo, "hi": hi, "p": p})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- explain


def explain(frame: SignalFrame, cfg: RecallConfig, k: int = 10) -> pd.DataFrame:
    """The top ``k`` of one query with ``recall(explain=True)``'s breakdown flattened
    (:func:`memofs.ranking.recall.explain_row` over :func:`memofs.ranking.fusion.fuse`), plus the additive
    parts of the composite score:

    part_vec, part_lex (bm25 + fuzzy), part_rerank, part_recency, part_confidence: the terms of
    :func:`memofs_eval.scoring.attribution.attribute`; final = their sum * penalty_factor."""
    f = fuse(frame, cfg, k)
    t = A.attribute(f, cfg)
    parts = {
        "part_vec": t["vector"], "part_lex": t["bm25"] + t["fuzzy"], "part_rerank": t["rerank"],
        "part_recency": t["recency"], "part_confidence": t["confidence"],
    }
    rows = []
    for pos in range(len(f.rows)):
        e = explain_row(frame, f, pos)
        rows.append({
            "rank": pos + 1, "id": frame.ids[int(f.rows[pos])], "final": e["components"]["final"],
            **{n: float(v[pos]) for n, v in parts.items()},
            "penalty_factor": e["components"]["penalty_factor"], "penalties": ",".join(x["name"] for x in e["penalties"]),
            **{f"sig_{n}": v for n, v in e["signals"].items()},
            "in_vector_pool": e["pools"]["vector"], "in_lexical_pool": e["pools"]["lexical"], "weights_reason": e["weights"]["dynamic"],
        })
    return pd.DataFrame(rows)


def rank_of(ranked: Sequence[str], doc: str) -> int | None:
    """1-based rank of ``doc`` in a ranked list, None when absent."""
    try:
        return list(ranked).index(doc) + 1
    except ValueError:
        return None


# --------------------------------------------------------------------------- figures


def save_figure(fig, name: str, tight: bool = True) -> Path:
    """Save ``fig`` as ``<figures_dir>/<name>`` (``nbNN_<what>.png``) without a date stamp,
    so re-running a notebook on the same data gives the same bytes; closes the figure.
    ``tight=False`` keeps a layout the caller already fixed (e.g. room for a figure legend)."""
    if not _FIG_NAME.match(name):
        raise ValueError(f"figure name {name!r}: expected nbNN_<lowercase words>.png")
    out = figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    if tight:
        fig.tight_layout()
    path = out / name
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def show(path: Path):
    """Display a saved figure inline (works under any matplotlib backend)."""
    from IPython.display import Image

    return Image(filename=str(path))


def mark_default(ax, x: float, label: str = "default") -> None:
    """A dashed vertical line where the spec's default sits."""
    ax.axvline(x, color="#555", ls="--", lw=0.9)
    ax.annotate(label, (x, 0.0), xycoords=("data", "axes fraction"), xytext=(3, 4), textcoords="offset points", fontsize=8, color="#555")


def describe_run(data: EvalData, subset: str, qids: Sequence[str]) -> str:
    return f"dataset `{data.name}`, subset `{subset}` ({len(qids)} queries of {len(data.queries)} judged)"


