"""The learned-fusion study's datasets: each one loaded as a :class:`Bench` (the harness's
frames from its signal cache, judgements and per-query facts), and :func:`ndcg`, the
per-query figure of a ranked run on it.

Each dataset's frames are computed at the settings of the spec whose ``memofs-eval run``
report the study's peers must match (:func:`dataset_spec`), so a peer's figure here is the
figure of the same name there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import memofs_eval._env  # noqa: F401  (cache and offline variables before ranx / torch)
import pandas as pd

from memofs.ranking.config import RecallConfig
from memofs.signals.frame import SignalFrame
from memofs_eval._env import REPO, cache_root
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.inputs.spec import DatasetRef, Spec, load_spec
from memofs_eval.runs.runner import Ranked
from memofs_eval.runs.signals_cache import SignalCache
from memofs_eval.scoring.metrics import per_query
from memofs_datasets.shared import locomo_path, longmemeval_dev_path

AGENT_MEMORY_PATH = REPO / "datasets" / "agent-memory"
SPECS = REPO / "eval" / "specs"


def dataset_ref(name: str) -> DatasetRef:
    if name == "locomo":
        path = locomo_path()
        if path is None:
            raise SystemExit("learned fusion study: LoCoMo is not in shared data ($MEMOFS_SHARED, default ../shared)")
        # the spec's loader options, on the shared copy wherever it lives
        return DatasetRef("locomo", path, "locomo", dict(dataset_spec("locomo").datasets[0].options))
    if name == "longmemeval":
        path = longmemeval_dev_path()
        if path is None:
            raise SystemExit("learned fusion study: the LongMemEval dev sample is not in shared data ($MEMOFS_SHARED, default ../shared)")
        return DatasetRef("longmemeval", path, "longmemeval", dict(dataset_spec("longmemeval").datasets[0].options))
    if name == "agent-memory":
        return DatasetRef("agent-memory", AGENT_MEMORY_PATH, "memofs")
    if name == "tiny":
        return DatasetRef("tiny", REPO / "datasets" / "tiny", "memofs")
    raise ValueError(f"unknown dataset {name!r} (locomo | longmemeval | agent-memory | tiny)")


def dataset_spec(name: str) -> Spec:
    """The spec whose ``memofs-eval run`` report the study's peers must match."""
    return load_spec(SPECS / {"locomo": "locomo.toml", "longmemeval": "longmemeval.toml"}.get(name, "default.toml"))


def dataset_present(name: str) -> bool:
    """Whether ``name``'s data is here (shared datasets may be absent in a fresh clone)."""
    return {"locomo": locomo_path, "longmemeval": longmemeval_dev_path}.get(name, lambda: AGENT_MEMORY_PATH)() is not None


def frames_for(data: EvalData, embedder: str = "minilm", root: Path | None = None, progress: bool = False,
               cfg: RecallConfig | None = None) -> dict[str, SignalFrame]:
    """Every query's frame at ``cfg``'s signal settings (default: the spec's), from the
    harness's own signal cache (:class:`memofs_eval.runs.signals_cache.SignalCache`)."""
    return SignalCache(root or cache_root(), progress).frames(data, cfg or RecallConfig(), embedder).frames


@dataclass
class Bench:
    """One dataset ready for learning: frames, judgements and per-query facts."""

    name: str
    frames: dict[str, SignalFrame]
    qrels: dict[str, dict[str, int]]
    category: dict[str, str]
    group: dict[str, str]
    split: dict[str, str | None]
    data: EvalData | None = None  # the harness's view, for the peers
    spec: Spec | None = None
    root: Path | None = None  # cache root of the frames (default: the harness's)
    embedder: str | None = None  # default: the spec's

    @property
    def qids(self) -> list[str]:
        return list(self.frames)

    @classmethod
    def load(cls, name: str, embedder: str | None = None, progress: bool = False, root: Path | None = None) -> Bench:
        spec = dataset_spec(name)
        data = EvalData(dataset_ref(name), load(dataset_ref(name)))
        emb = embedder or spec.embedder
        frames = frames_for(data, emb, root, progress, spec.default_config())
        return cls(name, frames, data.qrels, data.category, data.group, data.split, data, spec, root, emb)

    def frames_of(self, cfg: RecallConfig) -> dict[str, SignalFrame]:
        """Frames at ``cfg``'s signal settings: the bench's own when they match the spec's
        default, else the harness's cached frames of that signal group (``only:bm25``
        switches rewriting off, which changes the signals, as in ``memofs-eval run``)."""
        spec = self.spec or dataset_spec(self.name)
        if cfg.signal_key() == spec.default_config().signal_key():
            return self.frames
        if self.data is None:
            raise ValueError(f"{self.name}: frames of another signal group need the bench's harness data (Bench.load)")
        return frames_for(self.data, self.embedder or spec.embedder, self.root, cfg=cfg)


def ndcg(bench: Bench, ranked: Ranked, metric: str = "ndcg@10") -> pd.Series:
    """Per-query ``metric`` of ``ranked`` on ``bench``'s judgements, in ``ranked``'s query order."""
    judged = {q: bench.qrels[q] for q in ranked}
    return per_query(judged, ranked, [metric])[metric].reindex(list(ranked))
