"""LongMemEval (``longmemeval_s`` / ``_m`` / ``_oracle`` JSON) as a memofs Dataset.

Every question scopes its own haystack: namespace = question_id, memories = its haystack sessions
(or their turns).  Memory ids are positional, ``{question_id}:s{j}`` (session j of the haystack) and
``{question_id}:s{j}:t{k}`` (turn k of it): the release names answer sessions ``answer_...``, and
rankings break ties by id, so an id built from the session id would let relevance leak through the
tie-break.  The source's own ``session_id`` is kept in each memory's metadata.  Relevant (1): answer sessions, or turns marked ``has_answer`` (all turns of the
answer sessions when none is marked).  Abstention questions (``*_abs``) have no evidence and are
excluded; they are counted in ``stats``.

``protocol`` (:mod:`memofs_datasets.protocols`) selects the documents, gold and questions: the
default ``memofs`` is the above; ``longmemeval-official`` / ``-419`` and ``lenient`` build what
LongMemEval's ``run_retrieval.py`` builds (:func:`_official_session`).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memofs.files.records import Memory

from .format import Dataset, DatasetError, Query, read_json
from .protocols import LONGMEMEVAL_PROTOCOLS, Protocol, protocol as _protocol

GRANULARITIES = ("session", "turn")
LONGMEMEVAL_LICENCE = "MIT (LongMemEval release); not redistributed here"
_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$")
_REQUIRED = ("question_id", "question_type", "question", "question_date", "haystack_session_ids",
             "haystack_dates", "haystack_sessions", "answer_session_ids")


def parse_longmemeval_date(text: Any) -> datetime:
    """``"2023/05/20 (Sat) 02:21"`` -> 2023-05-20T02:21Z (no timezone in the release; UTC assumed)."""
    m = _DATE.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"expected a date like '2023/05/20 (Sat) 02:21', got {text!r}")
    y, mo, d, h, mi = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=timezone.utc)


def load_longmemeval(path: str | Path, granularity: str = "session", protocol: str = "memofs") -> Dataset:
    """Load one LongMemEval JSON file; ``stats`` counts abstentions, unmatched answer sessions, drops."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    proto = _protocol(protocol, LONGMEMEVAL_PROTOCOLS)
    file = Path(path)
    items = read_json(file)
    if not isinstance(items, list):
        raise DatasetError(file, None, "json", "expected a list of question objects")
    memories: list[Memory] = []
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    stats: dict[str, Any] = {"granularity": granularity, "items": len(items), "abstention_excluded": 0,
                             "unmatched_answer_sessions": [], "dropped_questions": [], "duplicate_session_ids": 0,
                             "fallback_to_session_turns": 0, "questions_by_type": {}, "protocol": proto.name,
                             "keeps_unjudged": proto.keeps_unjudged, "no_gold_questions": []}
    seen: set[str] = set()
    for i, item in enumerate(items):
        qid = _check_item(file, i, item)
        if qid in seen:
            raise DatasetError(file, None, f"[{i}].question_id", f"duplicate question id {qid!r}")
        seen.add(qid)
        if qid.endswith("_abs") and proto.questions != "all":
            stats["abstention_excluded"] += 1
            continue
        fld = f"{qid}"
        try:
            as_of = parse_longmemeval_date(item["question_date"])
        except ValueError as exc:
            raise DatasetError(file, None, f"{fld}.question_date", str(exc)) from None
        sids, dates, sessions = item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
        if not len(sids) == len(dates) == len(sessions):
            raise DatasetError(file, None, f"{fld}.haystack_sessions",
                               f"haystack_session_ids ({len(sids)}), haystack_dates ({len(dates)}) and "
                               f"haystack_sessions ({len(sessions)}) differ in length")
        answer_sids = set(item["answer_session_ids"])
        judged: dict[str, int] = {}
        used: dict[str, int] = {}
        found_answers: set[str] = set()
        for j, (sid, date, turns) in enumerate(zip(sids, dates, sessions)):
            where = f"{fld}.haystack_sessions[{j}]"
            if not isinstance(sid, str) or not sid:
                raise DatasetError(file, None, f"{fld}.haystack_session_ids[{j}]", "expected a non-empty string")
            try:
                created = parse_longmemeval_date(date)
            except ValueError as exc:
                raise DatasetError(file, None, f"{fld}.haystack_dates[{j}]", str(exc)) from None
            _check_turns(file, where, turns)
            # ids are positional (label-free); a repeated source id is only counted
            used[sid] = used.get(sid, 0) + 1
            key = f"s{j}"
            if used[sid] > 1:
                stats["duplicate_session_ids"] += 1
            is_answer = sid in answer_sids
            if is_answer:
                found_answers.add(sid)
            meta = {"session_id": sid, "session_index": j}
            if proto.family != "memofs":
                mems, gold = _official_session(file, where, qid, key, turns, sid, granularity, proto, created, meta)
                memories += mems
                judged.update((m, 1) for m in gold)
            elif granularity == "session":
                mid = f"{qid}:{key}"
                text = "\n".join(f"{t['role']}: {t['content']}" for t in turns)
                memories.append(Memory(id=mid, text=text, kind="note", created_at=created, namespace=qid, metadata=meta))
                if is_answer:
                    judged[mid] = 1
            else:
                ids = [f"{qid}:{key}:t{k}" for k in range(len(turns))]
                for k, (mid, t) in enumerate(zip(ids, turns)):
                    memories.append(Memory(id=mid, text=f"{t['role']}: {t['content']}", kind="note", created_at=created,
                                           namespace=qid, metadata={**meta, "turn": k, "role": t["role"]}))
                marked = [mid for mid, t in zip(ids, turns) if t.get("has_answer") is True]
                if marked:
                    judged.update((m, 1) for m in marked)
                elif is_answer:
                    stats["fallback_to_session_turns"] += 1
                    judged.update((m, 1) for m in ids)
        for sid in sorted(answer_sids - found_answers):
            stats["unmatched_answer_sessions"].append((qid, sid))
        qtype = item["question_type"]
        stats["questions_by_type"][qtype] = stats["questions_by_type"].get(qtype, 0) + 1
        if not judged:
            if not proto.keeps_unjudged:
                stats["dropped_questions"].append(qid)
                continue
            stats["no_gold_questions"].append(qid)
        qrels[qid] = judged
        queries.append(Query(id=qid, text=item["question"], task_type="general", category=qtype, split=None,
                             as_of=as_of, scope=qid, metadata={"answer": item.get("answer")}))
    if not queries or not any(qrels.values()):
        raise DatasetError(file, None, "questions", "no answerable question found")
    used_ns = {q.scope for q in queries}
    memories = [m for m in memories if m.namespace in used_ns]  # haystacks of dropped questions serve no query
    stats["questions"] = len(queries)
    stats["memories"] = len(memories)
    return Dataset(name=f"longmemeval-{file.stem}", version=granularity, as_of=max(q.as_of for q in queries),
                   licence=LONGMEMEVAL_LICENCE,
                   description=f"LongMemEval {file.name}: one haystack per question, {granularity} memories",
                   memories=tuple(memories), queries=tuple(queries), qrels=qrels, stats=stats)


def _official_session(file: Path, where: str, qid: str, key: str, turns: list, sid: str, granularity: str,
                      proto: Protocol, created: datetime, meta: dict) -> tuple[list[Memory], list[str]]:
    """One haystack session as LongMemEval's ``process_item_flat_index`` builds it, and its gold ids.

    Only user turns are documents. Session level: the user turns' contents joined by one space
    (the empty document when there is none), gold when the session id contains ``answer`` and a
    user turn has ``has_answer``. Turn level: one document per user turn, ``t{k}`` counting every
    turn of the session; gold when the session id contains ``answer`` and the turn has
    ``has_answer``. The official code renames an answer session's other turns ``noans_...``, so
    its turn-to-session metrics see them as another session: ``protocol_session`` keeps that key
    (the lenient preset keys by session only). Ids stay positional: nothing ranked sees ``answer``."""
    is_answer = "answer" in sid  # the official rule reads the session id, not answer_session_ids
    users = [(k, t) for k, t in enumerate(turns) if t["role"] == "user"]
    if is_answer:
        for k, t in users:
            if not isinstance(t.get("has_answer"), bool):
                raise DatasetError(file, None, f"{where}[{k}].has_answer",
                                   "a user turn of an answer session needs has_answer true or false")
    if granularity == "session":
        mid = f"{qid}:{key}"
        gold = [mid] if is_answer and any(t["has_answer"] for _, t in users) else []
        text = " ".join(t["content"] for _, t in users)
        return [Memory(id=mid, text=text, kind="note", created_at=created, namespace=qid,
                       metadata={**meta, "protocol_session": key})], gold
    mems, gold = [], []
    for k, t in users:
        mid = f"{qid}:{key}:t{k}"
        hit = is_answer and t["has_answer"]
        split = proto.family == "official" and is_answer and not hit
        mems.append(Memory(id=mid, text=t["content"], kind="note", created_at=created, namespace=qid,
                           metadata={**meta, "turn": k, "role": "user",
                                     "protocol_session": f"{key}:noans" if split else key}))
        if hit:
            gold.append(mid)
    return mems, gold


def _check_item(file: Path, i: int, item: Any) -> str:
    if not isinstance(item, dict):
        raise DatasetError(file, None, f"[{i}]", "expected a question object")
    qid = item.get("question_id")
    if not isinstance(qid, str) or not qid:
        raise DatasetError(file, None, f"[{i}].question_id", "missing or not a string")
    for key in _REQUIRED:
        if key not in item:
            raise DatasetError(file, None, f"{qid}.{key}", "missing required field")
    for key in ("question_type", "question"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise DatasetError(file, None, f"{qid}.{key}", "expected a non-empty string")
    for key in ("haystack_session_ids", "haystack_dates", "haystack_sessions", "answer_session_ids"):
        if not isinstance(item[key], list):
            raise DatasetError(file, None, f"{qid}.{key}", "expected a list")
    return qid


def _check_turns(file: Path, where: str, turns: Any) -> None:
    if not isinstance(turns, list):
        raise DatasetError(file, None, where, "expected a list of turns")
    for k, t in enumerate(turns):
        if not isinstance(t, dict):
            raise DatasetError(file, None, f"{where}[{k}]", "expected a turn object {role, content}")
        for name in ("role", "content"):
            if not isinstance(t.get(name), str):
                raise DatasetError(file, None, f"{where}[{k}].{name}", "missing or not a string")


def export_longmemeval(path: str | Path, dest: str | Path, **kwargs: Any) -> Path:
    """Load a LongMemEval file and write it in the memofs format."""
    from .format import write_dataset

    return write_dataset(load_longmemeval(path, **kwargs), dest)
