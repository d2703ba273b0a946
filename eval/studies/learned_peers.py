"""The learned-fusion study's peers, the harness's own: pipeline variants by their spec name
(:func:`pipeline_configs`, run through :func:`memofs_eval.runs.runner.fused_run`) and
``baseline:<method>@<raw|rewritten>`` (:func:`peer_runs`, :func:`memofs_eval.runs.baselines.baseline_runs`,
tuned ones on the harness's :func:`memofs_eval.inputs.folds.evaluation_folds`). A name here is
the number of the same name in ``memofs-eval run``'s report of the dataset's spec.
"""

from __future__ import annotations

from collections.abc import Sequence

from memofs.ranking.config import RecallConfig
from memofs_eval._env import cache_root
from memofs_eval.inputs.folds import evaluation_folds
from memofs_eval.inputs.spec import TOGGLES, Spec, expand_variants
from memofs_eval.runs.baselines import QUERY_TEXTS, baseline_runs
from memofs_eval.runs.runner import Ranked
from memofs_eval.studies.learned_bench import Bench


def pipeline_configs(spec: Spec, names: Sequence[str]) -> dict[str, RecallConfig]:
    """Configs of pipeline variants by name: the spec's own (``default``, ``-X``, ``only:X``,
    ...), or two toggles at once in the same grammar: ``-X,-Y`` (both off) and ``only:X,Y``
    (X and Y on, every other toggle of the spec off, as ``only:X`` does)."""
    by_name = {v.name: v.config for v in expand_variants(spec)}
    base = spec.default_config()
    out = {}
    for n in names:
        if n in by_name:
            out[n] = by_name[n]
            continue
        only = n.startswith("only:")
        named = n[len("only:"):].split(",") if only else [t[1:] if t.startswith("-") else "" for t in n.split(",")]
        if not all(t in TOGGLES for t in named):
            raise ValueError(f"unknown pipeline variant {n!r} for spec {spec.name!r}")
        if only:
            changes = {TOGGLES[t]: (t in named) for t in (*spec.toggles, *named)}
        else:
            changes = {TOGGLES[t]: False for t in named}
        out[n] = base.replace(**changes)
    return out


def peer_runs(bench: Bench, queries: Sequence[str] = QUERY_TEXTS) -> tuple[dict[str, Ranked], dict[str, object]]:
    """The spec's baselines on each query text, exactly as ``memofs-eval run`` computes them."""
    spec, data = bench.spec, bench.data
    if spec is None or data is None:
        raise ValueError(f"{bench.name}: peers need the bench's spec and harness data (Bench.load)")
    cfg = spec.default_config()
    folds, _ = evaluation_folds(data, spec.tune.folds if spec.tune else 5, spec.seed)
    metric = spec.tune.metric if spec.tune else spec.stats.metrics[0]
    runs: dict[str, Ranked] = {}
    params: dict[str, object] = {}
    for query in queries:
        texts = {q.id: (q.text if query == "raw" else bench.frames[q.id].query_text) for q in data.queries}
        r, p = baseline_runs(data, spec.baselines, query, texts, spec.k, cfg.k1, cfg.b, bench.embedder or spec.embedder,
                             cache_root(), folds, metric)
        runs.update(r)
        params.update(p)
    return runs, params
