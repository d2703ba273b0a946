"""BEIR-layout corpora (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) as a memofs Dataset.

Public IR corpora carry no timestamps: memories get ``created_at=None`` (allowed only for these
loaders; ``write_dataset`` marks the export ``public = true``) and one namespace, ``default``.
Graded relevance is kept; grades above 3 are clipped to 3 and negative grades (junk/spam) set to 0,
both counted in ``stats["notes"]``.  Memory ids are positional (``d0``, ``d1``, ... in corpus order);
the corpus's own id is ``metadata["source_id"]`` (the TREC loader shares this).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memofs.files.records import Memory

from .format import MAX_RELEVANCE, Dataset, DatasetError, Query

NO_TIME_AS_OF = datetime(1970, 1, 1, tzinfo=timezone.utc)
"""Placeholder "now" for corpora without timestamps (recency and expiry never apply to them)."""
NAMESPACE = "default"


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line_no, object)`` per non-blank line; a bad line raises DatasetError naming it."""
    if not path.is_file():
        raise DatasetError(path, None, "file", "no such file")
    with open(path, encoding="utf-8") as f:
        for no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DatasetError(path, no, "json", f"invalid JSON: {exc.msg} (column {exc.colno})") from None
            if not isinstance(obj, dict):
                raise DatasetError(path, no, "json", "expected a JSON object")
            yield no, obj


def field_str(obj: dict, keys: tuple[str, ...], path: Path, line: int, *, required: bool = True) -> str | None:
    """The first of ``keys`` present in ``obj`` as a string (ids may be given as numbers)."""
    for key in keys:
        if key in obj:
            v = obj[key]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                v = str(v)
            if not isinstance(v, str):
                raise DatasetError(path, line, key, f"expected a string, got {type(v).__name__}")
            return v
    if required:
        raise DatasetError(path, line, keys[0], "missing required field")
    return None


def doc_memory(position: int, doc_id: str, text: str, title: str | None) -> Memory:
    """The ``position``-th corpus document as a memory: id ``d{position}`` (positional, so a
    tie-break by id never sees the corpus's own ids, which may encode labels), the source id in
    ``metadata["source_id"]``, text ``title\\ntext`` when titled, kind ``reference``, no timestamp."""
    body = f"{title}\n{text}" if title else text
    meta = {"source_id": doc_id, **({"title": title} if title else {})}
    return Memory(id=f"d{position}", text=body, kind="reference", created_at=None, namespace=NAMESPACE, metadata=meta)


def clip_relevance(rel: int, stats: dict) -> int:
    """Map a grade into 0-3: ``>3 -> 3`` and ``<0 -> 0``, counting each in ``stats``."""
    if rel > MAX_RELEVANCE:
        stats["clipped_high"] = stats.get("clipped_high", 0) + 1
        return MAX_RELEVANCE
    if rel < 0:
        stats["clipped_negative"] = stats.get("clipped_negative", 0) + 1
        return 0
    return rel


def assemble(name: str, version: str, description: str, licence: str, docs: dict[str, Memory],
             topics: dict[str, Query], raw_qrels: list[tuple[str, str, int, Path, int]], as_of: datetime,
             stats: dict[str, Any]) -> Dataset:
    """Join docs (keyed by source id), topics and ``(qid, doc_id, grade, file, line)`` judgements
    (qrels come out keyed by memory id); keep the queries with at least one relevant (>= 1) judged
    document, in topic order."""
    qrels: dict[str, dict[str, int]] = {}
    stats.setdefault("unknown_query_judgements", 0)
    stats.setdefault("unknown_doc_judgements", 0)
    for qid, did, grade, file, line in raw_qrels:
        if qid not in topics:
            stats["unknown_query_judgements"] += 1
            continue
        if did not in docs:
            stats["unknown_doc_judgements"] += 1
            continue
        qrels.setdefault(qid, {})[docs[did].id] = clip_relevance(grade, stats)
    notes = []
    if stats.get("clipped_high"):
        notes.append(f"{stats['clipped_high']} grade(s) above {MAX_RELEVANCE} clipped to {MAX_RELEVANCE}")
    if stats.get("clipped_negative"):
        notes.append(f"{stats['clipped_negative']} negative grade(s) set to 0")
    stats["notes"] = notes
    queries = [q for qid, q in topics.items() if any(r >= 1 for r in qrels.get(qid, {}).values())]
    stats["queries_without_relevant"] = len(topics) - len(queries)
    if not queries:
        raise DatasetError(raw_qrels[0][3] if raw_qrels else name, None, "qrels",
                           "no query has a judged-relevant document in the corpus")
    keep = {q.id for q in queries}
    qrels = {qid: j for qid, j in qrels.items() if qid in keep}
    stats.update(memories=len(docs), queries=len(queries))
    return Dataset(name=name, version=version, as_of=as_of, licence=licence, description=description,
                   memories=tuple(docs.values()), queries=tuple(queries), qrels=qrels, stats=stats)


def read_qrels_3col(path: Path) -> list[tuple[str, str, int, Path, int]]:
    """BEIR qrels: tab-separated ``query-id corpus-id score`` with an optional header line."""
    if not path.is_file():
        raise DatasetError(path, None, "file", "no such file")
    out = []
    for no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        cols = raw.split("\t") if "\t" in raw else raw.split()
        cols = [c.strip() for c in cols]
        if no == 1 and len(cols) == 3 and not re.fullmatch(r"[+-]?\d+", cols[2]):
            continue  # header "query-id corpus-id score"
        if len(cols) != 3:
            raise DatasetError(path, no, "columns", f"expected 3 columns 'query-id corpus-id score', got {len(cols)}")
        if not re.fullmatch(r"[+-]?\d+", cols[2]):
            raise DatasetError(path, no, "score", f"expected an integer, got {cols[2]!r}")
        out.append((cols[0], cols[1], int(cols[2]), path, no))
    return out


def load_beir(path: str | Path, split: str = "test", *, name: str | None = None,
              licence: str = "see the corpus's own licence", as_of: datetime = NO_TIME_AS_OF) -> Dataset:
    """Load a BEIR folder; queries without a relevant judgement in ``qrels/<split>.tsv`` are left out."""
    root = Path(path)
    stats: dict[str, Any] = {"split": split}
    docs: dict[str, Memory] = {}
    corpus = root / "corpus.jsonl"
    for no, obj in read_jsonl(corpus):
        did = field_str(obj, ("_id",), corpus, no)
        text = field_str(obj, ("text",), corpus, no)
        title = field_str(obj, ("title",), corpus, no, required=False)
        if did in docs:
            raise DatasetError(corpus, no, "_id", f"duplicate document id {did!r}")
        docs[did] = doc_memory(len(docs), did, text, title)
    topics: dict[str, Query] = {}
    qfile = root / "queries.jsonl"
    for no, obj in read_jsonl(qfile):
        qid = field_str(obj, ("_id",), qfile, no)
        text = field_str(obj, ("text",), qfile, no)
        if qid in topics:
            raise DatasetError(qfile, no, "_id", f"duplicate query id {qid!r}")
        if not text.strip():
            raise DatasetError(qfile, no, "text", "empty query text")
        topics[qid] = Query(id=qid, text=text, category=f"beir-{split}", metadata={"beir_split": split})
    raw = read_qrels_3col(root / "qrels" / f"{split}.tsv")
    return assemble(name or root.name, split, f"BEIR corpus {root.name}, split {split}", licence, docs, topics,
                    raw, as_of, stats)


def export_beir(path: str | Path, dest: str | Path, **kwargs: Any) -> Path:
    """Load a BEIR folder and write it in the memofs format (``public = true``)."""
    from .format import write_dataset

    return write_dataset(load_beir(path, **kwargs), dest)
