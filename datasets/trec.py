"""TREC-style collections (topics + qrels + corpus) as a memofs Dataset.

Topics: classic SGML (``<top> <num> Number: 301 <title> ... <desc> ... </top>``) or TSV ``qid<TAB>text``.
Qrels: ``qid iteration docid grade``.  Corpus: JSONL ``{id|_id|docno, text, title?}`` or TSV
``id<TAB>text``.  Like BEIR: namespace ``default``, no timestamps, grades clipped into 0-3.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from memofs.files.records import Memory

from .beir import NO_TIME_AS_OF, assemble, doc_memory, field_str, read_jsonl
from .format import Dataset, DatasetError, Query

TOPIC_FIELDS = ("title", "desc", "title+desc")
_TAG = re.compile(r"<(/?)(top|num|title|desc|narr)>", re.I)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def read_topics(path: Path, field: str = "title") -> dict[str, str]:
    """``{qid: text}`` from an SGML or TSV topics file (SGML is detected by a ``<top>`` tag)."""
    if field not in TOPIC_FIELDS:
        raise ValueError(f"field must be one of {TOPIC_FIELDS}, got {field!r}")
    if not path.is_file():
        raise DatasetError(path, None, "file", "no such file")
    text = path.read_text(encoding="utf-8", errors="replace")
    return _sgml_topics(path, text, field) if re.search(r"<top>", text, re.I) else _tsv_topics(path, text)


def _sgml_topics(path: Path, text: str, field: str) -> dict[str, str]:
    topics: dict[str, str] = {}
    for block in re.finditer(r"<top>(.*?)(?:</top>|(?=<top>)|\Z)", text, re.I | re.S):
        body, start = block.group(1), block.start(1)
        line = _line_of(text, block.start())
        if not block.group(0).lower().rstrip().endswith("</top>"):
            raise DatasetError(path, line, "top", "topic not closed with </top> (truncated file?)")
        parts: dict[str, str] = {}
        tags = list(_TAG.finditer(body))
        for k, t in enumerate(tags):
            if t.group(1):  # closing tag
                continue
            end = tags[k + 1].start() if k + 1 < len(tags) else len(body)
            parts[t.group(2).lower()] = body[t.end():end]
        num = re.sub(r"^\s*Number:\s*", "", parts.get("num", ""), flags=re.I).strip()
        if not num:
            raise DatasetError(path, _line_of(text, start), "num", "topic without a <num>")
        title = " ".join(re.sub(r"^\s*Topic:\s*", "", parts.get("title", ""), flags=re.I).split())
        desc = " ".join(re.sub(r"^\s*Description:\s*", "", parts.get("desc", ""), flags=re.I).split())
        chosen = {"title": title, "desc": desc, "title+desc": f"{title} {desc}".strip()}[field]
        if not chosen:
            raise DatasetError(path, _line_of(text, start), field, f"topic {num} has an empty {field}")
        if num in topics:
            raise DatasetError(path, line, "num", f"duplicate topic number {num!r}")
        topics[num] = chosen
    if not topics:
        raise DatasetError(path, None, "top", "no <top> topic found")
    return topics


def _tsv_topics(path: Path, text: str) -> dict[str, str]:
    topics: dict[str, str] = {}
    for no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        qid, sep, qtext = raw.partition("\t")
        if not sep or not qid.strip() or not qtext.strip():
            raise DatasetError(path, no, "columns", "expected 'qid<TAB>text'")
        if qid.strip() in topics:
            raise DatasetError(path, no, "qid", f"duplicate topic id {qid.strip()!r}")
        topics[qid.strip()] = qtext.strip()
    if not topics:
        raise DatasetError(path, None, "topics", "no topic found")
    return topics


def read_trec_qrels(path: Path) -> list[tuple[str, str, int, Path, int]]:
    """``qid iteration docid grade`` lines (whitespace separated)."""
    if not path.is_file():
        raise DatasetError(path, None, "file", "no such file")
    out = []
    for no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        cols = raw.split()
        if len(cols) != 4:
            raise DatasetError(path, no, "columns", f"expected 4 columns 'qid iteration docid grade', got {len(cols)}")
        if not re.fullmatch(r"[+-]?\d+", cols[3]):
            raise DatasetError(path, no, "grade", f"expected an integer, got {cols[3]!r}")
        out.append((cols[0], cols[2], int(cols[3]), path, no))
    return out


def read_corpus(path: Path) -> dict[str, Memory]:
    """Documents from JSONL (``.jsonl``/``.json`` or a first character ``{``) or ``id<TAB>text`` TSV."""
    if not path.is_file():
        raise DatasetError(path, None, "file", "no such file")
    docs: dict[str, Memory] = {}
    with open(path, encoding="utf-8") as f:
        head = f.read(4096).lstrip()
    if path.suffix in (".jsonl", ".json") or head.startswith("{"):
        for no, obj in read_jsonl(path):
            did = field_str(obj, ("id", "_id", "docno"), path, no)
            text = field_str(obj, ("text", "contents", "body"), path, no)
            title = field_str(obj, ("title",), path, no, required=False)
            if did in docs:
                raise DatasetError(path, no, "id", f"duplicate document id {did!r}")
            docs[did] = doc_memory(len(docs), did, text, title)
    else:
        for no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not raw.strip():
                continue
            did, sep, text = raw.partition("\t")
            if not sep or not did.strip():
                raise DatasetError(path, no, "columns", "expected 'id<TAB>text'")
            if did.strip() in docs:
                raise DatasetError(path, no, "id", f"duplicate document id {did.strip()!r}")
            docs[did.strip()] = doc_memory(len(docs), did.strip(), text.strip(), None)
    return docs


def load_trec(topics: str | Path, qrels: str | Path, corpus: str | Path, *, name: str = "trec",
              topic_field: str = "title", licence: str = "see the collection's own licence",
              as_of: datetime = NO_TIME_AS_OF) -> Dataset:
    """Load a TREC collection; topics without a relevant judged document in the corpus are left out."""
    topic_text = read_topics(Path(topics), topic_field)
    stats: dict[str, Any] = {"topic_field": topic_field, "topics": len(topic_text)}
    queries = {qid: Query(id=qid, text=t, category="trec", metadata={}) for qid, t in topic_text.items()}
    docs = read_corpus(Path(corpus))
    return assemble(name, topic_field, f"TREC collection {name} ({topic_field} topics)", licence, docs, queries,
                    read_trec_qrels(Path(qrels)), as_of, stats)


def export_trec(topics: str | Path, qrels: str | Path, corpus: str | Path, dest: str | Path, **kwargs: Any) -> Path:
    """Load a TREC collection and write it in the memofs format (``public = true``)."""
    from .format import write_dataset

    return write_dataset(load_trec(topics, qrels, corpus, **kwargs), dest)
