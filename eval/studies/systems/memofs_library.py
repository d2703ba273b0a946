"""memofs through its library: one :class:`~memofs.ranking.recall.Recaller` per scope, built
as the harness builds its own (the scope's entity graph and source tree; corpus vectors from
the harness's embedding cache), asked with the query's task type and "now". With
``embedder = "minilm"`` and the reference profile it ranks exactly as the harness's
``default`` method (tested). ``heldout = true`` (a profile whose file lists ``heldout_models``,
as ``recommended`` does): each dataset is ranked by the model, and the settings, selected and
trained without it, so the row is a held-out figure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from memofs.files.records import Memory
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.config import RecallConfig
from memofs.ranking.profiles import MODELS_DIR, PROFILE_NAMES, profile_file
from memofs.ranking.recall import Recaller
from memofs_datasets.format import Dataset

from memofs_eval.runs.embed import CachedEmbedder
from memofs_eval.studies.systems.base import UNSCOPED, AdapterConfigError, Ask, Recalled, System
from memofs_eval.studies.systems.embedding import warmed_embedder


def scope_sources(ds: Dataset, scope: str) -> tuple[EntityGraph, Path | None]:
    """What memofs ranks a scope's corpus with besides its memories: the scope's entity graph
    and the source tree its anchors resolve against (None for an unscoped corpus of several
    namespaces: anchors resolve only when there is one). Every memofs adapter builds from it."""
    ns = None if scope == UNSCOPED else scope
    if ns is not None:
        anchor_root = ds.anchor_root(ns)
    else:
        anchor_root = ds.anchor_root(ds.namespaces[0]) if len(ds.namespaces) == 1 else None
    return EntityGraph(*ds.graph_for(ns)), anchor_root


class MemofsLibrary(System):
    OPTIONS = {"profile": (str,), "embedder": (str,), "config": (dict,), "heldout": (bool,)}
    extra_id_prefixes = ("graph:",)

    def __init__(self, name: str, *, base: Path = Path("."), profile: str = "reference", embedder: str = "minilm",
                 config: dict | None = None, heldout: bool = False) -> None:
        """``config``: RecallConfig fields over the profile's settings (an ablation of a profile,
        e.g. ``{ stem = true }``); ``heldout``: see the module docstring."""
        if profile not in PROFILE_NAMES:
            raise AdapterConfigError(name, "options.profile", f"expected one of {', '.join(PROFILE_NAMES)}, got {profile!r}")
        self.name, self.profile, self.embedder_name = name, profile, embedder
        self._overrides = dict(config or {})
        self._heldout = self._heldout_models(profile) if heldout else None
        try:
            self.config = RecallConfig.from_dict({**self._overrides, "profile": profile})
        except (ValueError, TypeError) as exc:
            raise AdapterConfigError(name, "options.config", str(exc)) from None
        self._dataset: Dataset | None = None
        self._emb: CachedEmbedder | None = None
        self._recallers: dict[str, Recaller] = {}

    def _heldout_models(self, profile: str) -> dict[str, dict]:
        path = profile_file(profile)
        try:
            held = json.loads(path.read_text(encoding="utf-8")).get("heldout_models")
        except (OSError, ValueError) as exc:
            raise AdapterConfigError(self.name, "options.heldout", f"{path}: {exc}") from None
        if not isinstance(held, dict) or not held:
            raise AdapterConfigError(self.name, "options.heldout", f"{path}: profile {profile!r} lists no heldout_models")
        return held

    def heldout_config(self, dataset: str) -> RecallConfig:
        """The configuration that never saw ``dataset`` (a profile dataset's name, or that name
        and a suffix, as ``longmemeval-longmemeval_dev``): its model and settings over the
        reference, then the ``config`` option."""
        assert self._heldout is not None
        key = next((k for k in self._heldout if dataset == k or dataset.startswith(k + "-")), None)
        if key is None:
            raise AdapterConfigError(self.name, "options.heldout",
                                     f"profile {self.profile!r} has no held-out model for dataset {dataset!r} (it has {', '.join(self._heldout)})")
        entry = self._heldout[key]
        return RecallConfig.from_dict({**entry["settings"], "learned_model": str(MODELS_DIR / entry["model"]), **self._overrides})

    def open(self, dataset: Dataset) -> None:
        self._dataset = dataset
        if self._heldout is not None:
            self.config = self.heldout_config(dataset.name)
        rewritten = []  # the texts recall embeds: each query rewritten with its scope's graph (as the harness warms them)
        for scope in dict.fromkeys(q.scope for q in dataset.queries):
            rec = Recaller(self.config, graph=EntityGraph(*dataset.graph_for(scope)))
            rewritten += [rec.query_text(q.text, q.task_type)[0].text for q in dataset.queries if q.scope == scope]
        self._emb = warmed_embedder(self.embedder_name, dataset, rewritten)

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        ds = self._dataset
        assert ds is not None, "open(dataset) comes before ingest"
        graph, anchor_root = scope_sources(ds, scope)
        rec = Recaller(self.config, embedder=self._emb, graph=graph, anchor_root=anchor_root)
        rec.add(memories, vectors=self._emb.encode([m.text for m in memories]) if self._emb is not None else None)
        self._recallers[scope] = rec

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        results = self._recallers[scope].recall(ask.text, k, task_type=ask.task_type, now=ask.now)
        return Recalled(tuple(r.id for r in results), tuple(r.score for r in results))

    def reset(self) -> None:
        self._recallers.clear()
