"""memofs through its library: one :class:`~memofs.ranking.recall.Recaller` per scope, built
as the harness builds its own (the scope's entity graph and source tree; corpus vectors from
the harness's embedding cache), asked with the query's task type and "now". With
``embedder = "minilm"`` and the reference profile it ranks exactly as the harness's
``default`` method (tested)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memofs.files.records import Memory
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.config import RecallConfig
from memofs.ranking.profiles import PROFILE_NAMES
from memofs.ranking.recall import Recaller
from memofs_datasets.format import Dataset

from memofs_eval.runs.embed import CachedEmbedder
from memofs_eval.studies.systems.base import UNSCOPED, AdapterConfigError, Ask, Recalled, System
from memofs_eval.studies.systems.embedding import warmed_embedder


class MemofsLibrary(System):
    OPTIONS = {"profile": (str,), "embedder": (str,), "config": (dict,)}
    extra_id_prefixes = ("graph:",)

    def __init__(self, name: str, *, base: Path = Path("."), profile: str = "reference", embedder: str = "minilm",
                 config: dict | None = None) -> None:
        """``config``: RecallConfig fields over the profile's settings (an ablation of a profile,
        e.g. ``{ stem = true }``)."""
        if profile not in PROFILE_NAMES:
            raise AdapterConfigError(name, "options.profile", f"expected one of {', '.join(PROFILE_NAMES)}, got {profile!r}")
        self.name, self.profile, self.embedder_name = name, profile, embedder
        try:
            self.config = RecallConfig.from_dict({**(config or {}), "profile": profile})
        except (ValueError, TypeError) as exc:
            raise AdapterConfigError(name, "options.config", str(exc)) from None
        self._dataset: Dataset | None = None
        self._emb: CachedEmbedder | None = None
        self._recallers: dict[str, Recaller] = {}

    def open(self, dataset: Dataset) -> None:
        self._dataset = dataset
        rewritten = []  # the texts recall embeds: each query rewritten with its scope's graph (as the harness warms them)
        for scope in dict.fromkeys(q.scope for q in dataset.queries):
            rec = Recaller(self.config, graph=EntityGraph(*dataset.graph_for(scope)))
            rewritten += [rec.query_text(q.text, q.task_type)[0].text for q in dataset.queries if q.scope == scope]
        self._emb = warmed_embedder(self.embedder_name, dataset, rewritten)

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        ds = self._dataset
        assert ds is not None, "open(dataset) comes before ingest"
        ns = None if scope == UNSCOPED else scope
        if ns is not None:
            anchor_root = ds.anchor_root(ns)
        else:  # an unscoped corpus mixes namespaces; anchors resolve only when there is one
            anchor_root = ds.anchor_root(ds.namespaces[0]) if len(ds.namespaces) == 1 else None
        rec = Recaller(self.config, embedder=self._emb, graph=EntityGraph(*ds.graph_for(ns)), anchor_root=anchor_root)
        rec.add(memories, vectors=self._emb.encode([m.text for m in memories]) if self._emb is not None else None)
        self._recallers[scope] = rec

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        results = self._recallers[scope].recall(ask.text, k, task_type=ask.task_type, now=ask.now)
        return Recalled(tuple(r.id for r in results), tuple(r.score for r in results))

    def reset(self) -> None:
        self._recallers.clear()
