"""The .memofs store: layout, records, secret gate, anchors, torn lines, concurrency,
kill -9, rehydration without re-embedding."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memofs.files import secrets
from memofs.signals.anchors import AnchorPathError
from memofs.files.records import MEMORY_KINDS
from memofs.store.project import CORE_TEMPLATE, Store, StoreError, read_jsonl, rehydrate
from support import REPO_ROOT, HashEmbedder

REPO = REPO_ROOT
PY = sys.executable
T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)


def fixed(t: datetime = T0):
    return lambda: t


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.init(tmp_path, clock=fixed())


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


# ---------------------------------------------------------------------- layout
def test_init_creates_layout(tmp_path: Path) -> None:
    s = Store.init(tmp_path, project_id="demo", clock=fixed())
    d = tmp_path / ".memofs"
    for rel in ("memory/core.md", "memory/memories.jsonl", "graph/nodes.jsonl", "graph/edges.jsonl",
                "indexes/embeddings.jsonl", "events/memory-events.jsonl", "config.json", "manifest.json", "tmp"):
        assert (d / rel).exists(), rel
    assert (d / "memory/core.md").read_text() == CORE_TEMPLATE
    for heading in ("# Core Memory", "## Identity", "## Stable Facts", "## Preferences", "## Constraints"):
        assert heading in CORE_TEMPLATE
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["version"] == "1" and manifest["projectId"] == "demo"
    assert manifest["createdAt"] == "2026-01-10T12:00:00Z"
    assert manifest["memory"]["memories"] == ".memofs/memory/memories.jsonl"
    assert s.recall_config().top_k == 10


def test_init_again_keeps_memories(store: Store) -> None:
    store.remember("Use D1 for tenant metadata", kind="decision")
    Store.init(store.root, clock=fixed(), force=True)
    assert [m.text for m in store.load().memories] == ["Use D1 for tenant metadata"]


def test_open_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="memofs init"):
        Store.open(tmp_path)


def test_memory_record_fields_and_event(store: Store) -> None:
    (store.root / "src").mkdir()
    (store.root / "src/db.py").write_bytes(b"def connect():\n    pass\n")
    m = store.remember("  API uses PostgreSQL  ", kind="decision", confidence=0.9, tags=["db", "db", "infra"],
                       anchors=["src/db.py"], supersedes=["mem_old"])
    row = lines(store.paths.memories)[0]
    assert set(row) == {"id", "text", "kind", "created_at", "confidence", "tags", "namespace", "anchors", "supersedes"}
    assert row["text"] == "API uses PostgreSQL"
    assert row["tags"] == ["db", "infra"]
    assert row["created_at"] == "2026-01-10T12:00:00Z"
    # the upstream id: "mem_" + 16 hex of a fingerprint of "<nowISO>:<content>"
    assert row["id"] == "mem_" + hashlib.sha256(b"2026-01-10T12:00:00Z:API uses PostgreSQL").hexdigest()[:16] == m.id
    assert row["anchors"] == [{"path": "src/db.py", "sha256": hashlib.sha256(b"def connect():\n    pass\n").hexdigest()}]
    ev = lines(store.paths.events)[0]
    assert ev["type"] == "memory.created" and ev["summary"] == "API uses PostgreSQL"
    assert ev["metadata"] == {"id": m.id, "kind": "decision", "tags": ["db", "infra"]}
    # rule-based extraction ran on write
    edges = lines(store.paths.graph / "edges.jsonl")
    assert edges == [{"from": "concept:api", "to": "concept:postgresql", "type": "uses", "status": "active"}]
    back = store.load().memories[0]
    assert back == m


def test_same_text_same_instant_gets_a_new_id(store: Store) -> None:
    a = store.remember("identical text here")
    b = store.remember("identical text here")
    assert a.id != b.id and len(store.load().memories) == 2


@pytest.mark.parametrize("bad, match", [
    ({"kind": "fact"}, "kind must be one of"),
    ({"confidence": 1.5}, "confidence"),
    ({"confidence": True}, "confidence"),
    ({"tags": ["has space"]}, "tag"),
    ({"tags": [f"t{i}" for i in range(51)]}, "limit is 50"),
    ({"namespace": "../x"}, "namespace"),
])
def test_remember_validation(store: Store, bad: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        store.remember("a perfectly fine memory text", **bad)
    assert store.load().memories == []


def test_empty_and_huge_text_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        store.remember("   ")
    with pytest.raises(ValueError, match="limit is 100000"):
        store.remember("x" * 100_001)


# ---------------------------------------------------------------------- secret gate
# Realistic fakes, assembled at run time so this file itself holds no token-shaped string.
FAKES = {
    "aws_access_key_id": "deploy user key " + "AKIA" + "IOSFODNN7EXAMPLE",
    "github_token": "ci token " + "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "openai_api_key": "model key " + "sk" + "-proj-" + "Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56",
    "google_api_key": "maps " + "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "slack_token": "bot " + "xoxb" + "-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "stripe_key": "billing " + "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "aws_secret_access_key": "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    "private_key_block": "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "jwt_token": "session " + "eyJ" + "hbGciOiJIUzI1NiJ9." + "eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "connection_string_credentials": "db at " + "postgres://" + "admin:s3cr3tPass" + "@db.internal:5432/app",
    "secret_assignment": "config " + "password" + " = " + "correct-horse-battery",
    "npm_token": "publish with " + "npm" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "huggingface_token": "hub " + "hf" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
}


def test_every_rule_has_a_fake() -> None:
    assert set(FAKES) == set(secrets.RULE_IDS)
    assert secrets.RULE_IDS == ("aws_access_key_id", "github_token", "openai_api_key", "google_api_key", "slack_token",
                                "stripe_key", "aws_secret_access_key", "private_key_block", "jwt_token",
                                "connection_string_credentials", "secret_assignment", "npm_token", "huggingface_token")


@pytest.mark.parametrize("rule", list(FAKES))
def test_secret_rule_blocks_and_stores_nothing(store: Store, rule: str) -> None:
    before = store.paths.memories.read_bytes(), store.paths.events.read_bytes()
    with pytest.raises(secrets.WriteBlockedError) as info:
        store.remember(FAKES[rule], kind="note")
    assert rule in info.value.rules
    assert str(info.value).startswith(f"Write blocked: content matched {len(info.value.rules)} secret pattern(s) (")
    assert (store.paths.memories.read_bytes(), store.paths.events.read_bytes()) == before
    assert not any(rule in f.name for f in store.paths.tmp.iterdir())


def test_block_message_exact_and_preview() -> None:
    text = FAKES["github_token"] + " and " + FAKES["stripe_key"]
    with pytest.raises(secrets.WriteBlockedError) as info:
        secrets.check(text)
    assert str(info.value) == "Write blocked: content matched 2 secret pattern(s) (github_token, stripe_key)."
    gh = "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    assert info.value.violations[0].preview == "ghp…8"
    assert gh not in str(info.value)


@pytest.mark.parametrize("text", [
    "Auth token validation failure handled with 401",
    "Password policy requires 12 characters and a symbol",
    "Connect to postgres://localhost:5432/app (no credentials in the URL)",
    "The api_key is read from ${OPENAI_API_KEY} at start-up",
    "password = os.environ['DB_PASSWORD']",
    "Use D1 for tenant metadata (decision rationale: edge latency)",
    "Never store secrets (keys, tokens, passwords)",
])
def test_ordinary_text_passes_the_gate(text: str) -> None:
    assert secrets.scan(text) == []


# ---------------------------------------------------------------------- anchors
def test_anchor_confinement(store: Store, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("outside")
    (store.root / "link.txt").symlink_to(outside)
    (store.root / "dirlink").symlink_to(outside.parent)
    for bad in ("../secret.txt", str(outside), "link.txt", "dirlink/secret.txt", "missing.py", "."):
        with pytest.raises(AnchorPathError):
            store.remember("memory about a file somewhere", anchors=[bad])
    assert store.load().memories == []


def test_anchor_inside_symlink_is_allowed(store: Store) -> None:
    (store.root / "real").mkdir()
    (store.root / "real/a.py").write_text("x = 1\n")
    (store.root / "alias").symlink_to(store.root / "real")
    m = store.remember("a note about a.py through a link", anchors=["alias/a.py"])
    assert m.anchors[0].path == "real/a.py"


# ---------------------------------------------------------------------- torn lines
def test_torn_last_line_is_skipped_then_repaired(store: Store) -> None:
    store.remember("first memory survives")
    good = store.paths.memories.read_bytes()
    partial = b'{"id":"mem_torn","text":"half wr'
    store.paths.memories.write_bytes(good + partial)  # what kill -9 mid-write leaves
    report = store.load()
    assert [m.text for m in report.memories] == ["first memory survives"]
    assert len(report.warnings) == 1 and "torn last line" in report.warnings[0] and ":2:" in report.warnings[0]
    store.remember("second memory after the crash")
    assert [m.text for m in store.load().memories] == ["first memory survives", "second memory after the crash"]
    assert store.load().warnings == []
    saved = list(store.paths.tmp.glob("torn-memories.jsonl-*"))
    assert len(saved) == 1 and saved[0].read_bytes() == partial


def test_unterminated_but_complete_last_line_is_kept(store: Store) -> None:
    store.remember("first")
    data = store.paths.memories.read_bytes()
    store.paths.memories.write_bytes(data[:-1])  # crash between the JSON and its newline
    assert [m.text for m in store.load().memories] == ["first"]
    store.remember("second one")
    assert [m.text for m in store.load().memories] == ["first", "second one"]


def test_corrupt_middle_line_names_file_and_line(store: Store) -> None:
    store.remember("one")
    store.remember("two")
    rows = store.paths.memories.read_text().splitlines()
    store.paths.memories.write_text(rows[0] + "\n{broken\n" + rows[1] + "\n")
    with pytest.raises(StoreError, match=r"memories\.jsonl:2: invalid JSON"):
        store.load()


def test_bad_field_names_file_line_field(store: Store) -> None:
    store.paths.memories.write_text(json.dumps({"id": "m1", "text": "x", "kind": "fact"}) + "\n")
    with pytest.raises(StoreError, match=r"memories\.jsonl:1: field 'kind'"):
        store.load()
    store.paths.memories.write_text(json.dumps({"id": "m1", "text": "x", "confidence": 2}) + "\n")
    with pytest.raises(StoreError, match=r"memories\.jsonl:1: field 'confidence'"):
        store.load()


# ---------------------------------------------------------------------- processes
WRITER = """
import sys
from datetime import datetime, timezone
from memofs.store.project import Store
store = Store.open(sys.argv[1], clock=lambda: datetime.now(timezone.utc))
tag, n = sys.argv[2], int(sys.argv[3])
pad = "\U0001F600" * int(sys.argv[4])
for i in range(n):
    m = store.remember(f"writer {tag} memory {i} {pad}", kind="note")
    print(m.id, flush=True)
"""


def _writer(root: Path, tag: str, n: int, pad: int = 0) -> subprocess.Popen:
    return subprocess.Popen([PY, "-c", WRITER, str(root), tag, str(n), str(pad)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_concurrent_writer_processes_lose_nothing(store: Store) -> None:
    procs = [_writer(store.root, tag, 50) for tag in ("a", "b")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    acked = {line for out, _ in outs for line in out.split()}
    mems = store.load().memories
    assert len(acked) == 100 and {m.id for m in mems} == acked
    assert sorted(m.text.split()[1] + m.text.split()[3] for m in mems) == sorted(
        f"{t}{i}" for t in "ab" for i in range(50))
    events, warnings = read_jsonl(store.paths.events)
    assert len(events) == 100 and warnings == []


class _Acks:
    """The ids a writer printed, each after its write returned: one per *complete* line.
    The pipe is read with ``os.read`` and split on newlines here, because a non-blocking
    ``readline`` returns whatever has arrived, and a print read in two pieces gave a false
    empty id (a flaky failure in CI). A line the kill cut short acknowledges nothing."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.ids: list[str] = []
        self._rest = b""

    def _take(self, data: bytes) -> None:
        *lines, self._rest = (self._rest + data).split(b"\n")
        self.ids += [x.decode().strip() for x in lines if x.strip()]

    def poll(self, *, until_count: int | None = None, seconds: float = 0.0, deadline_s: float = 60.0) -> None:
        """Read until ``until_count`` ids arrived (or ``deadline_s``), or for ``seconds``."""
        end = time.monotonic() + (deadline_s if until_count is not None else seconds)
        while time.monotonic() < end and (until_count is None or len(self.ids) < until_count):
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                data = b""
            if data:
                self._take(data)
            else:
                time.sleep(0.002)

    def drain(self) -> None:
        """Everything left in the pipe once the writer is dead (printed before the kill, read late)."""
        os.set_blocking(self.fd, True)
        while data := os.read(self.fd, 1 << 16):
            self._take(data)


@pytest.mark.parametrize("delay", [0.0, 0.03, 0.15])
def test_kill_9_mid_writes_leaves_store_readable(store: Store, delay: float) -> None:
    # large records make a kill inside a write likely; at most the write in flight may be
    # lost, every acknowledged one must be there, and the store must load
    proc = _writer(store.root, "k", 10_000, pad=60_000)
    acks = _Acks(proc)
    acks.poll(until_count=3)  # the kill lands after real, acknowledged writes
    acks.poll(seconds=delay)  # ... at a varying point of the next one
    acked_before_kill = len(acks.ids)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    acks.drain()
    acked = acks.ids
    proc.stdout.close()
    proc.stderr.close()
    assert acked_before_kill >= 3, "the writer acknowledged nothing before the kill: the test tested nothing"
    assert len(set(acked)) == len(acked)
    report = store.load()  # readable, whatever the kill left
    loaded = [m.id for m in report.memories]
    assert set(acked) <= set(loaded), f"{len(set(acked) - set(loaded))} acknowledged writes lost"
    assert len(acked) <= len(loaded) <= len(acked) + 1  # + at most the write in flight
    assert all(m.text.startswith("writer k memory") for m in report.memories)
    events, _ = read_jsonl(store.paths.events)
    assert {e["metadata"]["id"] for _, e in events} >= set(acked)  # each acknowledged write has its event
    # the next writer repairs any torn tail and nothing is lost afterwards
    m = store.remember("after the crash")
    after = store.load()
    assert after.warnings == [] and after.memories[-1].id == m.id
    assert len(after.memories) == len(loaded) + 1
    assert set(acked) <= {x.id for x in after.memories}


FSIZE_WRITER = """
import resource, signal, sys
from datetime import datetime, timezone
from memofs.store.project import Store
store = Store.open(sys.argv[1], clock=lambda: datetime.now(timezone.utc))
limit = int(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the default kills the process
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
for i in range(10):
    m = store.remember(f"big memory {i} " + "\U0001F600" * 90_000, kind="note")
    print(m.id, flush=True)
"""


def test_crash_inside_the_append_tears_a_line_for_real(store: Store) -> None:
    """A real process dies inside ``append_line``: RLIMIT_FSIZE makes the kernel cut the
    write short and kill the writer with SIGXFSZ on the rest, exactly a crash mid-write."""
    store.remember("small memory before the crash")
    limit = store.paths.memories.stat().st_size + 600_000  # the 2nd ~360 KB line crosses it
    proc = subprocess.run([PY, "-c", FSIZE_WRITER, str(store.root), str(limit)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGXFSZ, proc.stderr
    acked = proc.stdout.split()
    assert len(acked) == 1
    raw = store.paths.memories.read_bytes()
    assert len(raw) == limit and not raw.endswith(b"\n")  # a genuinely torn last line
    report = store.load()
    assert [m.id for m in report.memories][1:] == acked
    assert len(report.warnings) == 1 and "torn last line" in report.warnings[0]
    store.remember("small memory after the crash")
    after = store.load()
    assert after.warnings == [] and len(after.memories) == 3


# ---------------------------------------------------------------------- rehydration
def test_rehydrate_reuses_vectors_and_embeds_only_changes(store: Store) -> None:
    emb = HashEmbedder(unit=True)
    for i in range(3):
        store.remember(f"memory number {i} about databases", embedder=emb)
    assert len(emb.encoded) == 3
    assert len(lines(store.paths.embeddings)) == 3
    fresh = HashEmbedder(unit=True)
    r = rehydrate(store, embedder=fresh, clock=fixed())
    assert len(fresh.encoded) == 0 and r.loaded_vectors == 3 and r.embedded == 0
    # a memory written without an embedder (e.g. lexical CLI) is embedded once, then persisted
    store.remember("a memory written lexical-only")
    r = rehydrate(store, embedder=fresh, clock=fixed())
    assert len(fresh.encoded) == 1 and r.embedded == 1
    r = rehydrate(store, embedder=fresh, clock=fixed())
    assert len(fresh.encoded) == 1
    # a changed text (same id rewritten) is re-embedded
    row = lines(store.paths.memories)[0]
    row["text"] = "memory number 0 now about caches"
    with open(store.paths.memories, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    rehydrate(store, embedder=fresh, clock=fixed())
    assert len(fresh.encoded) == 2
    stored = {x["id"]: x for x in lines(store.paths.embeddings)}
    want = emb.encode([row["text"]])[0]
    assert np.allclose(stored[row["id"]]["vector"], want, atol=1e-6)


def test_rehydrated_recaller_clock_and_stale_flag(tmp_path: Path) -> None:
    s = Store.init(tmp_path, clock=fixed(T0 - timedelta(days=30)))
    (tmp_path / "a.py").write_text("v1\n")
    s.remember("retry policy lives in a.py", kind="decision", anchors=["a.py"])
    r = rehydrate(s, clock=fixed(T0))
    res = r.recaller.recall("retry policy", 1, explain=True)[0]
    assert res.explain["signals"]["recency"] == pytest.approx(0.5, abs=1e-6)  # 0.5 ** (30 / 30)
    assert res.explain["penalties"] == []
    (tmp_path / "a.py").write_text("v2\n")
    r = rehydrate(s, clock=fixed(T0))
    res2 = r.recaller.recall("retry policy", 1, explain=True)[0]
    assert [p["name"] for p in res2.explain["penalties"]] == ["stale_anchor"]
    assert res2.score == pytest.approx(round(res.score * 0.5, 4), abs=1e-4)


def test_all_kinds_round_trip(store: Store) -> None:
    for k in MEMORY_KINDS:
        store.remember(f"a memory of kind {k}", kind=k, confidence=0.5)
    assert [m.kind for m in store.load().memories] == list(MEMORY_KINDS)


# ---------------------------------------------------------------------- writes at scale (issue 18)
def test_remember_appends_graph_facts_in_place(store: Store) -> None:
    store.remember("The api uses Postgres", now=T0)
    nodes, edges = store.paths.graph / "nodes.jsonl", store.paths.graph / "edges.jsonl"
    before, inode = nodes.read_bytes(), nodes.stat().st_ino
    store.remember("The worker uses Redis", now=T0 + timedelta(seconds=1))
    assert nodes.stat().st_ino == inode and nodes.read_bytes().startswith(before)  # appended, not rewritten
    fresh = Store.open(store.root).load_graph()  # what a reader of the files sees
    assert {"postgres", "redis"} <= {n.label.lower() for n in fresh.nodes} and len(fresh.edges) == 2
    store.remember("The api uses Postgres", now=T0 + timedelta(seconds=2))  # nothing new: no line at all
    assert len(nodes.read_text().splitlines()) == len(fresh.nodes) and len(edges.read_text().splitlines()) == len(fresh.edges)


def test_writes_of_another_process_are_seen_by_a_long_lived_store(store: Store) -> None:
    other = Store.open(store.root)
    a = store.remember("same text", now=T0)
    b = other.remember("same text", now=T0)  # same text, same instant, another writer
    c = store.remember("same text", now=T0)  # this store must see b's id without re-reading from scratch
    assert len({a.id, b.id, c.id}) == 3
    other.remember("The cache uses Redis", now=T0)
    store.remember("The api uses Postgres", now=T0)
    labels = {n.label.lower() for n in Store.open(store.root).load_graph().nodes}
    assert {"redis", "postgres"} <= labels  # neither writer dropped the other's facts


def test_a_replaced_memories_file_is_read_again_for_ids(store: Store, tmp_path: Path) -> None:
    a = store.remember("same text", now=T0)
    (tmp_path / "other").mkdir()
    x = Store.init(tmp_path / "other", clock=fixed()).remember("other text", now=T0)
    joined = store.paths.memories.read_text() + (tmp_path / "other" / ".memofs/memory/memories.jsonl").read_text()
    tmp = store.paths.memories.with_suffix(".new")
    tmp.write_text(joined)
    os.replace(tmp, store.paths.memories)  # another tool rewrote the file: a new inode
    y = store.remember("other text", now=T0)
    assert y.id != x.id and [m.id for m in store.load().memories] == [a.id, x.id, y.id]


def test_a_torn_graph_append_is_skipped_then_cut(store: Store) -> None:
    store.remember("The api uses Postgres", now=T0)
    nodes = store.paths.graph / "nodes.jsonl"
    with open(nodes, "ab") as fh:
        fh.write(b'{"id": "concept:half", "lab')  # a writer killed mid-append
    assert "concept:half" not in Store.open(store.root).load_graph()  # readable meanwhile
    store.remember("The worker uses Redis", now=T0 + timedelta(seconds=1))
    g = Store.open(store.root).load_graph()
    assert "concept:half" not in g and any(n.label.lower() == "redis" for n in g.nodes)


# ---------------------------------------------------------------------- the live view (issue 18)
def test_live_store_applies_appended_lines_without_a_full_reload(store: Store) -> None:
    from memofs.store.project import LiveStore

    store.remember("the deploy window is friday", now=T0)
    emb = HashEmbedder(dim=4)
    live = LiveStore(Store.open(store.root, clock=fixed()), embedder=emb)
    first = live.state()
    assert live.full_loads == 1
    other = Store.open(store.root)  # another process writes
    other.remember("the api uses Postgres for billing", now=T0 + timedelta(seconds=1))
    live.remember("rollback runbook lives in ops", now=T0 + timedelta(seconds=2))
    st = live.state()
    assert st is first and st.recaller is first.recaller and live.full_loads == 1  # applied in place
    ids = [r.id for r in st.recaller.recall("postgres billing", 5, now=T0)]
    assert ids and st.recaller.memories[ids[0]].text == "the api uses Postgres for billing"
    assert "rollback runbook lives in ops" in {m.text for m in st.memories}
    assert "concept:postgres-for-billing" in st.recaller.graph  # the graph followed
    assert emb.encoded.count("rollback runbook lives in ops") == 1  # remember's vector reused, not re-encoded
    fresh = LiveStore(Store.open(store.root, clock=fixed()), embedder=HashEmbedder(dim=4)).state()
    assert sorted(m.id for m in st.memories) == sorted(m.id for m in fresh.memories)  # same as a full load
    assert st.notes_head == fresh.notes_head
    # a rewritten file: full reload
    tmp = store.paths.memories.with_suffix(".new")
    tmp.write_text(store.paths.memories.read_text())
    os.replace(tmp, store.paths.memories)
    assert live.state() is not first and live.full_loads == 2


def test_recent_events_reads_the_tail_like_the_whole_file(store: Store) -> None:
    from memofs.files.jsonl import tail_lines

    for i in range(40):
        store.remember(f"event number {i} " + "x" * (i * 37 % 300), now=T0 + timedelta(seconds=i))
    rows, _ = read_jsonl(store.paths.events)
    want = [obj for _, obj in rows][::-1]
    for n in (1, 5, 20, 40, 60):
        assert store.recent_events(n) == (want[:n], [])
    raw = store.paths.events.read_bytes().split(b"\n")
    for block in (7, 64, 1 << 16):  # lines longer than a block, cut at any point
        assert tail_lines(store.paths.events, 25, block=block) == [x for x in raw if x.strip()][-25:]
    with open(store.paths.events, "ab") as fh:
        fh.write(b'{"id": "evt_torn", "ty')  # a writer killed mid-append
    events, warnings = store.recent_events(3)
    assert events == want[:3] and len(warnings) == 1 and "torn last line" in warnings[0]
