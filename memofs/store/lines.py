"""Reading the store's JSONL files: numbered lines, a torn last line skipped with a warning, a
malformed line elsewhere refused naming file and line; memory lines decoded by the one
``memories.jsonl`` codec (:mod:`memofs.files.memory_lines`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from memofs.files import memory_lines, safe_json
from memofs.files.records import Memory
from memofs.files.sidecar import PrefixStamp
from memofs.store.errors import StoreError

log = logging.getLogger("memofs.store")


# ---------------------------------------------------------------------- low-level file I/O
def read_jsonl(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """``[(line number, object)]`` and warnings. A malformed *last* line (a crash
    mid-write) is skipped with a warning; a malformed line elsewhere raises
    :class:`StoreError` naming the file and line. Blank lines are skipped."""
    rows, warnings, _ = read_jsonl_from(path)
    return rows, warnings


def read_jsonl_from(path: Path, after: PrefixStamp | None = None
                    ) -> tuple[list[tuple[int, dict[str, Any]]], list[str], PrefixStamp | None]:
    """:func:`read_jsonl` of the lines after the prefix ``after`` covers (all lines when
    None), numbered from there, plus the stamp of the complete lines read up to now (an
    unterminated last line is left for the next read); no stamp when the file is missing."""
    start, first = (after.offset, after.lineno) if after is not None else (0, 0)
    try:
        fd, st = safe_json.open_regular(path)
    except FileNotFoundError:
        return [], [], None
    with os.fdopen(fd, "rb") as fh:
        head = b""
        if start:
            fh.seek(max(0, start - 64))
            head = fh.read(min(64, start))
        data = fh.read(st.st_size - start)
    lines = data.split(b"\n")
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    rows: list[tuple[int, dict[str, Any]]] = []
    warnings: list[str] = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = safe_json.parse(raw, f"{path}:{first + i + 1}", expect=dict)
        except safe_json.JSONFileError as exc:
            if i == last:
                msg = f"{exc.where}: skipped a torn last line (crash mid-write?): {exc.reason}"
                log.warning(msg)
                warnings.append(msg)
                continue
            raise StoreError(str(exc)) from None
        rows.append((first + i + 1, obj))
    complete = data.rfind(b"\n") + 1
    stamp = PrefixStamp.of(st, (head + data[:complete])[-64:], start + complete, first + data.count(b"\n", 0, complete))
    return rows, warnings, stamp


def memory_from_row(row: dict[str, Any], where: str) -> Memory:
    """Validate one memories.jsonl row (:func:`memofs.files.memory_lines.memory_from_json`);
    a refusal raises :class:`StoreError` naming ``where`` (file:line) and the field."""
    try:
        return memory_lines.memory_from_json(row, where)
    except memory_lines.MemoryLineError as exc:
        raise StoreError(str(exc)) from None
