"""Results produced elsewhere: a TREC run file (``qid Q0 doc rank score tag``, whitespace
separated, trec_eval's format) and an optional id map (``external_id<TAB>memory_id`` per line)
from the other system's document ids to the dataset's. Query ids are the dataset's. Each
query's ranking is by score descending, ties by id (the harness's rule, as trec_eval
re-sorts by score); a query the file lacks is a failure of that query."""

from __future__ import annotations

import gzip
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from memofs.files.records import Memory
from memofs_datasets.format import Dataset

from memofs_eval.runs.runner import rank_scores
from memofs_eval.inputs.spec import resolve_path
from memofs_eval.studies.systems.base import Ask, Recalled, System


def read_id_map(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"{path}:{no}: id map: expected 'external_id<TAB>memory_id'")
        if parts[0] in out:
            raise ValueError(f"{path}:{no}: external_id: {parts[0]!r} is mapped twice")
        out[parts[0]] = parts[1].strip()
    return out


def read_run(path: Path, tag: str | None = None) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` of a TREC run, gzipped when named ``*.gz`` (lines of another
    ``tag`` skipped when given)."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    text = gzip.decompress(path.read_bytes()).decode("utf-8") if path.suffix == ".gz" else path.read_text(encoding="utf-8")
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise ValueError(f"{path}:{no}: run line: expected 6 fields 'qid Q0 doc rank score tag', got {len(parts)}")
        qid, _, doc, rank, score, run_tag = parts
        try:
            int(rank)
        except ValueError:
            raise ValueError(f"{path}:{no}: rank: not an integer: {rank!r}") from None
        try:
            value = float(score)
        except ValueError:
            raise ValueError(f"{path}:{no}: score: not a number: {score!r}") from None
        if tag is not None and run_tag != tag:
            continue
        if doc in out[qid]:
            raise ValueError(f"{path}:{no}: doc: {doc!r} is listed twice for query {qid!r}")
        out[qid][doc] = value
    return dict(out)


class RunFile(System):
    OPTIONS = {"path": (str,), "id_map": (str,), "tag": (str,)}
    REQUIRED = ("path",)

    def __init__(self, name: str, *, base: Path = Path("."), path: str, id_map: str | None = None,
                 tag: str | None = None) -> None:
        self.name = name
        self.path = resolve_path(path, base)
        self.id_map_path = resolve_path(id_map, base) if id_map else None
        self.tag = tag
        self._run: dict[str, dict[str, float]] = {}

    def open(self, dataset: Dataset) -> None:
        mapping = read_id_map(self.id_map_path) if self.id_map_path else None
        run = read_run(self.path, self.tag)
        if mapping is not None:  # an unmapped id stays as it is: the runner reports it as unknown
            run = {q: {mapping.get(d, d): s for d, s in docs.items()} for q, docs in run.items()}
        self._run = run

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        pass  # the other system ingested already

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        if ask.id not in self._run:
            raise KeyError(f"query {ask.id!r} is not in {self.path.name}")
        scores = self._run[ask.id]
        ids = rank_scores(scores, k)
        return Recalled(tuple(ids), tuple(scores[d] for d in ids))

    def index_bytes(self) -> int | None:
        return None  # the other system's index is not here
