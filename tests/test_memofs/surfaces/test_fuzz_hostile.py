"""Issue 36 families for the fuzz suite: hostile input that once hung, exited 3 or left
the store unreadable. Small stores, fixed inputs (plus derandomized hypothesis where a
family is open-ended), each test well under a few seconds.

* metadata depth, size and huge integers refused on write exactly where a load would
  refuse the line (one clean error, exit 1, the store still readable after);
* strict boolean settings; MCP graph resources read with the store's reader.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memofs.surfaces.cli import app
from memofs_eval.bench.hostile_probe import forge_text, swap_vector_rows  # the probe's forgeries
from support import HashEmbedder  # deterministic 8-d vectors (the vector forgery needs vectors)

ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}
NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
runner = CliRunner()


def cli(root: Path, *args: str, env: dict | None = None):
    return runner.invoke(app, ["--root", str(root), *args], env={**ENV, **(env or {})})


def assert_clean(res, codes=(0, 1)) -> None:
    """Exit 0/1 through the CLI boundary, one ``memofs: error:`` line: never exit 3."""
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in codes, (res.exit_code, res.output)
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    if res.exit_code == 1 and res.stderr.strip():  # doctor's problems go to stdout
        lines = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("WARNING")]
        assert len(lines) <= 1 and all(ln.startswith("memofs: error: ") for ln in lines), res.stderr


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    assert cli(tmp_path, "init").exit_code == 0
    assert cli(tmp_path, "remember", "Postgres uses PgBouncer for pooling", "--kind", "decision").exit_code == 0
    return tmp_path


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# ------------------------------------------------------------------ item 1, item 10: metadata
@pytest.mark.parametrize("meta", [nested(70), nested(64), "[" * 5000 + "]" * 5000,
                                  '{"n": ' + "9" * 5000 + "}", json.dumps({"big": "x" * 70_000}),
                                  '{"a": "\\ud800"}'])  # a lone surrogate (exit 3 before: found by the re-run probe)
def test_unstorable_metadata_is_refused_and_the_store_stays_readable(store: Path, meta: str) -> None:
    res = cli(store, "remember", "deep metadata memory", "--metadata", meta)
    assert_clean(res, codes=(1,))
    assert meta[:40] not in res.stderr  # the rejected value is never echoed
    for _ in range(2):  # the sequence: one more write, then every command
        assert_clean(cli(store, "remember", "another memory after the refusal"))
    for args in (["status"], ["recall", "-q", "postgres"], ["doctor"]):
        assert_clean(cli(store, *args), codes=(0,))


def test_metadata_at_the_depth_a_load_accepts_is_stored_and_read_back(store: Path) -> None:
    # a line's top-level object is depth 1, so metadata may nest 63 levels (its own included)
    res = cli(store, "remember", "deepest accepted metadata", "--metadata", nested(63), "--json")
    assert_clean(res, codes=(0,))
    mid = json.loads(res.stdout)["id"]
    out = json.loads(cli(store, "recall", "-q", "deepest accepted metadata", "--json").stdout)
    assert mid in {r["id"] for r in out["results"]}


def test_unstorable_metadata_over_mcp_is_a_validation_error(store: Path) -> None:
    from memofs.store.cursor import ContextCache
    from memofs.store.project import LiveStore, Store
    from memofs.surfaces.mcp_server import MemofsTools, ToolError

    tools = MemofsTools(LiveStore(Store.open(store, clock=lambda: NOW)), ContextCache(clock=lambda: 0.0), lambda: NOW)
    deep: dict = {}
    cur = deep
    for _ in range(80):
        cur["a"] = {}
        cur = cur["a"]
    for meta in (deep, {"big": "x" * 5_000_000}, {"n": 10 ** 5000}, {"f": float("inf")}):
        with pytest.raises(ToolError) as exc:
            tools.call("memofs.remember", {"content": "hostile metadata memory", "metadata": meta})
        assert exc.value.code == "MCP_VALIDATION_ERROR"
    tools.call("memofs.remember", {"content": "a later memory"})
    assert len(tools.live.state().memories) == 2


@pytest.mark.parametrize("value,code", [("maybe", 1), ("1", 0), ("off", 0)])
def test_embed_on_write_is_a_strict_boolean(store: Path, value: str, code: int) -> None:
    res = cli(store, "remember", "flag memory", env={"MEMOFS_EMBED_ON_WRITE": value, "MEMOFS_EMBEDDER": "none"})
    assert_clean(res, codes=(code,))
    if code:
        assert "MEMOFS_EMBED_ON_WRITE" in res.stderr


def test_mcp_graph_resources_use_the_store_reader(store: Path) -> None:
    from memofs.store.cursor import ContextCache
    from memofs.store.project import LiveStore, Store
    from memofs.surfaces.mcp_server import MemofsTools, ToolError

    tools = MemofsTools(LiveStore(Store.open(store, clock=lambda: NOW)), ContextCache(clock=lambda: 0.0), lambda: NOW)
    nodes = store / ".memofs/graph/nodes.jsonl"
    good = json.loads(tools.read_resource("memofs://graph/nodes"))
    assert good  # the remembered memory made graph nodes
    nodes.write_text(nodes.read_text() + "[" * 5000 + "]" * 5000 + "\n" + json.dumps({"id": "late"}) + "\n")
    with pytest.raises(ToolError) as exc:
        tools.read_resource("memofs://graph/nodes")
    assert exc.value.code == "MEMOFS_STORE_ERROR" and "nested deeper" in str(exc.value)


# ------------------------------------------------------------------ item 2: query length
@pytest.mark.parametrize("size", [4096, 4097, 65_536, 1 << 20])
@pytest.mark.parametrize("command", ["recall", "context"])
def test_query_length_up_to_1mb_is_answered_or_refused_cleanly(store: Path, command: str, size: int) -> None:
    from memofs.store.project import MAX_QUERY_CHARS

    res = cli(store, command, "-q", ("postgres" * (size // 8 + 1))[:size])
    assert_clean(res, codes=(0,) if size <= MAX_QUERY_CHARS else (1,))
    if size > MAX_QUERY_CHARS:
        assert f"the limit is {MAX_QUERY_CHARS}" in res.stderr


def test_mcp_long_single_word_query_is_answered(store: Path) -> None:
    from memofs.store.cursor import ContextCache
    from memofs.store.project import MAX_QUERY_CHARS, LiveStore, Store
    from memofs.surfaces.mcp_server import MemofsTools

    tools = MemofsTools(LiveStore(Store.open(store, clock=lambda: NOW)), ContextCache(clock=lambda: 0.0), lambda: NOW)
    word = ("pgbouncer" * 500)[:MAX_QUERY_CHARS]
    assert tools.call("memofs.recall", {"query": word})["items"]  # "pgbouncer" lies inside it: partial credit


# ------------------------------------------------------------------ items 3, 4, 6, 9: odd entries at store paths
KINDS = ("fifo", "empty", "dir", "link_out", "loop")
CACHES = ("indexes/derived.json", "indexes/memories.sidecar.json", "indexes/memories.*.texts.npy",
          "indexes/memories.*.ids.npy", "indexes/terms.sidecar.json", "indexes/terms.*.data.npy",
          "indexes/terms.*.vocab.npy", "tmp/context-cache.json", "tmp/cursor.key")
DURABLE = ("memory/memories.jsonl", "memory/core.md", "events/memory-events.jsonl", "graph/nodes.jsonl",
           "graph/edges.jsonl", "indexes/embeddings.jsonl", "config.json", "manifest.json", ".lock")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("hostile-template")
    assert cli(root, "init").exit_code == 0
    ids = [json.loads(cli(root, "remember", f"Postgres pool {i} uses PgBouncer", "--json").stdout)["id"] for i in range(4)]
    assert cli(root, "context", "-q", "postgres pool").exit_code == 0  # caches, cursor key, context cache
    return root, ids


def damage(src: Path, dst: Path, rel: str, kind: str) -> Path:
    import shutil

    shutil.copytree(src, dst, symlinks=True)
    [path] = sorted((dst / ".memofs").glob(rel)) or [dst / ".memofs" / rel]
    if os.path.lexists(path):
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "dir":
        path.mkdir()
    elif kind == "link_out":
        outside = dst.parent / f"{dst.name}-outside.txt"
        outside.write_text("OUTSIDE PRIVATE KEY MATERIAL\n")
        path.symlink_to(outside)
    else:
        path.symlink_to(path.name)
    return path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rel", CACHES)
@pytest.mark.parametrize("kind", KINDS)
def test_odd_entries_at_cache_paths_are_rebuilt_never_fatal(template, tmp_path: Path, kind: str, rel: str) -> None:
    """A cache (index sidecars, derived.json, the context cache, the cursor key) holding a
    FIFO, an empty file, a directory, a link out or a loop: no command hangs or exits 3;
    recall answers every memory (the damage means "rebuild"), or, for the cursor key,
    doctor says what fails and ``doctor --fix`` repairs it."""
    src, ids = template
    root = tmp_path / "case"
    damage(src, root, rel, kind)
    res = cli(root, "recall", "-q", "postgres pool", "-k", "10", "--json")
    assert_clean(res, codes=(0,))
    assert {r["id"] for r in json.loads(res.stdout)["results"]} == set(ids)
    ctx = cli(root, "context", "-q", "postgres pool")
    assert_clean(ctx)
    doc = cli(root, "doctor")
    assert_clean(doc)
    if ctx.exit_code:  # doctor runs what the commands run
        assert doc.exit_code == 1, doc.stdout
    assert_clean(cli(root, "doctor", "--fix"), codes=(0,))
    for args in (["recall", "-q", "postgres"], ["context", "-q", "postgres"], ["remember", "after the fix"]):
        assert_clean(cli(root, *args), codes=(0,))
    assert "OUTSIDE PRIVATE" not in ctx.stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rel", DURABLE)
@pytest.mark.parametrize("kind", KINDS)
def test_odd_entries_at_durable_paths_give_clean_errors_and_doctor_agrees(template, tmp_path: Path, kind: str, rel: str) -> None:
    """The durable files (and the lock) holding a FIFO, an empty file, a directory, a link
    out of ``.memofs/`` or a loop: clean errors only; doctor is unhealthy whenever a
    command fails; a link out is refused, never read or appended to."""
    src, _ = template
    root = tmp_path / "case"
    damage(src, root, rel, kind)
    outside = root.parent / f"{root.name}-outside.txt"
    failed = False
    for args in (["status"], ["recall", "-q", "postgres"], ["context", "-q", "postgres"],
                 ["remember", "a memory written after the damage"]):
        res = cli(root, *args)
        assert_clean(res)
        assert "OUTSIDE PRIVATE" not in res.stdout, args
        failed = failed or res.exit_code == 1
    if kind == "link_out":
        assert failed and outside.read_text() == "OUTSIDE PRIVATE KEY MATERIAL\n"
    doc = cli(root, "doctor")
    assert_clean(doc)
    if failed:
        assert doc.exit_code == 1, doc.stdout


def test_learned_model_fifo_or_not_json_is_a_clean_error(store: Path) -> None:
    cfg_path = store / ".memofs/config.json"
    for n, make in enumerate((os.mkfifo, lambda p: p.write_text("not json"), lambda p: p.symlink_to(p.name))):
        model = store / f"model{n}.json"
        make(model)
        cfg = json.loads(cfg_path.read_text())
        cfg["recall"] = {"fusion": "learned", "learned_model": str(model)}
        cfg_path.write_text(json.dumps(cfg))
        res = cli(store, "recall", "-q", "postgres")
        assert_clean(res, codes=(1,))
        doc = cli(store, "doctor")
        assert_clean(doc, codes=(1,))
        assert "learned model" in doc.stdout


# ------------------------------------------------------------------ item 5: symlink loops at anchors
def test_symlink_loop_at_an_anchored_path_is_drift_not_a_crash(store: Path) -> None:
    (store / "src").mkdir()
    (store / "src/t.py").write_text("x = 1\n")
    assert_clean(cli(store, "remember", "anchored note about tokens", "--anchor", "src/t.py"), codes=(0,))
    (store / "src/t.py").unlink()
    (store / "src/t.py").symlink_to("t.py")
    st = cli(store, "status", "--json")
    assert_clean(st, codes=(0,))
    [stale] = json.loads(st.stdout)["stale_anchors"]
    assert stale["change"] == "unreadable" and stale["path"] == "src/t.py"
    for args in (["recall", "-q", "anchored tokens"], ["doctor"]):
        assert_clean(cli(store, *args), codes=(0,))
    ctx = cli(store, "context", "-q", "anchored tokens")
    assert_clean(ctx, codes=(0,))
    assert "anchored note about tokens" in ctx.stdout  # the recall section is kept
    res = cli(store, "remember", "another", "--anchor", "src/t.py")
    assert_clean(res, codes=(1,))
    assert "link loop" in res.stderr


# ------------------------------------------------------------------ item 8: errors never echo a secret
@pytest.mark.parametrize("args", [
    ["--source-ref", '{"sourceType": "web", "url": "ftp://admin:SECRETVALUE@x"}'],
    ["--source-ref", '{"sourceType": "f", "path": "/ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}'],
    ["--kind", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"],
    ["--anchor", "/ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"],
    ["--metadata", '{"k": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"'],
])
def test_refused_values_are_not_echoed(store: Path, args: list[str]) -> None:
    res = cli(store, "remember", "a memory with a bad option", *args)
    assert_clean(res, codes=(1,))
    assert "SECRETVALUE" not in res.output and "a1B2c3D4e5F6g7H8i9J0" not in res.output


def test_mcp_health_runs_what_doctor_runs(store: Path) -> None:
    from memofs.store.cursor import ContextCache
    from memofs.store.project import LiveStore, Store
    from memofs.surfaces.mcp_server import MemofsTools

    tools = MemofsTools(LiveStore(Store.open(store, clock=lambda: NOW)), ContextCache(clock=lambda: 0.0), lambda: NOW)
    assert json.loads(tools.read_resource("memofs://health"))["healthy"]
    (store / ".memofs/tmp").mkdir(exist_ok=True)
    (store / ".memofs/tmp/cursor.key").write_text("not hex")
    health = json.loads(tools.read_resource("memofs://health"))
    doctor = cli(store, "doctor", "--json")
    assert not health["healthy"] and doctor.exit_code == 1
    assert health["problems"] == [p for p in json.loads(doctor.stdout)["problems"] if "cursor.key" in p]


# ------------------------------------------------------------------ item 7: forged index caches
@pytest.fixture()
def other_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run a block under another user's cache key (a forger, or the machine a clone came from)."""
    from contextlib import contextmanager

    @contextmanager
    def under() -> object:
        with monkeypatch.context() as m:
            m.setenv("MEMOFS_CACHE_DIR", str(tmp_path / "forger-cache"))
            yield

    return under


def test_a_text_forged_through_the_index_writer_is_rebuilt_from_memories_jsonl(store: Path, other_key) -> None:
    """Failed before the seal: recall returned "forged zebra" (in no memories.jsonl line) and doctor said healthy."""
    from memofs.store.project import Store

    assert_clean(cli(store, "recall", "-q", "pgbouncer"), codes=(0,))  # writes the sealed caches
    with other_key():
        forge_text(Store.open(store), "Postgres uses PgBouncer for pooling", "forged zebra text in no memories line")
    doc = cli(store, "doctor")
    assert doc.exit_code == 1 and "memories.sidecar.json is not sealed" in doc.stdout, doc.stdout
    _forge_text_again = cli(store, "recall", "-q", "zebra pgbouncer", "--json")
    texts = [r["text"] for r in json.loads(_forge_text_again.stdout)["results"]]
    assert texts == ["Postgres uses PgBouncer for pooling"]
    with other_key():
        forge_text(Store.open(store), "Postgres uses PgBouncer for pooling", "forged zebra text in no memories line")
    assert_clean(cli(store, "doctor", "--fix"), codes=(0,))
    assert_clean(cli(store, "doctor"), codes=(0,))  # rebuilt, sealed, healthy


def _vector_store(root: Path):
    from memofs.store.project import Store

    root.mkdir(exist_ok=True)
    s = Store.init(root, clock=lambda: NOW)
    emb = HashEmbedder()
    for i, topic in enumerate(["databases", "caches", "deploy windows", "queues", "logging", "tests"]):
        s.remember(f"memory {i} about {topic}", embedder=emb, now=NOW)
    return s


def test_two_swapped_embedding_rows_of_unit_length_are_rebuilt(tmp_path: Path) -> None:
    """Failed before the seal: the swapped rows were adopted (unit length kept), moving a memory's score."""
    import numpy as np

    from memofs.signals.vector_index import unit_rows
    from memofs.store.project import rehydrate

    s = _vector_store(tmp_path)
    rehydrate(s, embedder=HashEmbedder())
    swap_vector_rows(s)
    state = rehydrate(s, embedder=HashEmbedder())
    qv = HashEmbedder().encode(["databases"])[0]
    raw = unit_rows(HashEmbedder().encode([m.text for m in state.memories]), 8)
    want = raw @ (qv / np.linalg.norm(qv))  # the true cosines, from the texts
    np.testing.assert_allclose(state.recaller._vectors.row_scores(qv), want, atol=1e-6)


def test_a_cache_copied_from_another_key_or_store_is_rebuilt(tmp_path: Path, other_key) -> None:
    import shutil

    from memofs.files.memories_sidecar import MemoriesSidecar
    from memofs.signals.vector_sidecar import VectorSidecar
    from memofs.store.project import rehydrate

    with other_key():  # the same store, its caches written on another machine (a clone)
        s = _vector_store(tmp_path / "a")
        rehydrate(s, embedder=HashEmbedder())
    d = s.paths.embeddings.parent
    assert MemoriesSidecar(s.paths.memories, d).read() is None
    assert VectorSidecar(s.paths.embeddings).read("hash-test", 8) is None
    rehydrate(s, embedder=HashEmbedder())  # rebuilt under this user's key
    assert MemoriesSidecar(s.paths.memories, d).read() is not None
    b = _vector_store(tmp_path / "b")  # same texts, same key, another store's files
    for f in d.iterdir():
        if ".sidecar." in f.name or f.suffix == ".npy":
            shutil.copy(f, b.paths.embeddings.parent / f.name)
    assert MemoriesSidecar(b.paths.memories, b.paths.embeddings.parent).read() is None  # bound to its own jsonl


def test_sealed_caches_are_adopted_and_rank_exactly_as_a_cold_start(tmp_path: Path) -> None:
    """Sealing changes no ranking: the later start (sealed sidecars adopted, nothing encoded)
    gives the results and scores of a start from the durable record alone."""
    import shutil

    from memofs.store.project import rehydrate

    s = _vector_store(tmp_path)
    rehydrate(s, embedder=HashEmbedder())
    emb = HashEmbedder()
    warm = rehydrate(s, embedder=emb)
    assert emb.encoded == []
    got = [(r.id, r.score) for q in ("databases", "queues logging", "memory") for r in warm.recaller.recall(q, now=NOW)]
    d = s.paths.embeddings.parent
    for f in list(d.iterdir()):
        if ".sidecar." in f.name or f.suffix == ".npy":
            shutil.rmtree(f) if f.is_dir() else f.unlink()
    cold = rehydrate(s, embedder=HashEmbedder())
    assert got == [(r.id, r.score) for q in ("databases", "queues logging", "memory") for r in cold.recaller.recall(q, now=NOW)]


def test_the_cache_key_lives_outside_the_project_0600_and_racing_creators_agree(tmp_path: Path) -> None:
    import stat
    import subprocess
    import sys

    env = {**os.environ, "MEMOFS_CACHE_DIR": str(tmp_path / "keys-home")}
    code = "from memofs.files import cache_seal; print(cache_seal.key().hex())"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(6)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and len(keys.pop()) == 64
    path = tmp_path / "keys-home" / "keys" / "cache-seal.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_bytes(b"short")  # damaged: replaced, caches then rebuild once
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert len(out.stdout.strip()) == 64 and stat.S_IMODE(path.stat().st_mode) == 0o600


# ------------------------------------------------------------------ left alone last time
def test_a_project_root_that_is_a_symlink_loop_is_one_clean_line(tmp_path: Path) -> None:
    """Failed before: ``Path.resolve()`` raised RuntimeError in ``Store.__init__`` (exit 3)."""
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    for args in (["status"], ["init"], ["recall", "-q", "x"], ["remember", "a memory"], ["doctor"]):
        res = runner.invoke(app, ["--root", str(loop), *args], env=ENV)
        assert_clean(res, codes=(1,))
        assert "cannot be resolved" in res.stderr, res.stderr


@pytest.mark.parametrize("rel", ["memory/core.md", "memory/memories.jsonl"])
def test_a_link_out_planted_while_the_mcp_server_runs_is_refused_per_call(store: Path, rel: str) -> None:
    """Failed before: links were checked at start only, so the running server printed the
    outside file (context shows core.md) or appended to it (remember)."""
    from memofs.store.cursor import ContextCache
    from memofs.store.project import LiveStore, Store
    from memofs.surfaces.mcp_server import MemofsTools, ToolError

    tools = MemofsTools(LiveStore(Store.open(store, clock=lambda: NOW)), ContextCache(clock=lambda: 0.0), lambda: NOW)
    assert tools.call("memofs.recall", {"query": "postgres"})["items"]
    outside = store.parent / f"{store.name}-outside.txt"
    outside.write_text("OUTSIDE PRIVATE KEY MATERIAL\n")
    planted = store / ".memofs" / rel
    planted.unlink()
    planted.symlink_to(outside)
    for name, args in (("memofs.context", {"query": "postgres"}), ("memofs.remember", {"text": "after the plant"}),
                       ("memofs.recall", {"query": "postgres"})):
        with pytest.raises(ToolError) as err:
            tools.call(name, args)
        assert err.value.code == "MEMOFS_STORE_ERROR" and "symbolic link leaving" in str(err.value)
    with pytest.raises(ToolError):
        tools.read_resource("memofs://memory/core")
    assert outside.read_text() == "OUTSIDE PRIVATE KEY MATERIAL\n"


# ------------------------------------------------------------------ item 10: raw JSON-RPC lines over stdio
DEEP = '{"a":' * 5000 + "1" + "}" * 5000
RAW_LINES = [  # (line, JSON-RPC code of the reply, id it must carry)
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memofs.recall","arguments":{"query":"\\ud800"}}}', -32700, 7),
    ('{"jsonrpc":"2.0","id":8,"method":"tools/call","params":' + DEEP + "}", -32700, 8),
    ('{"jsonrpc":"2.0","id":"s-9","method":"tools/list","params":{"x":' + "[" * 5000 + "]" * 5000 + "}}", -32700, "s-9"),
    ("not json at all", -32700, None),
    ('{"jsonrpc":"2.0","id":10,"method":"tools/list"', -32700, 10),  # cut short
    ("[]", -32600, None),
    ("[1, 2]", -32600, None),
    ("42", -32600, None),
    ('"a string"', -32600, None),
    ("null", -32600, None),
    ('{"jsonrpc":"2.0","id":11,"method":5}', -32600, 11),
    ('{"jsonrpc":"1.0","id":12,"method":"ping"}', -32600, 12),
    ('{"id":13,"method":"ping"}', -32600, 13),
    ('{"jsonrpc":"2.0","id":14}', -32600, None),  # neither request nor response: no id to answer
    ("\x00\x01\x02", -32700, None),
    ('{"jsonrpc":"2.0","id":15,"method":"tools/list","params":"x"}', -32600, 15),
]
# Not answerable here: the SDK validates ``{"jsonrpc":"2.0","id":true,"method":"ping"}`` (or an
# object id) as a *notification*, dropping the id, so no item reaches our stream to answer.


@pytest.mark.timeout(120)
def test_malformed_raw_lines_over_stdio_each_get_an_error_reply(store: Path) -> None:
    """Failed before: the SDK's stdio transport dropped each line it could not validate
    without a reply (two of the issue's carried an id, so the client waited forever)."""
    import sys

    from memofs_eval.bench.hostile_probe import stdio_exchange

    memofs = str(Path(sys.executable).with_name("memofs"))
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    lines = [json.dumps(init), '{"jsonrpc":"2.0","method":"notifications/initialized"}']
    for n, (line, _, _) in enumerate(RAW_LINES):
        lines += [line, json.dumps({"jsonrpc": "2.0", "id": f"ping-{n}", "method": "ping"})]
    replies, _, late = stdio_exchange([memofs, "--root", str(store), "mcp"], {**os.environ, **ENV}, lines,
                                      f"ping-{len(RAW_LINES) - 1}", 90)
    assert not late
    assert replies[0]["id"] == 0 and "result" in replies[0]
    got = replies[1:]
    for n, (line, code, rid) in enumerate(RAW_LINES):  # each bad line's reply comes before its ping's
        err, pong = got[2 * n], got[2 * n + 1]
        assert pong == {"jsonrpc": "2.0", "id": f"ping-{n}", "result": {}}, (line[:60], pong)
        assert err["error"]["code"] == code and err["id"] == rid, (line[:60], err)
        assert len(err["error"]["message"]) <= 200
    assert len(got) == 2 * len(RAW_LINES)


def test_a_lone_surrogate_in_a_memory_text_is_a_validation_error(tmp_path: Path) -> None:
    """Failed before (found by the re-run probe): ``Store.remember`` raised UnicodeEncodeError
    (the CLI's argv check hides it; a library caller or in-process runner got exit 3)."""
    from memofs.files.records import InvalidInputError
    from memofs.store.project import Store

    s = Store.init(tmp_path, clock=lambda: NOW)
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        s.remember("text with \ud800 inside")
    assert_clean(cli(tmp_path, "remember", "text with \udcff inside"), codes=(1,))
    assert_clean(cli(tmp_path, "status"), codes=(0,))


def test_without_a_usable_cache_key_caches_are_rebuilt_and_doctor_says_why(store: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the key folder would go\n")
    env = {"MEMOFS_CACHE_DIR": str(blocked)}
    res = cli(store, "recall", "-q", "pgbouncer", "--json", env=env)
    assert_clean(res, codes=(0,))
    assert [r["text"] for r in json.loads(res.stdout)["results"]] == ["Postgres uses PgBouncer for pooling"]
    doc = cli(store, "doctor", env=env)
    assert doc.exit_code == 1 and "cannot be read or created" in doc.stdout and "not sealed" not in doc.stdout, doc.stdout


@pytest.mark.timeout(120)
def test_ctrl_c_while_the_cli_starts_or_runs_is_one_line_never_a_traceback(store: Path) -> None:
    """Failed before (the re-run probe): SIGINT while ``memofs`` imported its modules printed
    Python's KeyboardInterrupt traceback. (The first few tens of ms are Python's own
    start-up, before any memofs code: not testable here, so the first delay is past them.)"""
    import signal
    import subprocess
    import sys
    import time

    memofs = str(Path(sys.executable).with_name("memofs"))
    # the delays count from the end of Python's own start-up on this machine as it is now
    # (a bare interpreter's, the slowest of three): on a loaded machine that alone can pass 0.15 s
    starts = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        starts.append(time.perf_counter() - t)
    acked = []
    for n, delay in enumerate(max(starts) + d for d in (0.1, 0.2, 0.35, 0.55, 0.85, 1.35)):
        args = ["remember", f"interrupted memory {n}", "--json"] if n % 2 == 0 else ["recall", "-q", "interrupted"]
        p = subprocess.Popen([memofs, "--root", str(store), *args], env={**os.environ, **ENV},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert "Traceback" not in err and p.returncode in (0, 1, 130, -signal.SIGINT), (delay, p.returncode, err[-400:])
        if args[0] == "remember" and p.returncode == 0:
            acked.append(json.loads(out)["id"])
    text = (store / ".memofs" / "memory" / "memories.jsonl").read_text()
    assert all(a in text for a in acked)
    assert_clean(cli(store, "status"), codes=(0,))
