"""Issue 36 families for the fuzz suite: hostile input that once hung, exited 3 or left
the store unreadable. Small stores, fixed inputs (plus derandomized hypothesis where a
family is open-ended), each test well under a few seconds.

* metadata depth, size and huge integers refused on write exactly where a load would
  refuse the line (one clean error, exit 1, the store still readable after);
* strict boolean settings; MCP graph resources read with the store's reader.
"""

from __future__ import annotations

import json
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
    if res.exit_code == 1:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("memofs: error: "), res.stderr


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
