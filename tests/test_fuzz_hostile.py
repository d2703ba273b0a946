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
                                  '{"n": ' + "9" * 5000 + "}", json.dumps({"big": "x" * 70_000})])
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
