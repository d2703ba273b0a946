"""The loader's validation helpers: every defect is an :class:`Issue` naming file, 1-based
line and field; :class:`DatasetError` carries them all (``path:line: field: message``)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from memofs.files.timestamps import parse_iso

from .dataset import _FILE_ORDER


@dataclass(frozen=True)
class Issue:
    """One defect: the file (relative to the dataset root where possible), 1-based line, field, message."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.field}: {self.message}"


class DatasetError(ValueError):
    """A defective dataset.  ``str`` is ``path:line: field: message`` of the first defect; ``errors``
    holds every defect found (the loader collects them all before raising)."""

    def __init__(self, file: str | os.PathLike, line: int | None, field: str, message: str,
                 errors: list[Issue] | None = None) -> None:
        self.file = str(file)
        self.line = line
        self.field = field
        self.message = message
        first = Issue(self.file, line, field, message)
        self.errors: list[Issue] = errors if errors else [first]
        text = str(first)
        if len(self.errors) > 1:
            text += f" (and {len(self.errors) - 1} more defect(s))"
        super().__init__(text)

    @classmethod
    def from_issues(cls, issues: list[Issue]) -> DatasetError:
        first = issues[0]
        return cls(first.file, first.line, first.field, first.message, list(issues))

    def report(self, limit: int = 50) -> str:
        """Every defect, one per line (at most ``limit``)."""
        lines = [str(i) for i in self.errors[:limit]]
        if len(self.errors) > limit:
            lines.append(f"... {len(self.errors) - limit} more")
        return "\n".join(lines)


# --------------------------------------------------------------------------- validation helpers

_MISSING = object()


class _Issues:
    """Collects defects; a record with any defect is dropped, so nothing half-valid is kept."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[Issue] = []  # file names relative to root until raised

    def add(self, file: str, line: int | None, fld: str, message: str) -> None:
        self.items.append(Issue(file, line, fld, message))

    def raise_if_any(self) -> None:
        if self.items:
            # report in reading order (file, then line) so the first error is the earliest defect
            rank = {name: i for i, name in enumerate(_FILE_ORDER)}
            ordered = sorted(self.items, key=lambda i: (rank.get(i.file, len(rank)), i.line or 0))
            raise DatasetError.from_issues(
                [dataclasses.replace(i, file=str(self.root / i.file)) for i in ordered])


class _Obj:
    """Typed access to one JSON object's fields, reporting defects against ``file:line``."""

    def __init__(self, obj: dict, file: str, line: int | None, issues: _Issues) -> None:
        self.obj, self.file, self.line, self.issues = obj, file, line, issues
        self.ok = True

    def bad(self, fld: str, message: str) -> None:
        self.ok = False
        self.issues.add(self.file, self.line, fld, message)

    def only(self, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for key in self.obj:
            if key not in allowed:
                self.bad(key, f"unknown field (allowed: {', '.join(allowed)})")

    def str(self, key: str, *, required: bool = True, nullable: bool = False, empty: bool = False) -> Any:
        v = self.obj.get(key, _MISSING)
        if v is _MISSING or (v is None and nullable):
            if v is _MISSING and required:
                self.bad(key, "missing required field")
            return None
        if not isinstance(v, str):
            self.bad(key, f"expected a string, got {_typename(v)}")
            return None
        if not v.strip() and not empty:
            self.bad(key, "must not be empty")
            return None
        return v

    def choice(self, key: str, choices: tuple[str, ...], *, required: bool = True, nullable: bool = False,
               default: str | None = None) -> str | None:
        v = self.str(key, required=required, nullable=nullable)
        if v is None:
            return default
        if v not in choices:
            self.bad(key, f"unknown value {v!r} (expected one of: {', '.join(choices)})")
            return None
        return v

    def str_list(self, key: str) -> tuple[str, ...]:
        v = self.obj.get(key, _MISSING)
        if v is _MISSING or v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            self.bad(key, "expected a list of non-empty strings")
            return ()
        return tuple(v)

    def date(self, key: str, *, required: bool = True, nullable: bool = False) -> datetime | None:
        v = self.obj.get(key, _MISSING)
        if v is _MISSING or (v is None and nullable):
            if v is _MISSING and required:
                self.bad(key, "missing required field")
            return None
        try:
            return parse_iso(v)
        except (TypeError, ValueError) as exc:
            self.bad(key, str(exc))
            return None


def _typename(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(v), type(v).__name__)


def _bad_rel_path(p: str) -> str | None:
    """Why an anchor/tree path is unacceptable (absolute, escapes with ``..``), or None."""
    if p.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", p) or PurePosixPath(p).is_absolute():
        return f"path must be relative, got {p!r}"
    if ".." in re.split(r"[\\/]", p):
        return f"path must not contain '..': {p!r}"
    return None


def _read_jsonl(path: Path, rel: str, issues: _Issues) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_no, object)`` for each non-blank line; malformed lines are reported and skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        issues.add(rel, None, "file", f"not UTF-8: {exc}")
        return
    for no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            issues.add(rel, no, "json", f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            issues.add(rel, no, "json", f"expected a JSON object, got {_typename(obj)}")
            continue
        yield no, obj


def read_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON file; a syntax error or truncation raises DatasetError with its line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(p, None, "file", "no such file") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(p, None, "file", f"not UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(p, exc.lineno, "json", f"invalid JSON: {exc.msg} (column {exc.colno})") from None
