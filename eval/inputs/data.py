"""Datasets for the harness: load a :class:`DatasetRef` with its loader, and the per-query
facts the harness needs (category, split, CV group, relevance judgements)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from memofs_datasets.format import Dataset, Query, load_dataset

from memofs_eval.inputs.spec import DatasetRef


def load(ref: DatasetRef) -> Dataset:
    """Read one dataset entry; loader errors pass through (they name file, line and field)."""
    opts = dict(ref.options)
    if not ref.path.exists():
        raise FileNotFoundError(f"dataset {ref.name!r}: {ref.path} does not exist")
    if ref.loader == "memofs":
        return load_dataset(ref.path, **opts)
    if ref.loader == "locomo":
        from memofs_datasets.locomo import load_locomo

        return load_locomo(ref.path, **opts)
    if ref.loader == "longmemeval":
        from memofs_datasets.longmemeval import load_longmemeval

        return load_longmemeval(ref.path, **opts)
    if ref.loader == "beir":
        from memofs_datasets.beir import load_beir

        return load_beir(ref.path, **opts)
    if ref.loader == "trec":
        from memofs_datasets.trec import load_trec

        root = Path(ref.path)
        files = {k: root / opts.pop(k, default) for k, default in (("topics", "topics"), ("qrels", "qrels"), ("corpus", "corpus"))}
        return load_trec(files["topics"], files["qrels"], files["corpus"], name=ref.name, **opts)
    raise ValueError(f"dataset {ref.name!r}: unknown loader {ref.loader!r}")


def detect_loader(path: Path) -> str:
    """Guess the loader of a command-line dataset path."""
    if (path / "dataset.toml").is_file():
        return "memofs"
    if (path / "corpus.jsonl").is_file():
        return "beir"
    name = path.name.lower()
    if "locomo" in name or (path.is_dir() and any(p.name.startswith("locomo") for p in path.iterdir())):
        return "locomo"
    if "longmemeval" in name:
        return "longmemeval"
    raise ValueError(f"{path}: cannot tell the dataset format; name its loader in a spec")


@dataclass
class EvalData:
    """A loaded dataset plus what the harness derives from it once."""

    ref: DatasetRef
    dataset: Dataset

    @property
    def name(self) -> str:
        return self.ref.name

    @cached_property
    def content_hash(self) -> str:
        return self.dataset.content_hash()

    @cached_property
    def queries(self) -> tuple[Query, ...]:
        """Queries with at least one relevant (> 0) judgement, in dataset order; others
        cannot be scored by any ranking metric and are left out (counted in the manifest),
        unless the dataset's protocol scores them (``stats["keeps_unjudged"]``)."""
        keep_all = bool(self.dataset.stats.get("keeps_unjudged"))
        return tuple(q for q in self.dataset.queries if keep_all or self.dataset.relevant(q.id))

    @property
    def protocol(self) -> str:
        """The protocol preset the dataset was loaded under (:mod:`memofs_datasets.protocols`)."""
        return str(self.dataset.stats.get("protocol", "memofs"))

    @cached_property
    def qrels(self) -> dict[str, dict[str, int]]:
        return {q.id: dict(self.dataset.qrels.get(q.id, {})) for q in self.queries}

    @cached_property
    def category(self) -> dict[str, str]:
        return {q.id: q.category for q in self.queries}

    @cached_property
    def split(self) -> dict[str, str | None]:
        return {q.id: q.split for q in self.queries}

    @cached_property
    def group(self) -> dict[str, str]:
        """CV group: the scope (queries of one conversation/project share a corpus), else the query."""
        return {q.id: (f"scope:{q.scope}" if q.scope is not None else f"query:{q.id}") for q in self.queries}

    @property
    def has_split(self) -> bool:
        s = set(self.split.values())
        return "tune" in s and "heldout" in s

    def subsets(self) -> dict[str, list[str]]:
        """Query subsets metrics are reported on: ``all``, plus ``tune``/``heldout`` when fixed."""
        out = {"all": [q.id for q in self.queries]}
        if self.has_split:
            for s in ("tune", "heldout"):
                out[s] = [q.id for q in self.queries if q.split == s]
        return out

    @property
    def headline_subset(self) -> str:
        """Honest numbers: the held-out split when the dataset fixes one."""
        return "heldout" if self.has_split else "all"
