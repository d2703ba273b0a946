"""TOML experiment specs: what to run (datasets, configs, baselines) and how to judge it.

A spec expands into *variants*: the default pipeline, leave-one-out and only-this-one
toggles, one-at-a-time sweeps around the default, cartesian grids, and embedder choices.
Each variant is a validated :class:`~memofs.ranking.config.RecallConfig` plus an embedder name.
See ``eval/specs/default.toml`` for a commented example of every key.
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from memofs.ranking.config import RecallConfig
from memofs.ranking.profiles import PROFILE_NAMES

from memofs_eval.execution.executor import EXECUTORS

LOADERS: tuple[str, ...] = ("memofs", "locomo", "longmemeval", "beir", "trec")
EMBEDDERS: tuple[str, ...] = ("minilm", "static", "lsa", "none")
# every boolean ``use_<name>`` field of RecallConfig is the ablation toggle ``<name>``: adding the
# field is the whole recipe (README, "Adding an ablation")
TOGGLES: dict[str, str] = {f.name.removeprefix("use_"): f.name for f in fields(RecallConfig)
                           if f.name.startswith("use_") and f.type in (bool, "bool")}
RETRIEVAL_TOGGLES: tuple[str, ...] = ("vector", "bm25", "fuzzy")
"""Toggles that retrieve candidates; the others adjust scores of retrieved candidates."""
DATASET_METHODS = ("all", "key")
KEY_VARIANT_GROUPS = ("default", "profile")  # what a `methods = "key"` dataset runs besides the peers
BASELINES: tuple[str, ...] = ("bm25s", "rank_bm25", "dense", "rrf", "combsum", "combmnz", "wsum")
STAT_TESTS: tuple[str, ...] = ("student", "fisher")
DEFAULT_METRICS: tuple[str, ...] = (
    "ndcg@5", "ndcg@10", "mrr@10", "recall@5", "recall@10", "recall@20", "map@100", "precision@5",
)
FINAL_WEIGHTS = ("w_recency", "w_confidence")
_CONFIG_FIELDS = {f.name for f in fields(RecallConfig)}


class SpecError(ValueError):
    """A defective spec; the message names the file, line (when known) and key."""

    def __init__(self, path: Path | str, line: int | None, key: str, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {key}: {message}")


@dataclass(frozen=True)
class DatasetRef:
    """One dataset entry: a bundled name or a path, read by ``loader`` with ``options``."""

    name: str
    path: Path
    loader: str = "memofs"
    options: dict = field(default_factory=dict, compare=False, hash=False)
    # "all": every variant of the spec; "key": the default pipeline, the profiles and the peers
    # only (a second protocol of the same data needs no second sweep)
    methods: str = "all"


@dataclass(frozen=True)
class Variant:
    """One evaluated pipeline configuration. ``group`` is the ablation axis family
    (default | leave_one_out | only | sweep | grid | embedder); ``axis``/``value`` locate it."""

    name: str
    group: str
    axis: str
    value: Any
    config: RecallConfig
    embedder: str

    @property
    def signal_group(self) -> tuple:
        """Variants sharing this key share cached signal frames."""
        return (self.config.signal_key(), self.embedder)


@dataclass(frozen=True)
class StatsSpec:
    tests: tuple[str, ...] = STAT_TESTS
    metrics: tuple[str, ...] = ("ndcg@10",)
    n_permutations: int = 1000
    alpha: float = 0.05
    bootstrap: int = 1000
    top_comparisons: int = 5
    top_queries: int = 5


@dataclass(frozen=True)
class TuneSpec:
    metric: str = "ndcg@10"
    folds: int = 5
    grid: dict[str, tuple] = field(default_factory=dict)
    in_run: bool = True  # also put the cross-validated "tuned" variant into `run` reports


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    datasets: tuple[DatasetRef, ...]
    metrics: tuple[str, ...] = DEFAULT_METRICS
    headline: tuple[str, ...] = ("ndcg@10", "mrr@10", "recall@10")
    k: int = 100
    seed: int = 42
    embedder: str = "minilm"
    pipeline: dict = field(default_factory=dict)
    baselines: tuple[str, ...] = ()
    baseline_query: str = "raw"
    toggles: tuple[str, ...] = ()
    leave_one_out: bool = True
    only_this_one: bool = True
    sweeps: dict[str, tuple] = field(default_factory=dict)
    grids: tuple[dict[str, tuple], ...] = ()
    embedders: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()  # named recall profiles run as variants `profile:<name>` (memofs.ranking.profiles)
    stats: StatsSpec = field(default_factory=StatsSpec)
    tune: TuneSpec | None = None
    tolerance: dict[str, float] = field(default_factory=lambda: {"ndcg@10": 0.02})
    workers: int = 2
    executor: str = "local"  # local | dask (memofs_eval.execution.executor)
    scheduler: str | None = None  # a Dask scheduler address; None: a LocalCluster of `workers`
    trec_runs: str = "all"  # all | key (default, -X, only:X, embedders, tuned, baselines) | none
    trec_gzip: bool = False
    text: str = ""

    def default_config(self) -> RecallConfig:
        return RecallConfig().replace(top_k=self.k, **self.pipeline)

    def variants(self) -> list[Variant]:
        return expand_variants(self)


# --------------------------------------------------------------------------- parsing


def _line(text: str, key: str, table: str | None = None) -> int | None:
    """1-based line of ``key = ...`` (inside ``[table]`` when given); None if not found."""
    in_table = table is None
    for no, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if s.startswith("["):
            in_table = table is None or s.strip("[] ") == table
            continue
        if in_table and re.match(rf"^\"?{re.escape(key)}\"?\s*=", s):
            return no
    return None


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text

    def err(self, key: str, message: str, table: str | None = None) -> SpecError:
        return SpecError(self.path, _line(self.text, key.split(".")[-1], table), key, message)

    def only(self, data: dict, allowed: tuple[str, ...], table: str | None = None) -> None:
        for key in data:
            if key not in allowed:
                where = f"{table}.{key}" if table else key
                raise self.err(where, f"unknown key (allowed: {', '.join(allowed)})", table)


def _values(r: _Reader, key: str, raw: Any, table: str) -> tuple:
    """A sweep axis: a list, ``{start, stop, step}`` (inclusive) or ``{log = [lo, hi], num}``."""
    if isinstance(raw, list):
        if not raw:
            raise r.err(f"{table}.{key}", "empty list of values", table)
        return tuple(raw)
    if isinstance(raw, dict) and {"start", "stop", "step"} <= set(raw):
        start, stop, step = (float(raw[k]) for k in ("start", "stop", "step"))
        if step <= 0 or stop < start:
            raise r.err(f"{table}.{key}", "expected step > 0 and stop >= start", table)
        n = int(math.floor((stop - start) / step + 1e-9)) + 1
        return tuple(round(start + i * step, 10) for i in range(n))
    if isinstance(raw, dict) and "log" in raw:
        lo, hi = raw["log"]
        num = int(raw.get("num", 7))
        if not (lo > 0 and hi > lo and num >= 2):
            raise r.err(f"{table}.{key}", "log = [lo, hi] needs 0 < lo < hi and num >= 2", table)
        return tuple(round(lo * (hi / lo) ** (i / (num - 1)), 10) for i in range(num))
    raise r.err(f"{table}.{key}", "expected a list, {start, stop, step} or {log = [lo, hi], num}", table)


def _axes(r: _Reader, data: Any, table: str) -> dict[str, tuple]:
    if not isinstance(data, dict):
        raise r.err(table, "expected a table of axis = values")
    out: dict[str, tuple] = {}
    for key, raw in data.items():
        if key not in _CONFIG_FIELDS:
            raise r.err(f"{table}.{key}", "not a RecallConfig field", table)
        out[key] = _values(r, key, raw, table)
    return out


def _dataset_refs(r: _Reader, raw: Any, base: Path) -> tuple[DatasetRef, ...]:
    from memofs_datasets.format import bundled_datasets

    if not isinstance(raw, list) or not raw:
        raise r.err("datasets", "expected at least one [[datasets]] entry")
    bundled = bundled_datasets()
    out: list[DatasetRef] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise r.err("datasets", f"entry {i}: expected a table")
        r.only(entry, ("name", "path", "loader", "options", "methods"), "datasets")
        methods = entry.get("methods", "all")
        if methods not in DATASET_METHODS:
            raise r.err("datasets.methods", f"expected one of {', '.join(DATASET_METHODS)}, got {methods!r}", "datasets")
        loader = entry.get("loader", "memofs")
        if loader not in LOADERS:
            raise r.err("datasets.loader", f"unknown loader {loader!r} (expected one of {', '.join(LOADERS)})", "datasets")
        options = dict(entry.get("options", {}))
        if "path" in entry:
            path = resolve_path(entry["path"], base)
            out.append(DatasetRef(entry.get("name") or path.name, path, loader, options, methods))
        elif entry.get("name") == "bundled":
            out += [DatasetRef(n, p, "memofs") for n, p in bundled.items()]
        elif entry.get("name") in bundled:
            out.append(DatasetRef(entry["name"], bundled[entry["name"]], "memofs"))
        else:
            raise r.err("datasets.name", f"{entry.get('name')!r} is not a bundled dataset ({', '.join(bundled) or 'none'}) and no path is given", "datasets")
    return tuple(out)


def resolve_path(value: str, base: Path) -> Path:
    """A dataset path: absolute, relative to the working directory, or to the spec's folder."""
    p = Path(value).expanduser()
    if p.is_absolute() or p.exists():
        return p.resolve() if p.exists() else p
    alt = (base / p).resolve()
    return alt if alt.exists() else p


def load_spec(path: str | Path) -> Spec:
    """Parse and validate a spec file; every defect raises :class:`SpecError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(path, None, "file", str(exc)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise SpecError(path, int(m.group(1)) if m else None, "toml", str(exc)) from None
    r = _Reader(path, text)
    top = ("name", "seed", "k", "embedder", "metrics", "headline", "workers", "executor", "scheduler", "datasets", "pipeline",
           "profiles", "baselines", "ablations", "stats", "tune", "gate", "report")
    r.only(data, top)
    kw: dict[str, Any] = {"path": path, "name": str(data.get("name", path.stem)), "text": text}
    for key, typ in (("seed", int), ("k", int), ("workers", int)):
        if key in data:
            if not isinstance(data[key], typ) or data[key] < (0 if key == "seed" else 1):
                raise r.err(key, f"expected a positive integer, got {data[key]!r}")
            kw[key] = data[key]
    kw["embedder"] = _embedder(r, data.get("embedder", "minilm"), "embedder")
    if data.get("executor", "local") not in EXECUTORS:
        raise r.err("executor", f"unknown executor {data['executor']!r} (expected {', '.join(EXECUTORS)})")
    kw["executor"] = data.get("executor", "local")
    if "scheduler" in data:
        if not isinstance(data["scheduler"], str) or not data["scheduler"].strip():
            raise r.err("scheduler", "expected a Dask scheduler address like 'tcp://host:8786'")
        kw["scheduler"] = data["scheduler"].strip()
    for key in ("metrics", "headline"):
        if key in data:
            kw[key] = tuple(_metric(r, m, key) for m in data[key])
    kw["datasets"] = _dataset_refs(r, data.get("datasets"), path.parent)
    pipeline = data.get("pipeline", {})
    for key in pipeline:
        if key not in _CONFIG_FIELDS:
            raise r.err(f"pipeline.{key}", "not a RecallConfig field", "pipeline")
    kw["pipeline"] = dict(pipeline)
    profiles = data.get("profiles", [])
    if not isinstance(profiles, list) or any(p not in PROFILE_NAMES or p == "reference" for p in profiles):
        raise r.err("profiles", f"expected a list of recall profiles from {', '.join(PROFILE_NAMES[1:])}, got {profiles!r}")
    kw["profiles"] = tuple(profiles)

    b = data.get("baselines", {})
    r.only(b, ("methods", "query"), "baselines")
    methods = tuple(b.get("methods", ()))
    for m in methods:
        name, _, param = str(m).partition(":")
        if name not in BASELINES:
            raise r.err("baselines.methods", f"unknown baseline {m!r} (expected {', '.join(BASELINES)}, optionally ':tuned' or ':<dense weight>')", "baselines")
        if param and param != "tuned":
            try:
                w = float(param)
            except ValueError:
                raise r.err("baselines.methods", f"{m!r}: parameter must be 'tuned' or a number", "baselines") from None
            if not 0 <= w <= 1 or name != "wsum":
                raise r.err("baselines.methods", f"{m!r}: only wsum takes a dense weight in [0, 1]", "baselines")
    kw["baselines"] = methods
    q = b.get("query", "raw")
    if q not in ("raw", "rewritten"):
        raise r.err("baselines.query", "expected 'raw' or 'rewritten'", "baselines")
    kw["baseline_query"] = q

    a = data.get("ablations", {})
    r.only(a, ("toggles", "leave_one_out", "only_this_one", "sweeps", "grid", "embedders"), "ablations")
    toggles = tuple(a.get("toggles", ()))
    for t in toggles:
        if t not in TOGGLES:
            raise r.err("ablations.toggles", f"unknown toggle {t!r} (expected {', '.join(TOGGLES)})", "ablations")
    kw["toggles"] = toggles
    for key in ("leave_one_out", "only_this_one"):
        if key in a:
            if not isinstance(a[key], bool):
                raise r.err(f"ablations.{key}", "expected true or false", "ablations")
            kw[key] = a[key]
    kw["sweeps"] = _axes(r, a.get("sweeps", {}), "ablations.sweeps")
    grids = a.get("grid", [])
    grids = [grids] if isinstance(grids, dict) else grids
    kw["grids"] = tuple(_axes(r, g, "ablations.grid") for g in grids)
    kw["embedders"] = tuple(_embedder(r, e, "ablations.embedders") for e in a.get("embedders", ()))

    s = data.get("stats", {})
    r.only(s, tuple(f.name for f in fields(StatsSpec)), "stats")
    for t in s.get("tests", ()):
        if t not in STAT_TESTS:
            raise r.err("stats.tests", f"unknown test {t!r} (expected {', '.join(STAT_TESTS)})", "stats")
    stats = {k: (tuple(v) if isinstance(v, list) else v) for k, v in s.items()}
    if "metrics" in stats:
        stats["metrics"] = tuple(_metric(r, m, "stats.metrics") for m in stats["metrics"])
    kw["stats"] = StatsSpec(**stats)

    t = data.get("tune")
    if t is not None:
        r.only(t, ("metric", "folds", "grid", "in_run"), "tune")
        folds = t.get("folds", 5)
        if not isinstance(folds, int) or folds < 2:
            raise r.err("tune.folds", "expected an integer >= 2", "tune")
        kw["tune"] = TuneSpec(metric=_metric(r, t.get("metric", "ndcg@10"), "tune.metric"), folds=folds,
                              grid=_axes(r, t.get("grid", {}), "tune.grid"), in_run=bool(t.get("in_run", True)))
    g = data.get("gate", {})
    r.only(g, ("tolerance",), "gate")
    if "tolerance" in g:
        tol = g["tolerance"]
        if not isinstance(tol, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in tol.values()):
            raise r.err("gate.tolerance", "expected a table metric = non-negative number", "gate")
        kw["tolerance"] = {_metric(r, m, "gate.tolerance"): float(v) for m, v in tol.items()}
    rep = data.get("report", {})
    r.only(rep, ("trec_runs", "trec_gzip"), "report")
    if rep.get("trec_runs", "all") not in ("all", "key", "none"):
        raise r.err("report.trec_runs", "expected 'all', 'key' or 'none'", "report")
    if not isinstance(rep.get("trec_gzip", False), bool):
        raise r.err("report.trec_gzip", "expected true or false", "report")
    kw["trec_runs"] = rep.get("trec_runs", "all")
    kw["trec_gzip"] = rep.get("trec_gzip", False)
    spec = Spec(**kw)
    try:
        spec.variants()  # validate every generated config now, not mid-run
    except ValueError as exc:
        raise SpecError(path, None, "ablations", str(exc)) from None
    return spec


_METRIC = re.compile(r"^[a-z_]+(@\d+)?$")


def _metric(r: _Reader, m: Any, key: str) -> str:
    """A ranx metric name (``ndcg@10``) or a harness measure (``briefing_recall@4096``,
    ``current_first``, ...: :mod:`memofs_eval.scoring.measures`), lower-cased."""
    if not isinstance(m, str) or not _METRIC.match(m.lower()):
        raise r.err(key, f"{m!r} is not a ranx metric name like 'ndcg@10' or a measure like 'briefing_recall@8192'")
    from memofs_eval.inputs.measure_names import parse

    try:
        parse(m)
    except ValueError as exc:
        raise r.err(key, str(exc)) from None
    return m.lower()


def _embedder(r: _Reader, e: Any, key: str) -> str:
    """minilm | static | lsa | none, or any sentence-transformers model path or name."""
    if not isinstance(e, str) or not e.strip():
        raise r.err(key, "expected an embedder name (minilm, static, lsa, none, or a model path)")
    return e.strip()


# --------------------------------------------------------------------------- variants


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _apply(base: RecallConfig, changes: dict[str, Any]) -> RecallConfig:
    """``base`` with ``changes``; a final-score weight sweep lets ``w_relevance`` absorb the
    change so the three final weights keep summing to 1."""
    changes = dict(changes)
    if any(k in changes for k in FINAL_WEIGHTS) and "w_relevance" not in changes:
        rest = sum(changes.get(k, getattr(base, k)) for k in FINAL_WEIGHTS)
        changes["w_relevance"] = round(max(0.0, 1.0 - rest), 10)
    return base.replace(**changes)


def expand_variants(spec: Spec) -> list[Variant]:
    """Every variant of the spec, in a fixed order; names are unique."""
    base = spec.default_config()
    emb = spec.embedder
    out = [Variant("default", "default", "", None, base, emb)]
    tog = spec.toggles
    if spec.leave_one_out:
        out += [Variant(f"-{t}", "leave_one_out", t, False, base.replace(**{TOGGLES[t]: False}), emb) for t in tog]
    if spec.only_this_one and tog:
        for t in tog:
            # "only X": X on, every other listed toggle off; an adjustment keeps the listed
            # retrieval signals on, since without candidates it would have nothing to adjust
            keep = {t} | (set() if t in RETRIEVAL_TOGGLES else set(RETRIEVAL_TOGGLES) & set(tog))
            changes = {TOGGLES[o]: (o in keep) for o in tog}
            out.append(Variant(f"only:{t}", "only", t, True, base.replace(**changes), emb))
    for axis, values in spec.sweeps.items():
        out += [Variant(f"{axis}={_fmt(v)}", "sweep", axis, v, _apply(base, {axis: v}), emb) for v in values]
    for i, grid in enumerate(spec.grids):
        axes = list(grid)
        for combo in itertools.product(*grid.values()):
            changes = dict(zip(axes, combo))
            label = ",".join(f"{a}={_fmt(v)}" for a, v in changes.items())
            out.append(Variant(f"grid{i}:{label}", "grid", ",".join(axes), combo, _apply(base, changes), emb))
    for name in spec.profiles:
        cfg = RecallConfig.from_dict({**spec.pipeline, "profile": name, "top_k": spec.k})
        out.append(Variant(f"profile:{name}", "profile", "profile", name, cfg, emb))
    for e in spec.embedders:
        if e != emb:
            out.append(Variant(f"embedder={e}", "embedder", "embedder", e, base, e))
    names = [v.name for v in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate variant names: {', '.join(dupes)}")
    return out


def tune_variants(spec: Spec) -> list[Variant]:
    """The tuning grid's candidates (cartesian product around the default pipeline)."""
    if spec.tune is None or not spec.tune.grid:
        return []
    base = spec.default_config()
    axes = list(spec.tune.grid)
    out = []
    for combo in itertools.product(*spec.tune.grid.values()):
        changes = dict(zip(axes, combo))
        label = ",".join(f"{a}={_fmt(v)}" for a, v in changes.items())
        out.append(Variant(f"tune:{label}", "tune", ",".join(axes), combo, _apply(base, changes), spec.embedder))
    return out
