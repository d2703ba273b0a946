"""MemoryTable and MemoryMap (issue 18, the start): a table read from the memories sidecar's
columns equals the records it was written from, field by field; its arrays equal the
one-record-at-a-time definition (:func:`record_columns`); a MemoryMap behaves as a dict of
the same records; and a start's recall builds only the records it returns."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.files.memories_sidecar import encode
from memofs.files.memory_table import Columns, MemoryMap, MemoryTable, record_columns
from memofs.files.records import MEMORY_KINDS, Anchor, Memory
from memofs.store.project import Store, rehydrate

from support import examples, fields_of

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)

_zone = st.one_of(st.just(timezone.utc), st.integers(-12 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m))))
_when = st.one_of(st.none(), st.builds(
    lambda us, tz: (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)).astimezone(tz),
    st.integers(-10**15, 4 * 10**15), _zone))
_word = st.text("abcxyzé😀 _-", min_size=1, max_size=8)


@st.composite
def records(draw: st.DrawFn) -> list[Memory]:
    n = draw(st.integers(0, 25))
    out = []
    for i in range(n):
        extras = draw(st.booleans())
        out.append(Memory(
            id=f"m{i}", text=draw(_word), kind=draw(st.sampled_from(MEMORY_KINDS)), created_at=draw(_when),
            confidence=draw(st.one_of(st.none(), st.floats(0, 1))), namespace=draw(st.sampled_from(["default", "a", "b/ü"])),
            tags=tuple(draw(st.lists(_word, max_size=2))) if extras else (),
            anchors=tuple(Anchor(p, "0" * 64) for p in draw(st.lists(_word, max_size=2))) if extras else (),
            supersedes=tuple(draw(st.lists(st.sampled_from([f"m{j}" for j in range(n)]), max_size=2))) if extras and n else (),
            metadata=draw(st.dictionaries(_word, st.one_of(st.integers(), _word), max_size=2)) if extras else {}))
    return out


def table_of(mems: list[Memory], tail: list[Memory] = ()) -> MemoryTable:
    cols, namespaces = encode(mems)
    t = MemoryTable.from_columns(cols, namespaces)
    t.extend(tail)
    return t


def assert_columns_equal(a: Columns, b: Columns) -> None:
    assert a.is_record.tolist() == b.is_record.tolist() and a.anchored.tolist() == b.anchored.tolist()
    assert a.kinds == b.kinds and a.namespaces == b.namespaces and a.texts == b.texts
    for x, y in ((a.created_ts, b.created_ts), (a.confidence, b.confidence)):
        assert x.dtype == y.dtype == np.float64 and x.tobytes() == y.tobytes()  # bit for bit, NaNs included


@settings(max_examples=examples(150), deadline=None)
@given(records(), st.data())
def test_the_table_equals_its_records_field_by_field(mems: list[Memory], data: st.DataObject) -> None:
    split = data.draw(st.integers(0, len(mems)))
    head, tail = mems[:split], mems[split:]
    # one row at a time, out of order, before any bulk build
    t = table_of(head, tail)
    for i in data.draw(st.permutations(range(len(mems)))):
        assert fields_of(t[i]) == fields_of(mems[i])
    assert [fields_of(m) for m in table_of(head, tail)] == [fields_of(m) for m in mems]  # the bulk build
    assert t == mems and len(t) == len(mems) and t.ids == [m.id for m in mems] and t.texts == [m.text for m in mems]
    if mems:
        assert fields_of(t[-1]) == fields_of(mems[-1]) and [fields_of(m) for m in t[1::2]] == [fields_of(m) for m in mems[1::2]]


@settings(max_examples=examples(150), deadline=None)
@given(records(), st.data())
def test_the_arrays_equal_the_record_at_a_time_definition(mems: list[Memory], data: st.DataObject) -> None:
    split = data.draw(st.integers(0, len(mems)))
    t = table_of(mems[:split], mems[split:])
    got, want = t.columns(), record_columns(mems)
    assert_columns_equal(got, want)  # the timestamps are datetime.timestamp()'s bit for bit, not just close
    assert t.extras() == {i for i, m in enumerate(mems) if m.tags or m.anchors or m.supersedes or m.metadata}


_op = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 30), _word),
    st.tuples(st.just("del"), st.integers(0, 30), st.none()),
)


@settings(max_examples=examples(150), deadline=None)
@given(records(), st.lists(_op, max_size=20), st.lists(st.integers(0, 30), max_size=12))
def test_a_memory_map_behaves_as_a_dict_of_the_records(mems: list[Memory], ops: list, ask: list[int]) -> None:
    mm, ref = MemoryMap(), {}
    mm.adopt(table_of(mems))
    ref.update((m.id, m) for m in mems)
    for op, k, text in ops:
        key = f"m{k}"
        if op == "set":
            m = Memory(id=key, text=text, kind="goal", created_at=T0, confidence=0.5, supersedes=("m0",))
            mm[key] = m
            ref[key] = m
        elif key in ref:
            del mm[key], ref[key]
    assert list(mm) == list(ref) and len(mm) == len(ref)
    assert [fields_of(mm[k]) for k in mm] == [fields_of(v) for v in ref.values()]
    assert mm.texts() == [v.text for v in ref.values()]
    extras = [m.id for m in mm.with_extras()]
    with_any = [k for k, v in ref.items() if v.tags or v.anchors or v.supersedes or v.metadata]
    assert set(with_any) <= set(extras) and extras == [k for k in ref if k in set(extras)]  # every one, in order
    ids = [f"m{k}" for k in ask] + ["graph:x"]
    got = mm.columns(ids)
    present = [ref[i] for i in ids if i in ref]
    want = record_columns(present)
    assert got.is_record.tolist() == [i in ref for i in ids]
    rec = got.is_record
    assert [k for k, r in zip(got.kinds, rec) if r] == want.kinds and [k for k, r in zip(got.kinds, rec) if not r] == [None] * int((~rec).sum())
    assert got.created_ts[rec].tobytes() == want.created_ts.tobytes() and got.confidence[rec].tobytes() == want.confidence.tobytes()
    assert np.isnan(got.created_ts[~rec]).all() and not got.anchored[~rec].any() and got.anchored[rec].tolist() == want.anchored.tolist()
    assert [t for t, r in zip(got.texts, rec) if not r] == [""] * int((~rec).sum())
    assert mm.get("nope") is None and mm.get("nope", 3) == 3
    # the usual layout (graph documents, then every record in order) and its reverse
    for ids in (["graph:a", "graph:b", *ref], [*ref][::-1]):
        got, want = mm.columns(ids), record_columns([ref[i] for i in ids if i in ref])
        rec = got.is_record
        assert rec.tolist() == [i in ref for i in ids] and [t for t, r in zip(got.texts, rec) if r] == want.texts
        assert [k for k, r in zip(got.kinds, rec) if r] == want.kinds and [x for x, r in zip(got.namespaces, rec) if r] == want.namespaces
        assert got.created_ts[rec].tobytes() == want.created_ts.tobytes() and got.anchored[rec].tolist() == want.anchored.tolist()


def test_a_start_recall_builds_only_the_records_it_returns(tmp_path: Path) -> None:
    store = Store.init(tmp_path, clock=lambda: T0)
    for i in range(200):
        store.remember(f"memory {i} on deploy windows" if i % 3 else f"memory {i} on package managers",
                       now=T0 + timedelta(minutes=i), tags=["x"] if i == 7 else ())
    rehydrate(store)  # writes the sidecars
    state = rehydrate(store)
    table = state.memories
    assert isinstance(table, MemoryTable) and all(m is None for m in table._built)  # read as rows
    got = state.recaller.recall("deploy windows", 5, now=T0 + timedelta(days=1))
    built = {table._built[i].id for i in range(len(table._built)) if table._built[i] is not None}
    assert len(got) == 5 and {r.id for r in got} <= built
    # the lexical pool the reranker reads (no vectors here), plus the one row with tags that
    # the supersession scan reads: not the corpus
    assert len(built) <= math.ceil(5 * state.recaller.config.lexical_pool_multiplier) + 1
    # and the records equal the full parse's
    naive = {m.id: m for m in store.load(sidecar=False).memories}
    assert all(fields_of(table[i]) == fields_of(naive[table.ids[i]]) for i in range(len(table)))
