"""Memories held as columns, each record built when first read (issue 18: the start).

A start reads 100k memories from the memories sidecar (:mod:`memofs.files.memories_sidecar`).
Building a :class:`~memofs.files.records.Memory` for each costs more than what recall's
first query needs of them: ids, texts, kinds, times, confidences, namespaces and whether a
memory has anchors. So:

* :class:`MemoryTable` is a load's memories in order: the sidecar's rows as arrays, then the
  records parsed after it (``tail``). A row becomes a record when it is read, and stays one.
* :class:`MemoryMap` is a corpus's records by id with a dict's semantics (insertion order;
  replacing keeps the place). The records it adopts from a table stay rows there, and
  :meth:`MemoryMap.columns` gathers what recall reads without building them.

A row's record and its columns are one value: :func:`record_columns` (one record at a time)
and the table's arrays must agree, and ``tests/test_memofs/files/test_memory_table.py`` checks that they do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from datetime import datetime, timedelta, timezone
from itertools import repeat
from typing import Any, NamedTuple, overload

import numpy as np
from numpy.typing import NDArray

from memofs.files.records import MEMORY_KINDS, Anchor, Memory
from memofs.files.sidecar import decode_strings, split_strings

NONE_US = np.iinfo(np.int64).min
"""``created_us`` of a memory without a timestamp."""
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class Columns(NamedTuple):
    """What recall reads of each record, aligned with a list of ids (:meth:`MemoryMap.columns`).

    ``created_ts``: POSIX seconds (``datetime.timestamp()``), NaN without a timestamp;
    ``confidence``: NaN when not given. An id that is not a record (a graph document) has
    ``is_record`` False, kind and namespace None, NaNs, no anchors and the text ``""``."""

    is_record: NDArray[np.bool_]
    kinds: list[str | None]
    created_ts: NDArray[np.float64]
    confidence: NDArray[np.float64]
    anchored: NDArray[np.bool_]
    namespaces: list[str | None]
    texts: list[str]


def record_columns(records: Sequence[Memory]) -> Columns:
    """:class:`Columns` of records, one at a time: the definition the table's arrays follow."""
    n = len(records)
    return Columns(
        np.ones(n, dtype=bool), [m.kind for m in records],
        np.array([np.nan if m.created_at is None else m.created_at.timestamp() for m in records], dtype=np.float64).reshape(n),
        np.array([np.nan if m.confidence is None else m.confidence for m in records], dtype=np.float64).reshape(n),
        np.fromiter((bool(m.anchors) for m in records), dtype=bool, count=n),
        [m.namespace for m in records], [m.text for m in records])


def _has_extras(m: Memory) -> bool:
    return bool(m.tags or m.anchors or m.supersedes or m.metadata)


class _Rows:
    """The sidecar's rows (:mod:`memofs.files.memories_sidecar`'s columns, validated)."""

    def __init__(self, cols: dict[str, np.ndarray], namespaces: list[str]) -> None:
        self.ids, self.texts = (split_strings(cols[c], cols[f"{c}_ends"]) for c in ("ids", "texts"))
        n = len(self.ids)
        # the rest column is empty but for the few rows with extras: sliced for those alone
        rest_text, rest_ends = decode_strings(cols["rest"], cols["rest_ends"]), cols["rest_ends"]
        # copies (a few MB at 100k): no map of the sidecar's files outlives the read
        self.kind, self.created_us, self.created_off, self.confidence, self.namespace = (
            np.array(cols[c]) for c in ("kind", "created_us", "created_off", "confidence", "namespace"))
        if not (len(self.texts) == len(rest_ends) == n and all(
                len(a) == n for a in (self.kind, self.created_us, self.created_off, self.confidence, self.namespace))):
            raise ValueError("columns of different lengths")
        if n and (int(self.kind.max()) >= len(MEMORY_KINDS) or int(self.namespace.min()) < 0
                  or int(self.namespace.max()) >= len(namespaces)):
            raise ValueError("a code out of range")
        self.namespaces = list(namespaces)
        # the rows with tags, anchors, supersedes or metadata: few, parsed now (a damaged one
        # makes the sidecar untrusted at read time, not at first use)
        extra = np.flatnonzero(np.diff(rest_ends, prepend=0)) if n else np.zeros(0, dtype=np.int64)
        self.rest: dict[int, dict[str, Any]] = {}
        for i in extra.tolist():
            rest = json.loads(rest_text[int(rest_ends[i - 1]) if i else 0:int(rest_ends[i])])
            if not isinstance(rest, dict):
                raise ValueError(f"row {i}: rest is not an object")
            self.rest[i] = rest

    def __len__(self) -> int:
        return len(self.ids)

    def build(self, rows: Sequence[int]) -> list[Memory]:
        """The records of ``rows``, column by column (one numpy or ``map`` call each)."""
        idx = np.asarray(rows, dtype=np.int64)
        created, offsets = self.created_us[idx], self.created_off[idx]
        kinds = np.array(MEMORY_KINDS, dtype=object)[self.kind[idx]].tolist()
        nss = np.array(self.namespaces, dtype=object)[self.namespace[idx]].tolist()
        conf = self.confidence[idx]
        confs = conf.astype(object)
        confs[np.isnan(conf)] = None
        missing = created == NONE_US
        # _EPOCH + timedelta(microseconds=us) for every row (exact integer arithmetic); the
        # rows without a timestamp counted from 0 here and set to None below
        stamps: list[datetime | None] = list(map(_EPOCH.__add__, map(
            timedelta, repeat(0), repeat(0), np.where(missing, 0, created).tolist())))
        zones: dict[int, timezone] = {}
        for j in np.flatnonzero(missing | (offsets != 0)).tolist():
            off = int(offsets[j])
            if missing[j]:
                stamps[j] = None
            else:
                tz = zones.get(off) or zones.setdefault(off, timezone(timedelta(seconds=off)))
                stamps[j] = stamps[j].astimezone(tz)  # type: ignore[union-attr]
        # the frozen dataclass's __init__ sets each field through object.__setattr__ (~5 us a
        # row); filling __dict__ gives the same instance (the fields were validated when the
        # sidecar was written; tests/test_memofs/files/test_sidecar_memories.py compares every field with the parse)
        new = object.__new__
        ids, texts = self.ids, self.texts
        out = []
        append = out.append
        for i, kind, when, c, ns in zip(idx.tolist(), kinds, stamps, confs.tolist(), nss):
            m = new(Memory)
            m.__dict__.update(id=ids[i], text=texts[i], kind=kind, created_at=when, confidence=c, namespace=ns,
                              tags=(), anchors=(), supersedes=(), metadata={})
            append(m)
        if self.rest:
            for j, i in enumerate(idx.tolist()):
                rest = self.rest.get(i)
                if rest is not None:
                    out[j].__dict__.update(
                        tags=tuple(rest.get("tags", ())), anchors=tuple(Anchor(a, h) for a, h in rest.get("anchors", ())),
                        supersedes=tuple(rest.get("supersedes", ())), metadata=dict(rest.get("metadata", {})))
        return out

    def columns(self) -> Columns:
        """:class:`Columns` of every row from the arrays (equal to :func:`record_columns` of the records)."""
        n = len(self.ids)
        missing = self.created_us == NONE_US
        # float(us) is exact below 2**53 us (year 287,000) and one correctly rounded division
        # by 1e6 then equals timedelta.total_seconds()'s integer true division
        created = np.where(missing, np.nan, self.created_us.astype(np.float64) / 1e6)
        anchored = np.zeros(n, dtype=bool)
        for i, rest in self.rest.items():
            anchored[i] = bool(rest.get("anchors"))
        return Columns(np.ones(n, dtype=bool), np.array(MEMORY_KINDS, dtype=object)[self.kind].tolist(), created,
                       self.confidence.astype(np.float64), anchored,
                       np.array(self.namespaces, dtype=object)[self.namespace].tolist(), self.texts)


class MemoryTable(Sequence[Memory]):
    """Memories in load order: the sidecar's rows (:meth:`from_columns`), then records
    (the constructor's, :meth:`extend`'s). Reading a row builds its record once; iterating
    builds every row's (as fast as one load's build); :attr:`ids`, :attr:`texts` and
    :meth:`columns` read the arrays and build none."""

    def __init__(self, records: Iterable[Memory] = ()) -> None:
        self._rows: _Rows | None = None
        self._built: list[Memory | None] = []
        self._tail: list[Memory] = list(records)
        self._ids: list[str] | None = None
        self._texts: list[str] | None = None

    @classmethod
    def from_columns(cls, cols: dict[str, np.ndarray], namespaces: list[str]) -> MemoryTable:
        """The table of a memories sidecar's columns; ValueError (or KeyError, IndexError,
        UnicodeDecodeError) when they are inconsistent."""
        table = cls()
        table._rows = _Rows(cols, namespaces)
        table._built = [None] * len(table._rows)
        return table

    def __len__(self) -> int:
        return len(self._built) + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> Memory: ...
    @overload
    def __getitem__(self, i: slice) -> list[Memory]: ...

    def __getitem__(self, i: int | slice) -> Memory | list[Memory]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n, head = len(self), len(self._built)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("memory table index out of range")
        if i >= head:
            return self._tail[i - head]
        m = self._built[i]
        if m is None:
            assert self._rows is not None  # rows exist when the head is not empty
            m = self._built[i] = self._rows.build([i])[0]
        return m

    def __iter__(self) -> Iterator[Memory]:
        todo = [i for i, m in enumerate(self._built) if m is None]
        if todo:
            assert self._rows is not None
            for i, m in zip(todo, self._rows.build(todo)):
                self._built[i] = m
        yield from self._built  # type: ignore[misc]
        yield from self._tail

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (MemoryTable, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MemoryTable({len(self._built)} rows + {len(self._tail)} records)"

    def extend(self, records: Iterable[Memory]) -> None:
        """Append records after every memory held."""
        self._tail.extend(records)
        self._ids = self._texts = None

    @property
    def ids(self) -> list[str]:
        """Every memory's id, in order (shared: do not mutate)."""
        if self._ids is None:
            self._ids = [*(self._rows.ids if self._rows else ()), *(m.id for m in self._tail)]
        return self._ids

    @property
    def texts(self) -> list[str]:
        """Every memory's text, in order (shared: do not mutate)."""
        if self._texts is None:
            self._texts = [*(self._rows.texts if self._rows else ()), *(m.text for m in self._tail)]
        return self._texts

    def columns(self) -> Columns:
        """:class:`Columns` of every memory in order, the rows' from their arrays."""
        tail = record_columns(self._tail)
        if self._rows is None:
            return tail
        head = self._rows.columns()
        return Columns(*(np.concatenate([a, b]) if isinstance(a, np.ndarray) else [*a, *b] for a, b in zip(head, tail)))

    def extras(self) -> set[int]:
        """The positions whose memory has tags, anchors, supersedes or metadata."""
        head = set(self._rows.rest) if self._rows else set()
        base = len(self._built)
        return head | {base + j for j, m in enumerate(self._tail) if _has_extras(m)}


class MemoryMap(MutableMapping[str, Memory]):
    """Records by id, a dict's semantics (insertion order; a replaced id keeps its place).
    :meth:`adopt` takes a table's memories as positions in it, read on access."""

    def __init__(self) -> None:
        self._slot: dict[str, int | Memory] = {}  # int: a position in the adopted table
        self._table: MemoryTable | None = None
        self._columns: Columns | None = None  # the adopted table's, gathered on first use
        self._rows_only = True  # no record was set since adopt: every value is a position

    def adopt(self, table: MemoryTable) -> None:
        """Hold ``table``'s memories (this map must be empty); they stay rows until read."""
        if self._slot:
            raise ValueError("adopt needs an empty map")
        self._table, self._columns, self._rows_only = table, None, True
        self._slot = dict(zip(table.ids, range(len(table))))

    def _get(self, v: int | Memory) -> Memory:
        return self._table[v] if type(v) is int else v  # type: ignore[index, return-value]

    def __getitem__(self, key: str) -> Memory:
        return self._get(self._slot[key])

    def get(self, key: str, default: Any = None) -> Any:
        v = self._slot.get(key)
        return default if v is None else self._get(v)

    def __contains__(self, key: object) -> bool:
        return key in self._slot

    def __setitem__(self, key: str, m: Memory) -> None:
        self._slot[key] = m
        self._rows_only = False

    def set_many(self, ids: Iterable[str], records: Iterable[Memory]) -> None:
        """``self[i] = m`` for each pair, in one dict update."""
        pairs = list(zip(ids, records))
        if pairs:
            self._slot.update(pairs)
            self._rows_only = False

    def __delitem__(self, key: str) -> None:
        del self._slot[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._slot)

    def __len__(self) -> int:
        return len(self._slot)

    def texts(self) -> list[str]:
        """Every record's text, in order."""
        tt = self._table.texts if self._table is not None else ()
        return [tt[v] if type(v) is int else v.text for v in self._slot.values()]  # type: ignore[index, union-attr]

    def with_extras(self) -> list[Memory]:
        """The records that can have tags, anchors, supersedes or metadata, in order (every
        record but the adopted rows known to hold none)."""
        ext = self._table.extras() if self._table is not None else set()
        return [self._get(v) for v in self._slot.values() if type(v) is not int or v in ext]

    def columns(self, ids: Sequence[str]) -> Columns:
        """:class:`Columns` aligned with ``ids``: adopted rows gathered from the table's
        arrays, other records one at a time, ids that are not records filled as such."""
        n = len(ids)
        if self._rows_only:  # a start's: positions only, one pass
            slots: list[Any] = []
            pos = np.fromiter(map(self._slot.get, ids, repeat(-1)), dtype=np.int64, count=n)
            loose: list[int] = []
            is_record = pos >= 0
        else:
            slots = list(map(self._slot.get, ids))
            pos = np.fromiter((v if type(v) is int else -1 for v in slots), dtype=np.int64, count=n)
            loose = [i for i, v in enumerate(slots) if v is not None and type(v) is not int]
            is_record = np.fromiter((v is not None for v in slots), dtype=bool, count=n)
        kinds: list[str | None] = [None] * n
        namespaces: list[str | None] = [None] * n
        texts = [""] * n
        created, conf = np.full(n, np.nan), np.full(n, np.nan)
        anchored = np.zeros(n, dtype=bool)
        at = np.flatnonzero(pos >= 0)
        if at.size:
            assert self._table is not None
            if self._columns is None:
                self._columns = self._table.columns()
            t, p = self._columns, pos[at]
            created[at], conf[at], anchored[at] = t.created_ts[p], t.confidence[p], t.anchored[p]
            a, m, p0 = int(at[0]), at.size, int(p[0])
            block = at[-1] - a == m - 1 and p[-1] - p0 == m - 1 and bool((np.diff(p) == 1).all())
            for out, col in ((kinds, t.kinds), (namespaces, t.namespaces), (texts, t.texts)):
                if block:  # the usual layout: the ids hold the table's rows in order, in one run
                    out[a:a + m] = col[p0:p0 + m]
                else:
                    for i, v in zip(at.tolist(), map(col.__getitem__, p.tolist())):
                        out[i] = v
        if loose:
            c = record_columns([slots[i] for i in loose])  # type: ignore[misc]
            created[loose], conf[loose], anchored[loose] = c.created_ts, c.confidence, c.anchored
            for out, col in ((kinds, c.kinds), (namespaces, c.namespaces), (texts, c.texts)):
                for i, v in zip(loose, col):
                    out[i] = v
        return Columns(is_record, kinds, created, conf, anchored, namespaces, texts)
