"""The memories sidecar (issue 18, fast start): a load from it equals a full parse of
memories.jsonl (the naive reference, ``Store.load(sidecar=False)``), field by field and in
recall; appended lines are applied on top; a hand edit, a damaged file or a record shape it
does not hold makes it stand down; kill -9 while it is written loses nothing."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memofs.files import memories_sidecar
from memofs.files.memories_sidecar import MemoriesSidecar
from memofs.files.records import Memory
from memofs.store.project import Store, rehydrate

from support import fields_of, kill_mid_write

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)


def same(a: list[Memory], b: list[Memory]) -> bool:
    return [fields_of(m) for m in a] == [fields_of(m) for m in b]


def sidecar_of(store: Store) -> MemoriesSidecar:
    return MemoriesSidecar(store.paths.memories, store.paths.embeddings.parent)


def generation(store: Store) -> str:
    return json.loads((store.paths.embeddings.parent / "memories.sidecar.json").read_text())["generation"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.init(tmp_path, clock=lambda: T0)
    (tmp_path / "src.py").write_text("print('anchored')\n")
    s.remember("Deploy window is Tuesday 14:00 UTC", kind="decision", confidence=0.9, tags=["deploy", "ops"],
               namespace="team-a")
    s.remember("We use pnpm, not npm", kind="preference", anchors=["src.py"], now=T0 + timedelta(seconds=1))
    s.remember("Ünïcode text: naïve café 😀 in the memory", now=T0 + timedelta(seconds=2))
    rows = [json.loads(x) for x in s.paths.memories.read_text().splitlines()]
    extra = [
        # hand-written lines the parser accepts: another zone, no timestamp, an int confidence,
        # supersedes, extra fields (kept as metadata), and a repeated id (the later line wins)
        {"id": "m_zone", "text": "written in another zone", "kind": "reference", "created_at": "2026-01-10T14:30:00.123456+02:00",
         "confidence": 1, "supersedes": [rows[0]["id"]], "title": "zone", "source": "cli", "origin": {"tool": "x"}},
        {"id": "m_none", "text": "no timestamp at all", "kind": "note"},
        {**rows[1], "text": "We use pnpm, not npm or yarn"},
    ]
    with open(s.paths.memories, "a", encoding="utf-8") as fh:
        for row in extra:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return s


def test_a_load_from_the_sidecar_equals_the_full_parse(store: Store) -> None:
    naive = store.load(sidecar=False).memories
    assert sidecar_of(store).read() is None  # not written yet
    first = store.load().memories  # full parse, writes the sidecar
    cached = sidecar_of(store).read()
    assert cached is not None and cached[1].offset == store.paths.memories.stat().st_size
    second = store.load().memories  # from the sidecar
    assert same(first, naive) and same(second, naive) and same(cached[0], naive)
    assert [m.id for m in naive][-1] == naive[-1].id and naive[-1].text == "We use pnpm, not npm or yarn"
    zone = next(m for m in second if m.id == "m_zone")
    assert zone.created_at.utcoffset() == timedelta(hours=2) and zone.created_at.microsecond == 123456
    assert zone.metadata == {"title": "zone", "source": "cli", "origin": {"tool": "x"}} and isinstance(zone.confidence, float)


def test_recall_is_identical_with_and_without_the_sidecar(store: Store) -> None:
    for i in range(40):
        store.remember(f"filler memory {i} about deploy windows and package managers", now=T0 + timedelta(minutes=i))
    queries = ["deploy window", "pnpm or npm", "café unicode", "zone", "package managers"]
    now = T0 + timedelta(days=1)

    def answers() -> list:
        rec = rehydrate(store).recaller
        return [[(r.id, r.score) for r in rec.recall(q, 8, now=now)] for q in queries]

    without = answers()  # no sidecar yet: the full JSONL parse (and the sidecar is written)
    assert sidecar_of(store).read() is not None
    assert answers() == without


def test_appended_lines_are_applied_on_top_of_the_sidecar(store: Store, monkeypatch) -> None:
    store.load()
    gen = generation(store)
    store.remember("appended after the sidecar", now=T0 + timedelta(hours=1))
    parsed: list[int] = []
    real = memories_sidecar.MemoriesSidecar.read
    monkeypatch.setattr(memories_sidecar.MemoriesSidecar, "read", lambda self: parsed.append(1) or real(self))
    got = store.load().memories
    assert parsed and same(got, store.load(sidecar=False).memories) and got[-1].text == "appended after the sidecar"
    assert generation(store) == gen  # one appended line does not rewrite it


@pytest.mark.parametrize("edit", ["same-length", "edit-then-append", "replace"])
def test_a_hand_edit_of_memories_jsonl_rebuilds_the_sidecar(store: Store, edit: str) -> None:
    store.load()
    gen = generation(store)
    path = store.paths.memories
    data = path.read_bytes()
    if edit == "same-length":  # an editor saving in place: same inode, same size, new mtime
        time.sleep(0.01)
        with open(path, "r+b") as fh:
            fh.write(data.replace(b"Tuesday", b"Fridays", 1))
    elif edit == "edit-then-append":
        path.write_bytes(data.replace(b"Deploy window", b"Deploy WINDOW", 1)[:-1] + b'\n{"id":"m_new","text":"added by hand"}\n')
    else:
        tmp = path.with_suffix(".new")
        tmp.write_bytes(data.replace(b"pnpm, not npm or yarn", b"bun"))
        os.replace(tmp, path)
    assert sidecar_of(store).read() is None  # stale: not trusted
    got = store.load().memories
    assert same(got, store.load(sidecar=False).memories)
    assert generation(store) != gen and sidecar_of(store).read() is not None  # rebuilt


@pytest.mark.parametrize("damage", ["flip-text-byte", "truncate-npy", "garbage-meta", "missing-column"])
def test_a_damaged_sidecar_is_rebuilt_not_trusted(store: Store, damage: str) -> None:
    store.load()
    d = store.paths.embeddings.parent
    gen = generation(store)
    texts = d / f"memories.{gen}.texts.npy"
    if damage == "flip-text-byte":
        raw = bytearray(texts.read_bytes())
        raw[-5] ^= 0x01  # inside the UTF-8 of the last text, header intact
        texts.write_bytes(bytes(raw))
    elif damage == "truncate-npy":
        texts.write_bytes(texts.read_bytes()[:-10])
    elif damage == "garbage-meta":
        (d / "memories.sidecar.json").write_text("{not json")
    else:
        (d / f"memories.{gen}.created_us.npy").unlink()
    assert sidecar_of(store).read() is None
    got = store.load().memories
    assert same(got, store.load(sidecar=False).memories)
    assert sidecar_of(store).read() is not None and len({p.name.split(".")[1] for p in d.glob("memories.*.npy")}) == 1


def test_a_record_field_the_columns_do_not_hold_makes_it_stand_down(store: Store, monkeypatch) -> None:
    store.load()
    assert sidecar_of(store).read() is not None
    monkeypatch.setattr(memories_sidecar, "COLUMNS_FOR", memories_sidecar.COLUMNS_FOR + ("title",))
    assert sidecar_of(store).read() is None and not sidecar_of(store).write(store.load(sidecar=False).memories, None)
    assert same(store.load().memories, store.load(sidecar=False).memories)


def test_an_unterminated_last_line_waits_for_its_newline(store: Store) -> None:
    path = store.paths.memories
    path.write_bytes(path.read_bytes() + b'{"id":"m_tail","text":"complete but no newline"}')
    assert store.load().memories[-1].id == "m_tail"
    assert sidecar_of(store).read() is None  # not written while the last line is open
    path.write_bytes(path.read_bytes()[: -len(b'{"id":"m_tail","text":"complete but no newline"}')])
    assert "m_tail" not in {m.id for m in store.load().memories}


SIDECAR_WRITER = """
import sys
from pathlib import Path
from memofs.store.project import Store
s = Store.open(sys.argv[1])
meta = s.paths.embeddings.parent / "memories.sidecar.json"
print("ready", flush=True)
while True:  # a new generation each time: every write is a full sidecar write
    meta.unlink(missing_ok=True)
    s.load()
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5])
def test_kill_9_while_writing_the_sidecar_loses_nothing(store: Store, delay: float) -> None:
    for i in range(300):
        store.remember(f"bulk memory {i} " + "x" * 300, now=T0 + timedelta(seconds=10 + i))
    before = store.paths.memories.read_bytes()
    naive = store.load(sidecar=False).memories
    kill_mid_write(SIDECAR_WRITER, store.root, delay)
    assert store.paths.memories.read_bytes() == before  # the durable record is never touched
    assert same(store.load().memories, naive)  # whatever state the kill left, the load is right
    assert same(store.load().memories, naive)  # ... and so is the next one, from a valid sidecar
    assert sidecar_of(store).read() is not None


def test_string_columns_round_trip_and_refuse_bad_ends() -> None:
    from memofs.files.sidecar import join_strings, split_strings

    strings = ["", "a", "naïve", "😀x", "", "line\nbreak"]
    blob, ends = join_strings(strings)
    assert blob.dtype == np.uint8 and split_strings(blob, ends) == strings
    with pytest.raises(ValueError):
        split_strings(blob, ends[::-1].copy())
