"""LoCoMo (long conversational memory) as a memofs Dataset.

Accepts ``locomo10.json`` (a list of conversation records) or a ``by-conversation/`` folder of flattened
per-conversation files (``26.json``, ...), or a folder holding either.  Each conversation is one
namespace; its questions are scoped to it.  Units: dialogue turns (default), observations (facts
extracted per turn; relevant when they come from an evidence turn) or session summaries (relevant
when the session contains an evidence turn).  Category 5 (adversarial) is excluded by default.

Memory ids are positional within a conversation: ``{conv}:s{j}:t{k}`` (turn k of the j-th session,
both 0-based, sessions in ``session_N`` order), ``{conv}:s{j}`` (summary), ``{conv}:s{j}:o{k}``
(observation).  Rankings break ties by id, so no source id (``dia_id``) may shape one; the
``dia_id`` stays in the memory's metadata.  Evidence is matched on the exact ``dia_id`` first, then
on the canonical ``D<session>:<turn>`` forms found inside it (see :func:`evidence_ids`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memofs.files.records import Memory

from .format import Dataset, DatasetError, Query, read_json
from .protocols import LOCOMO_PROTOCOLS, protocol as _protocol

UNITS = ("turn", "observation", "summary")
LOCOMO_LICENCE = "CC BY-NC 4.0 (LoCoMo release); not redistributed here"
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], start=1)}
_DATE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_SESSION = re.compile(r"^session_(\d+)$")
_DIA = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def parse_locomo_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> 2023-05-08T13:56Z (the release gives no timezone; UTC assumed)."""
    m = _DATE.match(text) if isinstance(text, str) else None
    if m is None or m.group(5).lower() not in _MONTHS:
        raise ValueError(f"expected a date like '1:56 pm on 8 May, 2023', got {text!r}")
    hour, minute = int(m.group(1)), int(m.group(2))
    if not 1 <= hour <= 12:
        raise ValueError(f"hour out of range in {text!r}")
    hour = hour % 12 + (12 if m.group(3).lower() == "pm" else 0)
    return datetime(int(m.group(6)), _MONTHS[m.group(5).lower()], int(m.group(4)), hour, minute, tzinfo=timezone.utc)


def evidence_ids(raw: Any) -> list[str]:
    """Canonical dia_ids in one evidence entry.  The release has entries like ``"D8:6; D9:17"``,
    ``"D:11:26"`` and ``"D30:05"``: every ``D<session>:<turn>`` inside is taken, zeros stripped."""
    items = raw if isinstance(raw, list) else [raw]
    out: list[str] = []
    for item in items:
        if isinstance(item, str):
            out += [f"D{int(s)}:{int(t)}" for s, t in _DIA.findall(item)]
    return out


@dataclass(frozen=True)
class _Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None


@dataclass(frozen=True)
class _Session:
    number: int
    date: datetime
    turns: tuple[_Turn, ...]


def load_locomo(path: str | Path, unit: str = "turn", categories: tuple[int, ...] = (1, 2, 3, 4),
                protocol: str = "memofs") -> Dataset:
    """Load LoCoMo; ``stats`` reports totals, unmatched evidence ``(qid, evidence)`` and dropped questions.

    ``protocol`` ``locomo-paper`` keeps every category (``-no-adv``: 1-4) and every question,
    those without usable evidence included (the paper's R@k scores them 1; the ranx metrics
    leave them out); turn units only, the paper's R@k reading retrieved dia_ids."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    proto = _protocol(protocol, LOCOMO_PROTOCOLS)
    if proto.family == "locomo-paper":
        if unit != "turn":
            raise ValueError(f"protocol {protocol!r} reads retrieved dia_ids: unit must be 'turn', got {unit!r}")
        categories = (1, 2, 3, 4, 5) if proto.name == "locomo-paper" else (1, 2, 3, 4)
    convs = sorted(_sources(Path(path)), key=lambda c: _natural(c[0]))
    seen: set[str] = set()
    last_dates: list[datetime] = []
    memories: list[Memory] = []
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    stats: dict[str, Any] = {"unit": unit, "conversations": 0, "sessions": 0, "turns": 0, "questions_total": 0,
                             "questions_by_category": {}, "excluded_questions": 0, "unmatched_evidence": [],
                             "normalised_evidence": [], "dropped_questions": [], "dropped_no_unit": [],
                             "protocol": proto.name, "keeps_unjudged": proto.keeps_unjudged, "no_gold_questions": []}
    for conv_id, flat, file in convs:
        if conv_id in seen:
            raise DatasetError(file, None, "sample_id", f"conversation {conv_id!r} appears twice")
        seen.add(conv_id)
        sessions = _sessions(flat, conv_id, file)
        stats["conversations"] += 1
        stats["sessions"] += len(sessions)
        stats["turns"] += sum(len(s.turns) for s in sessions)
        units, by_dia = _units(flat, conv_id, file, sessions, unit)
        memories += units
        turn_ids = {c for s in sessions for t in s.turns for c in (t.dia_id, *evidence_ids(t.dia_id))}
        as_of = max(s.date for s in sessions)
        last_dates.append(as_of)
        qa = flat.get("qa")
        if not isinstance(qa, list):
            raise DatasetError(file, None, f"{conv_id}.qa", "missing or not a list")
        for i, item in enumerate(qa):
            fld = f"{conv_id}.qa[{i}]"
            if not isinstance(item, dict):
                raise DatasetError(file, None, fld, "expected an object")
            cat, question, evidence = item.get("category"), item.get("question"), item.get("evidence")
            if not isinstance(cat, int) or isinstance(cat, bool):
                raise DatasetError(file, None, f"{fld}.category", f"expected an integer category, got {cat!r}")
            if not isinstance(question, str) or not question.strip():
                raise DatasetError(file, None, f"{fld}.question", "missing or empty question")
            if not isinstance(evidence, list):
                raise DatasetError(file, None, f"{fld}.evidence", "expected a list of dia_ids")
            stats["questions_total"] += 1
            by_cat = stats["questions_by_category"]
            by_cat[cat] = by_cat.get(cat, 0) + 1
            if cat not in categories:
                stats["excluded_questions"] += 1
                continue
            qid = f"{conv_id}:q{i}"
            matched: list[str] = []
            for ev in evidence:
                ids = resolve_evidence(ev, turn_ids)
                if not ids:
                    stats["unmatched_evidence"].append((qid, ev))
                    continue
                if ids != [ev]:
                    stats["normalised_evidence"].append((qid, ev, ids))
                matched += ids
            judged = {mid: 1 for d in matched for mid in by_dia.get(d, ())}
            if not judged and proto.keeps_unjudged:
                stats["no_gold_questions"].append(qid)
            elif not matched:
                stats["dropped_questions"].append(qid)
                continue
            elif not judged:  # e.g. no observation was extracted from the evidence turns
                stats["dropped_no_unit"].append(qid)
                continue
            qrels[qid] = judged
            queries.append(Query(id=qid, text=question, task_type="general", category=f"locomo-cat{cat}",
                                 split=None, as_of=as_of, scope=conv_id,
                                 metadata={"locomo_category": cat, "answer": item.get("answer"),
                                           "evidence": list(evidence)}))
    if not memories:
        raise DatasetError(path, None, "conversations", "no conversation found")
    stats["questions"] = len(queries)
    stats["memories"] = len(memories)
    return Dataset(
        name="locomo", version=f"locomo10-{unit}", as_of=max(last_dates), licence=LOCOMO_LICENCE,
        description=f"LoCoMo conversations as {unit} memories; questions of categories {list(categories)}",
        memories=tuple(memories), queries=tuple(queries), qrels=qrels, stats=stats)


def resolve_evidence(ev: Any, known: set[str] | dict[str, Any]) -> list[str]:
    """The known dia_ids one evidence entry names: itself when it is one verbatim, else the
    canonical ``D<s>:<t>`` ids inside it that are known (``"D8:6; D9:17"``, ``"D30:05"``)."""
    if isinstance(ev, str) and ev in known:
        return [ev]
    return [d for d in evidence_ids(ev) if d in known]


def _natural(conv_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", conv_id))


def _sources(path: Path) -> list[tuple[str, dict, Path]]:
    """``(conversation id, flattened record, file)`` for every conversation under ``path``."""
    if path.is_dir():
        if (path / "locomo10.json").is_file():
            return _sources(path / "locomo10.json")
        folder = path / "by-conversation" if (path / "by-conversation").is_dir() else path
        files = sorted(folder.glob("*.json"))
        if not files:
            raise DatasetError(path, None, "path", "no locomo10.json, by-conversation/ or *.json files inside")
        return [_flat_file(f) for f in files]
    data = read_json(path)
    if isinstance(data, dict):
        return [_flat_file(path, data)]
    if not isinstance(data, list):
        raise DatasetError(path, None, "json", "expected a list of conversation records")
    out = []
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise DatasetError(path, None, f"[{i}]", "expected a conversation object")
        sid, conv = rec.get("sample_id"), rec.get("conversation")
        if not isinstance(sid, str) or not sid:
            raise DatasetError(path, None, f"[{i}].sample_id", "missing or not a string")
        if not isinstance(conv, dict):
            raise DatasetError(path, None, f"{sid}.conversation", "missing or not an object")
        flat: dict[str, Any] = dict(conv)
        for key in ("observation", "session_summary", "event_summary"):
            part = rec.get(key, {})
            if not isinstance(part, dict):
                raise DatasetError(path, None, f"{sid}.{key}", "expected an object")
            flat.update(part)
        flat["qa"] = rec.get("qa")
        out.append((sid, flat, path))
    return out


def _flat_file(file: Path, data: Any = None) -> tuple[str, dict, Path]:
    data = read_json(file) if data is None else data
    if not isinstance(data, dict):
        raise DatasetError(file, None, "json", "expected a flattened conversation object")
    sid = data.get("sample_id")
    conv_id = sid if isinstance(sid, str) and sid else f"conv-{file.stem}"
    return conv_id, data, file


def _sessions(flat: dict, conv_id: str, file: Path) -> list[_Session]:
    sessions: list[_Session] = []
    for key, turns in flat.items():
        m = _SESSION.match(key)
        if m is None:
            continue
        n = int(m.group(1))
        if not isinstance(turns, list):
            raise DatasetError(file, None, f"{conv_id}.{key}", "expected a list of turns")
        if not turns:
            continue
        date_key = f"{key}_date_time"
        if date_key not in flat:
            raise DatasetError(file, None, f"{conv_id}.{date_key}", "missing session date")
        try:
            date = parse_locomo_date(flat[date_key])
        except ValueError as exc:
            raise DatasetError(file, None, f"{conv_id}.{date_key}", str(exc)) from None
        parsed = []
        for i, t in enumerate(turns):
            fld = f"{conv_id}.{key}[{i}]"
            if not isinstance(t, dict):
                raise DatasetError(file, None, fld, "expected a turn object")
            for name in ("dia_id", "speaker", "text"):
                if not isinstance(t.get(name), str):
                    raise DatasetError(file, None, f"{fld}.{name}", "missing or not a string")
            cap = t.get("blip_caption")
            parsed.append(_Turn(t["dia_id"], t["speaker"], t["text"], cap if isinstance(cap, str) and cap else None))
        sessions.append(_Session(n, date, tuple(parsed)))
    if not sessions:
        raise DatasetError(file, None, f"{conv_id}.session_1", "conversation has no sessions with turns")
    return sorted(sessions, key=lambda s: s.number)


def _units(flat: dict, conv_id: str, file: Path, sessions: list[_Session], unit: str
           ) -> tuple[list[Memory], dict[str, list[str]]]:
    """The memories of one conversation and, per evidence dia_id, the memory ids it makes relevant."""
    memories: list[Memory] = []
    by_dia: dict[str, list[str]] = {}
    dias_seen: set[str] = set()
    for j, s in enumerate(sessions):
        if unit == "turn":
            for k, t in enumerate(s.turns):
                if t.dia_id in dias_seen:
                    raise DatasetError(file, None, f"{conv_id}.session_{s.number}", f"duplicate dia_id {t.dia_id!r}")
                dias_seen.add(t.dia_id)
                mid = f"{conv_id}:s{j}:t{k}"
                text = f"{t.speaker}: {t.text}" + (f" [image: {t.caption}]" if t.caption else "")
                memories.append(Memory(id=mid, text=text, kind="note", created_at=s.date, namespace=conv_id,
                                       metadata={"session": s.number, "dia_id": t.dia_id, "speaker": t.speaker}))
                by_dia.setdefault(t.dia_id, []).append(mid)
        elif unit == "summary":
            key = f"session_{s.number}_summary"
            text = flat.get(key)
            if not isinstance(text, str) or not text.strip():
                raise DatasetError(file, None, f"{conv_id}.{key}", "missing session summary (needed for unit='summary')")
            mid = f"{conv_id}:s{j}"
            memories.append(Memory(id=mid, text=text, kind="summary", created_at=s.date, namespace=conv_id,
                                   metadata={"session": s.number}))
            for t in s.turns:
                by_dia.setdefault(t.dia_id, []).append(mid)
        else:
            key = f"session_{s.number}_observation"
            obs = flat.get(key)
            if not isinstance(obs, dict):
                raise DatasetError(file, None, f"{conv_id}.{key}", "missing observations (needed for unit='observation')")
            k = 0
            for speaker, items in obs.items():
                if not isinstance(items, list):
                    raise DatasetError(file, None, f"{conv_id}.{key}.{speaker}", "expected a list of [text, dia_id]")
                for i, item in enumerate(items):
                    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                        raise DatasetError(file, None, f"{conv_id}.{key}.{speaker}[{i}]", "expected [text, dia_id]")
                    mid = f"{conv_id}:s{j}:o{k}"
                    k += 1
                    dias = [item[1]] if isinstance(item[1], str) and not evidence_ids(item[1]) else evidence_ids(item[1])
                    memories.append(Memory(id=mid, text=item[0], kind="note", created_at=s.date, namespace=conv_id,
                                           metadata={"session": s.number, "speaker": speaker, "dia_ids": dias}))
                    for d in dict.fromkeys([*([item[1]] if isinstance(item[1], str) else []), *dias]):
                        by_dia.setdefault(d, []).append(mid)
    # evidence is matched verbatim or on canonical ids ("D30:05" -> "D30:5"): key the map both ways
    canon: dict[str, list[str]] = {}
    for d, mids in by_dia.items():
        for c in dict.fromkeys([d, *evidence_ids(d)]):
            canon.setdefault(c, []).extend(m for m in mids if m not in canon.get(c, []))
    return memories, canon


def export_locomo(path: str | Path, dest: str | Path, **kwargs: Any) -> Path:
    """Load LoCoMo and write it in the memofs format (outside the repository: the data is CC BY-NC)."""
    from .format import write_dataset

    return write_dataset(load_locomo(path, **kwargs), dest)
