"""A writer skips re-reading what its own last append left (``Store._ready_to_append``,
``AppendCursor.advance``): these tests check it never skips a read that matters. Each one
changes the files behind the writer's back, the way another process or a crash would, and
checks the next ``remember`` sees the change exactly as a fresh process would."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memofs.files import jsonl
from memofs.files.jsonl import AppendCursor, append_lines
from memofs.store import directory
from memofs.store.project import DERIVED_CHECKPOINT_WRITES, Store

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.init(tmp_path, clock=lambda: T0)


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_advance_counts_an_own_append_and_nothing_else(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(b'{"id":"a"}\n')
    cur = AppendCursor()
    assert cur.read(f) == (b'{"id":"a"}\n', True)
    ours = b'{"id":"b"}\n'
    after = append_lines(f, ['{"id":"b"}'])
    assert cur.advance(ours, after)
    assert (cur.offset, cur.lines) == (len(b'{"id":"a"}\n') + len(ours), 2)
    assert cur.read(f) == (b"", False)  # nothing left to read: the advance stood for it
    # someone else appends between our read and our append: the advance refuses, and the
    # next read returns both lines
    with open(f, "ab") as fh:
        fh.write(b'{"id":"x"}\n')
    after = append_lines(f, ['{"id":"c"}'])
    assert not cur.advance(b'{"id":"c"}\n', after)
    assert cur.read(f) == (b'{"id":"x"}\n{"id":"c"}\n', False)
    assert cur.lines == 4


def test_an_unchanged_file_skips_the_tail_repair_and_a_changed_one_does_not(store: Store, monkeypatch) -> None:
    store.remember("first memory about Postgres", now=T0)
    repaired: list[str] = []
    real = directory.repair_tail
    monkeypatch.setattr(directory, "repair_tail", lambda path, tmp: repaired.append(path.name) or real(path, tmp))
    store.remember("second memory about Redis", now=T0 + timedelta(seconds=1))
    assert repaired == []  # both files are as this process's last append left them
    with open(store.paths.memories, "ab") as fh:  # a dead writer's torn line
        fh.write(b'{"id":"mem_torn","text":"half')
    store.remember("third memory about Kafka", now=T0 + timedelta(seconds=2))
    assert repaired == ["memories.jsonl"]
    rows = [json.loads(x) for x in lines_of(store.paths.memories)]  # every line parses: the torn one was cut
    assert [r["text"] for r in rows] == ["first memory about Postgres", "second memory about Redis",
                                         "third memory about Kafka"]


def test_another_writers_line_is_seen_by_the_id_check(store: Store, tmp_path: Path) -> None:
    """Same text, same instant: the second memory gets a salted id, whichever process wrote
    the first one. A skipped read here would write a duplicate id."""
    a, b = store, Store.open(tmp_path, clock=lambda: T0)
    a.remember("warm-up", now=T0)  # a's cursor and key now stand at its own append
    when = T0 + timedelta(seconds=5)
    first = b.remember("the deploy window is Tuesday", now=when)
    second = a.remember("the deploy window is Tuesday", now=when)
    assert first.id != second.id
    ids = [json.loads(x)["id"] for x in lines_of(a.paths.memories)]
    assert len(ids) == len(set(ids)) == 3


def test_a_rewritten_file_is_read_again_whole(store: Store) -> None:
    m = store.remember("a memory that will be edited by hand", now=T0)
    # an editor's save: same bytes, new inode (rename over the file)
    data = store.paths.memories.read_bytes()
    tmp = store.paths.memories.with_suffix(".edit")
    tmp.write_bytes(data)
    os.replace(tmp, store.paths.memories)
    again = store.remember("a memory that will be edited by hand", now=T0)  # same text, same instant
    assert again.id != m.id


@pytest.mark.parametrize("advances", [True, False], ids=["own-line-counted", "own-line-read-back"])
def test_checkpoint_line_counts_match_the_file(store: Store, monkeypatch, advances: bool) -> None:
    """The derived checkpoint records memories.jsonl's line count, which the advanced cursor
    counts without reading: it must equal the file's real count, with and without another
    writer's lines in between, and when the advance is refused (a writer that does not take
    the lock appended between the read and ours: simulated)."""
    if not advances:
        monkeypatch.setattr(AppendCursor, "advance", lambda self, data, st: False)
    other = Store.open(store.root, clock=lambda: T0)
    derived = store.paths.embeddings.parent / "derived.json"
    for rounds in range(2):  # the last write before the checkpoint: another writer's, then ours
        before = derived.read_bytes()
        for i in range(DERIVED_CHECKPOINT_WRITES):  # this process's 64th write checkpoints
            if i % 10 == 3 or (rounds == 0 and i == DERIVED_CHECKPOINT_WRITES - 1):
                other.remember(f"other writer's memory {rounds} {i}", now=T0 + timedelta(seconds=i, milliseconds=500))
            store.remember(f"memory {rounds} {i} about the API service", now=T0 + timedelta(seconds=i))
        assert derived.read_bytes() != before  # the checkpoint was written by the last remember
        check_counts(store)


def check_counts(store: Store) -> None:
    saved = json.loads((store.paths.embeddings.parent / "derived.json").read_text())
    assert saved["memories"]["lineno"] == len(lines_of(store.paths.memories))
    assert saved["memories"]["offset"] == store.paths.memories.stat().st_size
    assert saved["events"]["lineno"] == len(lines_of(store.paths.events))


def test_the_file_key_changes_with_every_append(tmp_path: Path) -> None:
    f = tmp_path / "k.jsonl"
    first = jsonl.file_key(append_lines(f, ["{}"]))
    assert first == jsonl.file_key(os.stat(f))
    second = jsonl.file_key(append_lines(f, ["{}"]))
    assert second[1] == first[1] + 3 and second != first
