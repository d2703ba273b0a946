"""Issue 17 fuzz suite (hypothesis, fixed budget, derandomized so CI runs are repeatable).

* every store file mutated (byte flips, cuts, duplicated spans, deep nesting, wrong-typed
  JSON values spliced in), then status / recall / context / remember: a clean exit (0 or 1,
  never an internal error or a traceback), the memories file never changed by a read, and
  when recall answers, every acknowledged memory is in it;
* CLI arguments and MCP tool arguments: only clean errors, never an internal error.

``MEMOFS_FUZZ_EXAMPLES`` sets the budget (default 150 per test, about 15 s in all; 50 in
``make test-fast``'s inner loop, :func:`support.examples`).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memofs.surfaces.cli import app

from support import examples

ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}
EXAMPLES = int(os.environ.get("MEMOFS_FUZZ_EXAMPLES", examples(150)))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
runner = CliRunner()
STORE_FILES = ["memory/memories.jsonl", "events/memory-events.jsonl", "graph/nodes.jsonl", "graph/edges.jsonl",
               "indexes/embeddings.jsonl", "config.json", "manifest.json", "memory/core.md",
               "tmp/context-cache.json", "tmp/cursor.key"]


def cli(root: Path, *args: str):
    return runner.invoke(app, ["--root", str(root), *args], env=ENV)


def assert_clean(res, codes=(0, 1)) -> None:
    """Exit 0/1 through the CLI boundary: never an uncaught exception or exit 3."""
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in codes, (res.exit_code, res.output)
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    if res.exit_code == 1 and res.stderr.strip():
        lines = res.stderr.strip().splitlines()
        assert lines[-1].startswith("memofs: error: ") and len(lines) == 1, res.stderr


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("fuzz-template")
    assert cli(root, "init").exit_code == 0
    ids = []
    for i in range(12):
        res = cli(root, "remember", f"fuzz token memory {i}: Postgres uses PgBouncer for pool {i}",
                  "--kind", "decision", "--tag", f"t{i}", "--json")
        ids.append(json.loads(res.stdout)["id"])
    b = json.loads(cli(root, "context", "-q", "fuzz token postgres", "--budget", "1024", "--json").stdout)
    assert b["expandable"]  # the context cache and cursor key exist
    vec = {"id": ids[0], "namespace": "default", "embedder": "fake", "dim": 3, "text_sha256": "0" * 64,
           "vector": [0.1, 0.2, 0.3], "metadata": {"kind": "decision"}}
    (root / ".memofs/indexes/embeddings.jsonl").write_text(json.dumps(vec) + "\n" + json.dumps({**vec, "id": ids[1]}) + "\n")
    assert cli(root, "status").exit_code == 0
    return root, ids


@pytest.fixture(scope="module")
def scratch(template, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the template that the argument fuzzers may write into."""
    root = tmp_path_factory.mktemp("fuzz-scratch")
    shutil.rmtree(root)
    shutil.copytree(template[0], root)
    return root


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)


@st.composite
def mutation(draw) -> tuple[str, list]:
    rel = draw(st.sampled_from(STORE_FILES))
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 255)),
        st.tuples(st.just("cut"), st.integers(0, 1 << 20)),
        st.tuples(st.just("dup"), st.integers(0, 1 << 20), st.integers(0, 4096)),
        st.tuples(st.just("deep"), st.integers(1, 3000)),
        st.tuples(st.just("splice"), st.integers(0, 1 << 20), JSON_VALUES),
        st.tuples(st.just("bytes"), st.integers(0, 1 << 20), st.binary(min_size=1, max_size=8)),
    ), min_size=1, max_size=4))
    return rel, ops


def apply(data: bytes, ops: list) -> bytes:
    b = bytearray(data)
    for op in ops:
        n = len(b)
        if op[0] == "flip" and n:
            b[op[1] % n] = op[2]
        elif op[0] == "cut":
            del b[op[1] % (n + 1):]
        elif op[0] == "dup":
            i = op[1] % (n + 1)
            b[i:i] = b[i:i + op[2]]
        elif op[0] == "deep":
            b[0:0] = ("[" * op[1] + "]" * op[1] + "\n").encode()
        elif op[0] == "splice":  # a wrong-typed value in place of one after a colon
            i = b.find(b":", op[1] % (n + 1))
            if i >= 0:
                j = min((k for k in (b.find(b",", i), b.find(b"}", i)) if k >= 0), default=n)
                b[i + 1:j] = json.dumps(op[2]).encode()
        elif op[0] == "bytes":
            i = op[1] % (n + 1)
            b[i:i] = op[2]
    return bytes(b)


@FUZZ
@given(mut=mutation())
def test_mutated_store_files_give_clean_errors_and_lose_nothing(template, tmp_path_factory, mut) -> None:
    src, ids = template
    root = tmp_path_factory.mktemp("fuzz")
    shutil.rmtree(root)
    shutil.copytree(src, root)
    rel, ops = mut
    path = root / ".memofs" / rel
    path.write_bytes(apply(path.read_bytes(), ops))
    memories = (root / ".memofs/memory/memories.jsonl").read_bytes()
    for args in (["status", "--json"], ["context", "-q", "fuzz token postgres", "--budget", "1024"]):
        assert_clean(cli(root, *args))
    res = cli(root, "recall", "-q", "fuzz token", "-k", "100", "--json")
    assert_clean(res)
    if res.exit_code == 0 and rel != "memory/memories.jsonl":
        got = {r["id"] for r in json.loads(res.stdout)["results"]}
        assert set(ids) <= got, f"acknowledged memories missing from recall after damaging {rel}"
    assert (root / ".memofs/memory/memories.jsonl").read_bytes() == memories  # reads never rewrite it
    assert_clean(cli(root, "remember", "fuzz token one more after the damage"))


TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30) | st.sampled_from(
    ["", " ", "-", "--", "-----BEGIN", "../x", ".memofs/config.json", "a" * 300, "\x00", "0", "-1", "nan"])


@FUZZ
@given(args=st.one_of(
    st.tuples(st.just("recall"), st.just("-q"), TEXT, st.just("-k"), st.integers(-5, 200).map(str)),
    st.tuples(st.just("context"), st.just("-q"), TEXT, st.just("--budget"), st.integers(-10, 300_000).map(str)),
    st.tuples(st.just("context"), st.just("--expand"), TEXT, st.just("--section"), TEXT),
    st.tuples(st.just("remember"), st.just("--"), TEXT),
    st.tuples(st.just("remember"), st.just("x y"), st.sampled_from(["--tag", "--anchor", "--supersedes", "--kind"]), TEXT),
    st.tuples(st.just("remember"), st.just("x y"), st.just("--confidence"), st.floats().map(str)),
))
def test_fuzzed_cli_arguments_give_clean_errors(scratch, args) -> None:
    res = cli(scratch, *args)
    assert_clean(res, codes=(0, 1, 2))


NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def tools(scratch):
    from memofs.store.cursor import ContextCache
    from memofs.surfaces.mcp_server import MemofsTools
    from memofs.store.project import LiveStore, Store

    return MemofsTools(LiveStore(Store.open(scratch, clock=lambda: NOW)), ContextCache(clock=lambda: 0.0), lambda: NOW)
ARG_NAMES = ["query", "limit", "taskType", "explain", "maxBytes", "section", "expand", "content", "kind",
             "confidence", "tags", "anchors", "supersedes", "junk"]
MCP_VALUES = JSON_VALUES | st.text(max_size=20) | st.sampled_from(
    ["lone \ud800 surrogate", "../x", "a\x00b", ".memofs/manifest.json", "AKIA" + "IOSFODNN7EXAMPLE", "-----BEGIN"])


@FUZZ
@given(name=st.sampled_from(["memofs.recall", "memofs.context", "memofs.remember", "memofs.nope"]),
       args=st.one_of(st.none(), st.dictionaries(st.sampled_from(ARG_NAMES), MCP_VALUES | st.lists(MCP_VALUES, max_size=3),
                                                 max_size=6), JSON_VALUES))
def test_fuzzed_mcp_arguments_are_caller_errors_never_internal(tools, name, args) -> None:
    from memofs.surfaces.mcp_server import ToolError

    try:
        tools.call(name, args)
    except ToolError as exc:
        assert exc.code in ("MCP_VALIDATION_ERROR", "MCP_NOT_FOUND", "MEMOFS_WRITE_BLOCKED"), exc
