"""The memofs CLI in-process (typer's CliRunner) plus the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memofs.surfaces.cli import app
from support import CLI_ENV, cli_json as jrun, cli_run as run

ENV = CLI_ENV
runner = CliRunner()


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    run(tmp_path, "init")
    return tmp_path


def test_help_shows_examples() -> None:
    res = runner.invoke(app, ["--help"], env=ENV)
    assert res.exit_code == 0 and "Examples:" in res.output and "memofs remember" in res.output
    for cmd in ("remember", "recall", "context", "status", "doctor", "init"):
        out = runner.invoke(app, [cmd, "--help"], env=ENV).output
        assert "Example" in out, cmd
    out = runner.invoke(app, ["generate", "agent", "claude", "--help"], env=ENV).output
    assert "--project-name" in out


def test_remember_recall_json(proj: Path) -> None:
    m = jrun(proj, "remember", "Use D1 for tenant metadata (edge latency)", "--kind", "decision",
             "--confidence", "0.9", "--tag", "db", "--tag", "tenancy")
    assert m["kind"] == "decision" and m["confidence"] == 0.9 and m["tags"] == ["db", "tenancy"]
    jrun(proj, "remember", "PgBouncer pool limit is 50 connections", "--kind", "note")
    out = jrun(proj, "recall", "--query", "tenant metadata database", "-k", "1", "--explain")
    assert [r["id"] for r in out["results"]] == [m["id"]]
    assert out["results"][0]["explain"]["weights"]["w_vec"] == 0.0  # MEMOFS_EMBEDDER=none: lexical only
    human = run(proj, "recall", "--query", "tenant metadata").stdout
    assert human.startswith("1. [decision]") and "Use D1 for tenant metadata" in human


def test_remember_from_stdin(proj: Path) -> None:
    run(proj, "remember", "-", stdin="multi-line\nmemory text from stdin\n")
    assert jrun(proj, "recall", "--query", "stdin")["results"][0]["text"] == "multi-line\nmemory text from stdin"


def test_context_within_budget_and_expand(proj: Path) -> None:
    for i in range(8):
        run(proj, "remember", f"database decision {i}: pool size {i * 10} for the tenant database", "--kind", "decision")
    b = jrun(proj, "context", "--query", "database", "--budget", "2048")
    assert b["bytes"] <= 2048 and len(b["text"].encode()) == b["bytes"]
    human = run(proj, "context", "--query", "database", "--budget", "2048").stdout
    assert len(human.encode()) <= 2048 + 1  # + the trailing newline echo adds
    rec = next(e for e in b["expandable"] if e["section"] == "recall")
    ex = jrun(proj, "context", "--expand", rec["cursor"])  # a new "process" (file-backed cache)
    assert "## Relevant Recall (expanded)" in ex["text"]
    assert all(f"pool size {i * 10} " in ex["text"] for i in range(8))
    ex2 = jrun(proj, "context", "--expand", rec["cursor"], "--section", "recent")
    assert "## Recent Memory Events (expanded)" in ex2["text"]


@pytest.mark.parametrize("args, msg", [
    (["remember", "token " + "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"], "Write blocked: content matched 1 secret pattern(s) (github_token)."),
    (["remember", "a memory", "--anchor", "../outside.txt"], "must not contain '..'"),
    (["remember", "a memory", "--kind", "fact"], "--kind must be one of"),
    (["remember", "a memory", "--confidence", "2"], "confidence must be a number in [0, 1]"),
    (["recall", "--query", "x", "--task-type", "cooking"], "--task-type must be one of"),
    (["context", "--expand", "bogus"], "Expansion cursor is malformed"),
    (["context", "--expand", "AbLTwqZlVF5LAeCl4pT3WdCGWn6RZg"], "not issued by this memofs process"),
    (["context"], "--query is required"),
    (["context", "--query", "x", "--budget", "100"], "budget must be an integer in [1024, 262144]"),
])
def test_errors_are_one_line_exit_1(proj: Path, args: list[str], msg: str) -> None:
    res = run(proj, *args, code=1)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memofs: error: ") and msg in lines[0]
    assert "Traceback" not in res.output


def test_missing_store_and_usage_errors(tmp_path: Path) -> None:
    res = run(tmp_path, "recall", "--query", "x", code=1)
    assert "run `memofs init`" in res.stderr
    run(tmp_path, "recall", code=2)  # missing required option: click usage error


def test_status_reports_tier_and_stale_anchors(proj: Path) -> None:
    (proj / "a.py").write_text("print(1)\n")
    m = jrun(proj, "remember", "a.py prints one", "--anchor", "a.py")
    st = jrun(proj, "status")
    assert st["healthy"] and st["memories"] == 1 and st["stale_anchors"] == []
    assert st["embedder"]["tier"] == "lexical-only" and "MEMOFS_EMBEDDER=none" in st["embedder"]["reason"]
    (proj / "a.py").write_text("print(2)\n")
    st = jrun(proj, "status")
    assert st["stale_anchors"] == [{"id": m["id"], "path": "a.py", "change": "modified",
                                    "reason": "a.py modified since the memory was written"}]
    (proj / "a.py").unlink()
    assert jrun(proj, "status")["stale_anchors"][0]["change"] == "deleted"
    assert "stale anchors: 1" in run(proj, "status").stdout


def test_doctor_flags_a_corrupt_store(proj: Path) -> None:
    run(proj, "remember", "first memory")
    run(proj, "remember", "second memory")
    run(proj, "doctor")
    mem = proj / ".memofs/memory/memories.jsonl"
    rows = mem.read_text().splitlines()
    mem.write_text(rows[0] + "\nnot json\n" + rows[1] + "\n")
    res = run(proj, "doctor", code=1)
    assert "memories.jsonl:2: invalid JSON" in res.stdout and "UNHEALTHY" in res.stdout
    # a torn last line is only a warning
    mem.write_text(rows[0] + "\n" + rows[1][:20])
    res = run(proj, "doctor")
    assert "warning:" in res.stdout and "torn last line" in res.stdout


def test_generate_agent_claude(proj: Path) -> None:
    (proj / "CLAUDE.md").write_text("# House rules\n\nBe nice.\n")
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    out = jrun(proj, "generate", "agent", "claude", "--project-name", "My API")
    assert {Path(w["path"]).name for w in out} == {"CLAUDE.md", ".mcp.json", "settings.json"}
    text = (proj / "CLAUDE.md").read_text()
    assert text.startswith("# House rules\n\nBe nice.\n") and "# My API: project memory (MemoFS)" in text
    for tool in ("memofs.context", "memofs.recall", "memofs.remember", "memofs.consolidate"):
        assert tool in text
    cfg = json.loads((proj / ".mcp.json").read_text())
    assert cfg["mcpServers"]["other"] == {"command": "x"}
    assert cfg["mcpServers"]["memofs"] == {"command": "memofs", "args": ["--root", ".", "mcp"]}
    # idempotent: a second run keeps, --force rewrites the block once
    assert {w["action"] for w in jrun(proj, "generate", "agent", "claude", "--project-name", "My API")} == {"kept"}
    jrun(proj, "generate", "agent", "claude", "--project-name", "Renamed", "--force")
    text = (proj / "CLAUDE.md").read_text()
    assert text.count("<!-- memofs:begin -->") == 1 and "# Renamed:" in text and "# My API:" not in text


def test_generate_agent_claude_no_mcp(tmp_path: Path) -> None:
    out = jrun(tmp_path, "generate", "agent", "claude", "--project-name", "X", "--no-mcp", "--no-hooks")
    assert [Path(w["path"]).name for w in out] == ["CLAUDE.md"] and not (tmp_path / ".mcp.json").exists()


def test_console_script_and_module_entry(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("memofs")
    env = {**ENV, "PATH": str(exe.parent)}
    for cmd in ([str(exe)], [sys.executable, "-m", "memofs"]):
        res = subprocess.run([*cmd, "--root", str(tmp_path), "init", "--json"], capture_output=True, text=True, env=env, timeout=60)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["store"] == str(tmp_path / ".memofs")


def test_upstream_flags(proj: Path) -> None:
    """Flags upstream's CLI and its generated hooks use: -j/--json before the subcommand,
    context --max-chars and --mark-session-start, status --hook."""
    run(proj, "remember", "We deploy on Fridays after the freeze", "--kind", "decision")
    assert json.loads(run(proj, "-j", "recall", "-q", "deploy").stdout)["results"][0]["text"].startswith("We deploy")
    assert json.loads(run(proj, "--json", "status").stdout)["memories"] == 1
    small = json.loads(run(proj, "-j", "context", "-q", "deploy", "--max-chars", "1024").stdout)
    assert small["bytes"] <= 1024
    assert run(proj, "context", "-q", "x", "--max-chars", "2048", "--budget", "4096", code=1).stderr.strip() == \
        "memofs: error: --budget and --max-chars are the same setting; give one"
    out = run(proj, "context", "--mark-session-start").stdout
    assert out.startswith("## How to use MemoFS context") and "We deploy on Fridays" in out
    event = json.loads((proj / ".memofs/events/memory-events.jsonl").read_text().splitlines()[-1])
    assert (event["type"], event["summary"], event["metadata"]) == ("memory.indexed", "Session started.", {"hook": "session-start"})
    assert run(proj, "status", "--hook").stdout.strip() == "memofs: 1 memories, 0 stale anchors, healthy"
    (proj / ".memofs/tmp/.memories.jsonl.123.tmp").write_text("x")  # an orphan temp file: a problem
    assert run(proj, "status", code=1)
    res = run(proj, "status", "--hook")  # a hook never blocks the agent
    assert res.stdout.strip() == "memofs: 1 memories, 0 stale anchors, 1 problems (run memofs doctor)"
    assert "memofs: problem: orphan temp file" in res.stderr


def test_remember_upstream_fields_kept_and_returned(proj: Path) -> None:
    ref = '{"sourceType": "document", "path": "docs/adr/0007.md"}'
    m = jrun(proj, "remember", "Retries back off exponentially up to 30 s", "--kind", "constraint",
             "--title", "Retry policy", "--source", "design-review", "--source-ref", ref,
             "--metadata", '{"owner": "platform", "reviewed": true}')
    assert (m["title"], m["source"], m["sourceRefs"], m["metadata"]) == (
        "Retry policy", "design-review", [json.loads(ref)], {"owner": "platform", "reviewed": True})
    assert m["created_at"].endswith("Z") and "+00:00" not in m["created_at"]
    hit = jrun(proj, "recall", "--query", "retries back off")["results"][0]
    assert hit["id"] == m["id"] and hit["title"] == "Retry policy" and hit["metadata"]["owner"] == "platform"
    assert hit["created_at"] == m["created_at"]
    # upstream's own flag name for the metadata works too
    m2 = jrun(proj, "remember", "Timeouts are 5 s", "--metadata-json", '{"owner": "infra"}')
    assert m2["metadata"] == {"owner": "infra"}
    # the memory.created event summary is the title, as upstream writes it
    events = [json.loads(line) for line in (proj / ".memofs/events/memory-events.jsonl").read_text().splitlines()]
    assert [e["summary"] for e in events if e["metadata"]["id"] == m["id"]] == ["Retry policy"]


@pytest.mark.parametrize(("args", "message"), [
    (["--metadata", "{nope"], "memofs: error: --metadata: invalid JSON (Expecting property name enclosed in double quotes)"),
    (["--metadata", "[1, 2]"], "memofs: error: field 'metadata' must be a JSON object; got list"),
    (["--source-ref", '{"path": "a.md"}'], "memofs: error: field 'sourceRefs[0]' must be an object with a non-empty string 'sourceType'"),
    (["--source-ref", '{"sourceType": "web", "url": "ftp://x"}'], "memofs: error: field 'sourceRefs[0]': 'url' must be an http(s) URL"),
    (["--title", "x" * 513], "memofs: error: field 'title' has 513 characters; the limit is 512"),
    (["--title", "AKIAIOSFODNN7EXAMPLE"], "memofs: error: Write blocked: content matched 1 secret pattern(s) (aws_access_key_id)."),
])
def test_remember_upstream_fields_refused_in_one_line(proj: Path, args: list[str], message: str) -> None:
    res = run(proj, "remember", "Some durable fact about the build", *args, code=1)
    assert res.stderr.strip() == message
    assert (proj / ".memofs/memory/memories.jsonl").read_text() == ""


def _dated_store(root: Path) -> list[str]:
    """Memories written by the library with their own dates (a year apart): ages matter."""
    from datetime import datetime, timezone

    from memofs.store.project import Store

    store = Store.open(root)
    texts = ["tenant database pool size is 20", "tenant database pool size is 50 after the load test",
             "tenant database lives in Postgres"]
    return [store.remember(t, kind="decision", now=datetime(2024 + i, 1, 1, tzinfo=timezone.utc)).id
            for i, t in enumerate(texts)]


def test_recall_and_context_rank_at_as_of(proj: Path) -> None:
    """Issue 46, item 5: ``--as-of`` is the "now" recall ranks with: the CLI's ranking and
    scores are the library Recaller's over the same store asked at that time."""
    from datetime import datetime

    from memofs.store.project import LiveStore, Store, wall_clock

    _dated_store(proj)
    state = LiveStore(Store.open(proj, clock=wall_clock), embedder=None).state()
    for stamp in ("2024-06-01T00:00:00Z", "2031-01-01T12:00:00+02:00"):
        truth = state.recaller.recall("tenant database pool", 3, now=datetime.fromisoformat(stamp))
        out = jrun(proj, "recall", "-q", "tenant database pool", "-k", "3", "--as-of", stamp)
        assert [(r["id"], r["score"]) for r in out["results"]] == [(r.id, r.score) for r in truth], stamp
    b = jrun(proj, "context", "-q", "tenant database pool", "--as-of", "2024-06-01T00:00:00Z")
    assert b["bytes"] > 0  # context takes the option too; the ranking it briefs is recall's (above)


@pytest.mark.parametrize("command", [["recall", "-q", "x"], ["context", "-q", "x"], ["mcp"]])
@pytest.mark.parametrize("stamp", ["2026-03-01T00:00:00", "yesterday", ""])
def test_as_of_refuses_a_naive_time_or_garbage_in_one_line(proj: Path, command: list[str], stamp: str) -> None:
    res = run(proj, *command, "--as-of", stamp, code=1)
    err = res.stderr if hasattr(res, "stderr") else res.output
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("memofs: error: --as-of") and "Traceback" not in res.output


def test_init_profile_is_written_and_used_by_later_recalls(tmp_path: Path) -> None:
    """Issue 46, item 5: ``init --profile`` writes config.json ``recall.profile``; a later
    recall ranks (ids and scores) as the library Recaller with that profile's RecallConfig
    over the same memories."""
    from datetime import datetime, timezone

    from memofs.ranking.config import RecallConfig
    from memofs.ranking.recall import Recaller
    from memofs.store.project import Store

    run(tmp_path, "init", "--profile", "upstream")
    assert json.loads((tmp_path / ".memofs" / "config.json").read_text())["recall"]["profile"] == "upstream"
    _dated_store(tmp_path)
    memories = list(Store.open(tmp_path).load().memories)
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    out = jrun(tmp_path, "recall", "-q", "tenant database pool", "--as-of", "2026-01-01T00:00:00Z")
    rec = Recaller(RecallConfig.from_dict({"profile": "upstream"}))
    rec.add(memories)
    truth = rec.recall("tenant database pool", 10, now=at)
    assert [(r["id"], r["score"]) for r in out["results"]] == [(r.id, r.score) for r in truth]
    # again on an existing store: the profile changes, the other keys stay
    run(tmp_path, "init", "--profile", "reference")
    config = json.loads((tmp_path / ".memofs" / "config.json").read_text())
    assert config["recall"] == {"profile": "reference"} and config["projectId"] == "default"


def test_init_unknown_profile_is_one_line_naming_the_profiles(tmp_path: Path) -> None:
    res = run(tmp_path, "init", "--profile", "fastest", code=1)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(n in lines[0] for n in ("--profile", "reference", "robust", "upstream"))
    assert not (tmp_path / ".memofs").exists()
