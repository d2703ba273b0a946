"""A scripted session as a new user runs it: the installed ``memofs`` console script in
a fresh project, one process per command; concurrent CLI writers; kill -9 of a CLI
writer; the zero-key tiers end to end (lexical-only, failed local model, real MiniLM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

MEMOFS = str(Path(sys.executable).with_name("memofs"))
LEXICAL = {"MEMOFS_EMBEDDER": "none"}


def sh(root: Path, *args: str, env: dict | None = None, code: int = 0, timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **LEXICAL, **(env or {})}
    res = subprocess.run([MEMOFS, "--root", str(root), *args], capture_output=True, text=True, env=full_env, timeout=timeout)
    assert res.returncode == code, (args, res.returncode, res.stdout, res.stderr)
    return res


def js(root: Path, *args: str, env: dict | None = None):
    return json.loads(sh(root, *args, "--json", env=env).stdout)


MEMORIES = [
    ("Use D1 for tenant metadata; the driver lives in src/db.py", "decision", "0.9", True),
    ("PgBouncer connection limits are 50 per pool", "constraint", "0.8", False),
    ("Ship the billing export before the March audit", "goal", "0.7", False),
    ("Prefer small pull requests with one concern each", "preference", "0.6", False),
    ("The retry policy follows docs/retries.md", "reference", "0.9", False),
    ("Sprint 12 moved auth to OAuth with PKCE", "summary", "0.5", False),
    ("Login failures spiked after the token refresh change", "note", "0.4", False),
    ("API uses PostgreSQL", "decision", "0.9", False),
    ("OAuth supersedes JWT", "decision", "0.8", False),
    ("CI runs the test suite on every push to main", "note", "0.6", False),
    ("Never log raw request bodies from the payments service", "constraint", "1.0", False),
    ("Database migrations run before each deploy", "note", "0.7", False),
]


@pytest.mark.slow  # some twenty runs of the installed command, each a fresh interpreter
def test_scripted_session(tmp_path: Path) -> None:
    root = tmp_path
    (root / "src").mkdir()
    (root / "src/db.py").write_text("DRIVER = 'd1'\n")
    assert "Initialized MemoFS store" in sh(root, "init").stdout
    ids = {}
    for text, kind, conf, anchored in MEMORIES:
        args = ["remember", text, "--kind", kind, "--confidence", conf] + (["--anchor", "src/db.py"] if anchored else [])
        ids[text] = js(root, *args)["id"]
    st = js(root, "status")
    assert st["memories"] == 12 and st["stale_anchors"] == [] and st["healthy"]
    assert st["graph"]["edges"] >= 2  # "API uses PostgreSQL", "OAuth supersedes JWT"

    # the anchored file changes: the memory is flagged stale and demoted by half
    (root / "src/db.py").write_text("DRIVER = 'postgres'\n")
    out = js(root, "recall", "--query", "tenant metadata driver", "--explain", "-k", "5")
    top = {r["id"]: r for r in out["results"]}
    anchored = top[ids[MEMORIES[0][0]]]
    assert anchored["stale"] is True
    pen = anchored["explain"]["penalties"]
    assert pen[0]["name"] == "stale_anchor" and pen[0]["factor"] == 0.5 and "src/db.py modified" in pen[0]["reason"]
    assert anchored["score"] == pytest.approx(anchored["explain"]["components"]["composite"] * 0.5, abs=1e-4)
    assert all(r["stale"] is False for r in out["results"] if r["id"] != anchored["id"])
    human = sh(root, "recall", "--query", "tenant metadata driver", "--explain").stdout
    assert "STALE: src/db.py modified" in human and "penalty stale_anchor x0.5" in human
    assert js(root, "status")["stale_anchors"][0]["id"] == anchored["id"]

    # a budgeted briefing, then one section expanded from its cursor in a new process
    budget = 1536
    b = js(root, "context", "--query", "database decisions", "--task-type", "refactor", "--budget", str(budget))
    assert b["bytes"] <= budget
    text = sh(root, "context", "--query", "database decisions", "--task-type", "refactor", "--budget", str(budget)).stdout
    assert len(text.rstrip("\n").encode()) <= budget
    assert text.startswith("## How to use MemoFS context")
    assert "↳ expand (" in text
    rec = next(e for e in b["expandable"] if e["section"] == "recall")
    ex = sh(root, "context", "--expand", rec["cursor"], "--section", "recall").stdout
    assert "## Relevant Recall (expanded)" in ex
    shown = ex.count("\n score: ")
    assert shown == rec["available"] + sum(1 for s in b["sections"] if s["name"] == "recall" for _ in range(s["shown"]))
    sh(root, "context", "--expand", rec["cursor"][:-1] + ("A" if rec["cursor"][-1] != "A" else "B"), code=1)


@pytest.mark.slow
def test_two_concurrent_cli_writers_lose_nothing(tmp_path: Path) -> None:
    sh(tmp_path, "init")
    script = 'for i in $(seq 1 50); do "$0" --root "$1" remember "writer $2 memory $i" --kind note || exit 1; done'
    env = {**os.environ, **LEXICAL}
    procs = [subprocess.Popen(["bash", "-c", script, MEMOFS, str(tmp_path), w], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for w in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    rows = [json.loads(x) for x in (tmp_path / ".memofs/memory/memories.jsonl").read_text().splitlines()]
    assert sorted(r["text"] for r in rows) == sorted(f"writer {w} memory {i}" for w in "ab" for i in range(1, 51))
    assert len({r["id"] for r in rows}) == 100
    assert js(tmp_path, "status")["events"] == 100


def test_kill_9_cli_writer_then_store_is_healthy(tmp_path: Path) -> None:
    sh(tmp_path, "init")
    big = tmp_path / "big.txt"
    big.write_text("crash test " + "\U0001F600" * 90_000)  # ~360 KB lines, read from stdin
    # each `remember` prints "Remembered <id> (note)" only after its write is durable
    script = 'while true; do "$0" --root "$1" remember - --kind note < "$2" || exit 1; done'
    proc = subprocess.Popen(["bash", "-c", script, MEMOFS, str(tmp_path), str(big)], env={**os.environ, **LEXICAL},
                            start_new_session=True, stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    deadline = time.monotonic() + 120
    while len(acked) < 2 and time.monotonic() < deadline:  # kill only after acknowledged writes
        line = proc.stdout.readline()
        if line.startswith("Remembered "):
            acked.append(line.split()[1])
    time.sleep(0.3)  # into the next write
    os.killpg(proc.pid, signal.SIGKILL)  # the loop and the memofs process in flight
    proc.wait(timeout=30)
    acked += [ln.split()[1] for ln in proc.stdout.read().splitlines() if ln.startswith("Remembered ")]
    proc.stdout.close()
    assert len(acked) >= 2, "nothing was acknowledged before the kill: the test tested nothing"
    doc = js(tmp_path, "doctor")
    assert doc["healthy"] and len(acked) <= doc["memories"] <= len(acked) + 1
    stored = {json.loads(x)["id"] for x in (tmp_path / ".memofs/memory/memories.jsonl").read_text().splitlines() if x.strip()}
    assert set(acked) <= stored, f"{len(set(acked) - stored)} acknowledged writes lost"
    sh(tmp_path, "remember", "after the crash", "--kind", "note")
    assert js(tmp_path, "recall", "--query", "after the crash", "-k", "1")["results"][0]["text"] == "after the crash"
    assert js(tmp_path, "doctor")["warnings"] == []


@pytest.mark.slow
def test_zero_key_tier2_failed_local_model_falls_back_to_lexical(tmp_path: Path) -> None:
    env = {"MEMOFS_EMBEDDER": "", "MEMOFS_EMBEDDING_MODEL": str(tmp_path / "no-such-model"), "MEMOFS_EMBED_ON_WRITE": "0"}
    sh(tmp_path, "init")
    sh(tmp_path, "remember", "Use D1 for tenant metadata", "--kind", "decision", env=env)
    out = js(tmp_path, "recall", "--query", "tenant metadata", "--explain", env=env)
    assert out["results"][0]["text"] == "Use D1 for tenant metadata"
    assert out["results"][0]["explain"]["weights"]["w_vec"] == 0.0
    doc = js(tmp_path, "doctor", env=env)
    assert doc["embedder"]["tier"] == "lexical-only" and "tier 2" in doc["embedder"]["reason"]


@pytest.mark.slow
def test_zero_key_tier1_real_minilm_end_to_end(tmp_path: Path) -> None:
    """No key, no network: the local MiniLM embeds on first recall, the vectors persist in
    embeddings.jsonl, and the next process rehydrates them without re-embedding."""
    env = {"MEMOFS_EMBEDDER": "", "MEMOFS_EMBED_ON_WRITE": "0"}
    sh(tmp_path, "init")
    for text in ("JWT tokens are used for stateless authentication with 24-hour expiry",
                 "PgBouncer connection limits are 50 per pool",
                 "Ship the billing export before the March audit"):
        sh(tmp_path, "remember", text, env=env)
    out = js(tmp_path, "recall", "--query", "how we handle user sessions", "--explain", "-k", "3", env=env)
    top = out["results"][0]
    assert top["text"].startswith("JWT tokens")  # no shared token: only the vector can find it
    # no lexical hit at all, so the dynamic weights hand everything to the vector path
    assert top["explain"]["weights"]["w_vec"] == 1.0 and top["explain"]["signals"]["cosine"] is not None
    emb = [json.loads(x) for x in (tmp_path / ".memofs/indexes/embeddings.jsonl").read_text().splitlines()]
    assert len(emb) == 3 and {e["dim"] for e in emb} == {384}
    before = (tmp_path / ".memofs/indexes/embeddings.jsonl").stat().st_mtime_ns
    doc = js(tmp_path, "doctor", env=env)
    assert doc["embedder"]["tier"] == "vector" and doc["embeddings"] == {"lines": 3, "current": 3, "to_embed": 0}
    js(tmp_path, "recall", "--query", "billing audit", env=env)
    assert (tmp_path / ".memofs/indexes/embeddings.jsonl").stat().st_mtime_ns == before  # rehydrated, not re-embedded
