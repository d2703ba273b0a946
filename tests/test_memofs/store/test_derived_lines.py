"""Derived lines (issue 18): ``remember`` fsyncs only the memory line it acknowledges; the
event and the graph facts derived from it are appended without their own fsync, made
durable by a checkpoint every DERIVED_CHECKPOINT_WRITES writes, and re-derived at
rehydration when a crash lost them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memofs.store import derived
from memofs.store.project import DERIVED_CHECKPOINT_WRITES, Store, read_jsonl, rehydrate
from support import REPO_ROOT

REPO = REPO_ROOT
T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)
TEXT = "memory {i}: the API service uses Postgres and Redis, deployed with Terraform"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.init(tmp_path, clock=lambda: T0)


def remember(store: Store, n: int, start: int = 0) -> list[str]:
    return [store.remember(TEXT.format(i=i), now=T0 + timedelta(seconds=i)).id for i in range(start, start + n)]


def complete(store: Store) -> bool:
    """Every memory has its event and its graph facts (the store's own check)."""
    return store.missing_derived(store.load(sidecar=False).memories) == ([], [])


def test_remember_fsyncs_once_between_checkpoints(store: Store, monkeypatch) -> None:
    remember(store, 1)  # the first write reads the store once
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
    per_write = []
    for i in range(1, DERIVED_CHECKPOINT_WRITES + 3):
        before = len(calls)
        remember(store, 1, start=i)
        per_write.append(len(calls) - before)
    # one fsync (the memory line) per write; the checkpoint write (the 64th of this
    # process) adds the derived files' fsyncs and the atomic checkpoint file's own
    checkpoint_at = DERIVED_CHECKPOINT_WRITES - 2  # index of the process's 64th write
    assert [c for k, c in enumerate(per_write) if k != checkpoint_at] == [1] * (len(per_write) - 1)
    assert per_write[checkpoint_at] > 1
    assert complete(store)


GRAPH_FILES = ("nodes.jsonl", "edges.jsonl")


def graph_sizes(store: Store) -> dict[str, int]:
    return {name: (store.paths.graph / name).stat().st_size for name in GRAPH_FILES}


def _truncate_to_checkpoint(store: Store, graph_at_checkpoint: dict[str, int]) -> None:
    """What a machine crash can leave: the unsynced tails of the derived files gone, each
    cut back to its size at the last checkpoint (the events offset the checkpoint records)."""
    saved = json.loads((store.paths.embeddings.parent / "derived.json").read_text())
    with open(store.paths.events, "r+b") as fh:
        fh.truncate(saved["events"]["offset"] if saved["events"] else 0)
    for name, size in graph_at_checkpoint.items():
        with open(store.paths.graph / name, "r+b") as fh:
            fh.truncate(size)


def test_a_machine_crash_losing_unsynced_derived_lines_is_repaired_at_rehydration(store: Store) -> None:
    ids = remember(store, DERIVED_CHECKPOINT_WRITES)  # the last of these writes the checkpoint
    at_checkpoint = graph_sizes(store)
    ids += remember(store, 10, start=DERIVED_CHECKPOINT_WRITES)
    reference_events = [e for _, e in read_jsonl(store.paths.events)[0]]
    reference_nodes = {n.id for n in store.load_graph().nodes}
    _truncate_to_checkpoint(store, at_checkpoint)
    assert not complete(store)
    state = rehydrate(store)
    assert [m.id for m in state.memories] == ids  # nothing acknowledged was lost
    assert [e for _, e in read_jsonl(store.paths.events)[0]] == reference_events  # re-derived, equal
    assert {n.id for n in store.load_graph().nodes} == reference_nodes
    assert complete(store)


def test_a_current_checkpoint_makes_rehydration_write_nothing(store: Store) -> None:
    remember(store, 5)
    rehydrate(store)  # checks the 5 lines since init's checkpoint, writes a new one
    files = [store.paths.events, store.paths.graph / "nodes.jsonl", store.paths.embeddings.parent / "derived.json"]
    before = [(f.stat().st_mtime_ns, f.stat().st_size) for f in files]
    time.sleep(0.01)
    rehydrate(store)
    assert [(f.stat().st_mtime_ns, f.stat().st_size) for f in files] == before


def test_a_store_without_a_checkpoint_starts_from_its_current_state(store: Store) -> None:
    remember(store, 3)
    (store.paths.embeddings.parent / "derived.json").unlink()
    events_before = store.paths.events.read_bytes()
    rehydrate(store)
    assert store.paths.events.read_bytes() == events_before
    assert (store.paths.embeddings.parent / "derived.json").exists()


WRITER = """
import sys
from datetime import datetime, timezone
from memofs.store.project import Store
store = Store.open(sys.argv[1], clock=lambda: datetime.now(timezone.utc))
for i in range(100000):
    m = store.remember(f"writer memory {i} about Kafka and Postgres " + "x" * 2000, kind="note")
    print(m.id, flush=True)
"""


@pytest.mark.parametrize("delay", [0.05, 0.3, 1.0])
def test_kill_9_loses_nothing_acknowledged_and_derived_lines_are_repaired(store: Store, delay: float) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store.root)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked = [proc.stdout.readline().strip()]  # at least one acknowledged write
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    acked += [x for x in proc.stdout.read().split() if x]
    proc.stdout.close()
    proc.stderr.close()
    state = rehydrate(store)
    loaded = [m.id for m in state.memories]
    assert set(acked) <= set(loaded) and len(loaded) <= len(acked) + 1  # at most the write in flight
    assert complete(store)


def test_the_tail_check_costs_the_lines_since_the_checkpoint(store: Store, monkeypatch) -> None:
    remember(store, DERIVED_CHECKPOINT_WRITES + 3)
    checked: list[int] = []
    real = derived.memory_from_row
    monkeypatch.setattr(derived, "memory_from_row", lambda row, where: checked.append(1) or real(row, where))
    assert store.sync_derived() == []  # nothing lost: nothing appended
    assert len(checked) == 3  # only the lines after the checkpoint were parsed
