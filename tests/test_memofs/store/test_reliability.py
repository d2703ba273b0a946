"""Issue 17: every bad input gets a clear one-line error, nothing hangs, nothing
acknowledged is lost. Special files at anchored paths, corrupt store files, damaged
caches, cursor keys, strict environment flags, the CLI error boundary."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memofs.files import safe_json
from memofs.surfaces.cli import app
from memofs.store.project import MAX_TEXT_CHARS

MEMOFS = str(Path(sys.executable).with_name("memofs"))
ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}
runner = CliRunner()
DEEP = "[" * 5000 + "]" * 5000  # RecursionError in the stdlib parser without the depth limit


def sh(root: Path, *args: str, timeout: float = 30, env: dict | None = None, stdin: bytes | None = None,
       argv: list | None = None) -> subprocess.CompletedProcess:
    """The installed console script in its own process, killed after ``timeout`` (a hang fails)."""
    cmd = argv if argv is not None else [MEMOFS, "--root", str(root), *args]
    return subprocess.run(cmd, capture_output=True, env={**os.environ, **ENV, **(env or {})},
                          timeout=timeout, input=stdin)


def cli(root: Path, *args: str, stdin: str | None = None):
    return runner.invoke(app, ["--root", str(root), *args], env=ENV, input=stdin)


def one_error_line(res, code: int = 1, prefix: str = "memofs: error: ") -> str:
    """The single stderr line of a clean failure (no traceback)."""
    err = res.stderr if isinstance(res.stderr, str) else res.stderr.decode("utf-8", "replace")
    out = res.output if hasattr(res, "output") else res.stdout.decode("utf-8", "replace")
    code_got = res.exit_code if hasattr(res, "exit_code") else res.returncode
    assert code_got == code, (code_got, out, err)
    assert "Traceback" not in err + out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    return lines[0]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    assert cli(tmp_path, "init").exit_code == 0
    return tmp_path


def remember(root: Path, text: str, *extra: str) -> str:
    res = cli(root, "remember", text, *extra, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["id"]


# ---------------------------------------------------------------------- 1. special files at anchors
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_fifo_and_directory_at_anchored_paths_never_hang_or_fail_the_store(proj: Path) -> None:
    for name in ("f.py", "g.py", "h.py"):
        (proj / name).write_text(f"print({name!r})\n")
    fifo_id = remember(proj, "alpha memory about f", "--anchor", "f.py")
    dir_id = remember(proj, "alpha memory about g", "--anchor", "g.py")
    ok_id = remember(proj, "alpha memory about h", "--anchor", "h.py")
    (proj / "f.py").unlink()
    os.mkfifo(proj / "f.py")  # reading it would block forever: no writer
    (proj / "g.py").unlink()
    (proj / "g.py").mkdir()

    res = sh(proj, "recall", "-q", "alpha memory", "--json", "--explain")
    assert res.returncode == 0, res.stderr
    by_id = {r["id"]: r for r in json.loads(res.stdout)["results"]}
    assert set(by_id) == {fifo_id, dir_id, ok_id}
    assert by_id[ok_id]["stale"] is False
    for mid, name in ((fifo_id, "f.py"), (dir_id, "g.py")):
        assert by_id[mid]["stale"] is True
        reasons = [p["reason"] for p in by_id[mid]["explain"]["penalties"] if p["name"] == "stale_anchor"]
        assert reasons == [f"{name} is not a regular file"]
    human = sh(proj, "recall", "-q", "alpha memory")
    assert human.returncode == 0 and b"STALE: f.py is not a regular file" in human.stdout

    st = sh(proj, "status", "--json")
    assert st.returncode == 0, st.stderr  # stale anchors are facts, not store problems
    info = json.loads(st.stdout)
    assert info["healthy"] and info["memories"] == 3
    assert sorted((s["id"], s["change"], s["reason"]) for s in info["stale_anchors"]) == sorted([
        (fifo_id, "not-regular", "f.py is not a regular file"),
        (dir_id, "not-regular", "g.py is not a regular file")])

    ctx = sh(proj, "context", "-q", "alpha memory")
    assert ctx.returncode == 0 and b"(stale: f.py is not a regular file)" in ctx.stdout, ctx.stderr

    # new anchors on special files are refused at once, and nothing is written
    for name in ("f.py", "g.py"):
        line = one_error_line(sh(proj, "remember", "beta", "--anchor", name))
        assert f"anchor path is not a regular file: '{name}'" in line
    assert len((proj / ".memofs/memory/memories.jsonl").read_text().splitlines()) == 3


def test_anchor_into_the_store_is_refused(proj: Path) -> None:
    for rel in (".memofs/config.json", ".memofs", "./.memofs/memory/core.md"):
        line = one_error_line(cli(proj, "remember", "x", "--anchor", rel))
        assert "must not point into .memofs/" in line


def test_unreadable_anchor_is_a_stale_reason(proj: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    (proj / "a.py").write_text("x = 1\n")
    mid = remember(proj, "gamma anchored", "--anchor", "a.py")
    (proj / "a.py").chmod(0)
    try:
        res = cli(proj, "status", "--json")
        assert res.exit_code == 0
        stale = json.loads(res.stdout)["stale_anchors"]
        assert stale[0]["id"] == mid and stale[0]["change"] == "unreadable"
        assert stale[0]["reason"].startswith("a.py cannot be read (Permission denied")
    finally:
        (proj / "a.py").chmod(0o644)


STORE_PATHS = ["memory/memories.jsonl", "events/memory-events.jsonl", "graph/nodes.jsonl", "indexes/embeddings.jsonl",
               "config.json", "manifest.json", "memory/core.md", "tmp/context-cache.json", "tmp/cursor.key"]


# each case runs four CLI processes: the inner loop keeps one store file and one tmp/ file (the
# two ways status answers), the full suite runs every path
FAST_PATHS = ("memory/memories.jsonl", "tmp/cursor.key")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
@pytest.mark.parametrize("rel", [r if r in FAST_PATHS else pytest.param(r, marks=pytest.mark.slow) for r in STORE_PATHS])
@pytest.mark.parametrize("special", ["fifo", "dir"])
def test_special_file_where_a_store_file_should_be_never_hangs(proj: Path, rel: str, special: str) -> None:
    for i in range(3):
        remember(proj, f"epsilon memory {i} about the tenant database")
    path = proj / ".memofs" / rel
    path.unlink(missing_ok=True)
    os.mkfifo(path) if special == "fifo" else path.mkdir()
    kind = "a FIFO" if special == "fifo" else "a directory"
    for args in (["recall", "-q", "tenant"], ["context", "-q", "tenant", "--budget", "1024"], ["remember", "one more"]):
        res = sh(proj, *args, timeout=30)  # a blocking read would be killed here and fail the test
        err = res.stderr.decode()
        assert res.returncode in (0, 1) and "Traceback" not in err, (args, res.returncode, err)
        if res.returncode == 1:
            assert err.startswith("memofs: error: ") and len(err.strip().splitlines()) == 1, err
            assert str(path) in err, err
    st = sh(proj, "status", "--json")
    if rel.startswith("tmp/"):  # the cache and its key are not store health
        assert st.returncode == 0
    else:
        assert st.returncode == 1
        problems = json.loads(st.stdout)["problems"]
        assert any(str(path) in p and (kind in p or "Is a directory" in p) for p in problems), problems
    if rel == "memory/memories.jsonl":
        return
    # whatever was acknowledged before is still there (the memories file itself is intact)
    rows = (proj / ".memofs/memory/memories.jsonl").read_text().splitlines()
    assert sum("epsilon memory" in r for r in rows) == 3


# ---------------------------------------------------------------------- 2. corrupt store files
GOOD = {"id": "mem_good", "text": "a good memory", "kind": "note", "created_at": "2026-01-10T12:00:00Z",
        "confidence": None, "tags": [], "namespace": "default", "anchors": [], "supersedes": []}


def _row(**changes) -> bytes:
    return json.dumps({**GOOD, "id": "mem_bad", **changes}).encode()


BAD_ROWS = {
    "created_at int": (_row(created_at=5), "field 'created_at'"),
    "created_at list": (_row(created_at=[1]), "field 'created_at'"),
    "created_at object": (_row(created_at={"a": 1}), "field 'created_at'"),
    "created_at no tz": (_row(created_at="2026-01-10T12:00:00"), "field 'created_at'"),
    "created_at junk": (_row(created_at="yesterday"), "field 'created_at'"),
    "id int": (_row(id=7), "field 'id'"),
    "text null": (_row(text=None), "field 'text'"),
    "text over cap": (_row(text="x" * (MAX_TEXT_CHARS + 1)), "field 'text' has 100001 characters"),
    "kind list": (_row(kind=["note"]), "field 'kind'"),
    "confidence str": (_row(confidence="0.5"), "field 'confidence'"),
    "confidence bool": (_row(confidence=True), "field 'confidence'"),
    "tags str": (_row(tags="db"), "field 'tags'"),
    "tags ints": (_row(tags=[1, 2]), "field 'tags'"),
    "namespace int": (_row(namespace=3), "field 'namespace'"),
    "anchors dict": (_row(anchors={"path": "a"}), "field 'anchors'"),
    "anchor path int": (_row(anchors=[{"path": 1, "sha256": "x"}]), "field 'anchors[0]'"),
    "supersedes ints": (_row(supersedes=[1]), "field 'supersedes'"),
    "deep nesting": (DEEP.encode(), "nested deeper than 64 levels"),
    "deep nesting in a field": (b'{"id": "mem_bad", "text": "t", "tags": ' + b"[" * 70 + b"]" * 70 + b"}",
                                "nested deeper than 64 levels"),
    "invalid utf-8": (b'{"id": "mem_bad", "text": "\xff\xfe"}', "not valid UTF-8"),
    "huge integer": (b'{"id": "mem_bad", "text": "t", "confidence": ' + b"9" * 5000 + b"}", "invalid JSON"),
    "array": (b"[1, 2]", "expected a JSON object, got list"),
}


@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_corrupt_memory_line_is_a_one_line_error_naming_file_line_field(proj: Path, case: str) -> None:
    bad, expect = BAD_ROWS[case]
    mem = proj / ".memofs/memory/memories.jsonl"
    mem.write_bytes(json.dumps(GOOD).encode() + b"\n" + bad + b"\n" + json.dumps({**GOOD, "id": "mem_3"}).encode() + b"\n")
    where = f"{mem}:2"
    for args in (["recall", "-q", "good memory"], ["context", "-q", "good memory"]):
        line = one_error_line(cli(proj, *args))
        assert where in line and expect in line, (args, line)
    for cmd in ("status", "doctor"):
        res = cli(proj, cmd, "--json")
        assert res.exit_code == 1 and "Traceback" not in res.output
        problems = json.loads(res.stdout)["problems"]
        assert any(where in p and expect in p for p in problems), problems


STORE_FILES = {  # file -> (bytes, what the message says); every one names the file
    "config.json": (b'{"recall": {"top_k": "\xff"}}', "not valid UTF-8"),
    "manifest.json": (b'{"version": "1\xc3"}', "not valid UTF-8"),
    "memory/core.md": (b"# Core\n\xc3\x28 broken\n", "not valid UTF-8"),
    "graph/nodes.jsonl": (b'{"id": "a", "label": "\xff"}\n', "not valid UTF-8"),
    "graph/edges.jsonl": (DEEP.encode() + b"\n", "nested deeper than 64 levels"),
    "indexes/embeddings.jsonl": (b'{"id": "\xff"}\n{"id": "b"}\n', "not valid UTF-8"),
    "events/memory-events.jsonl": (DEEP.encode() + b"\n{}\n", "nested deeper than 64 levels"),
}


@pytest.mark.parametrize("rel", list(STORE_FILES))
def test_damaged_store_file_is_named_and_listed_by_status_and_doctor(proj: Path, rel: str) -> None:
    remember(proj, "a good memory about databases")
    data, expect = STORE_FILES[rel]
    path = proj / ".memofs" / rel
    path.write_bytes(data)
    for cmd in ("status", "doctor"):
        res = cli(proj, cmd, "--json")
        assert res.exit_code == 1, (cmd, res.output)
        problems = json.loads(res.stdout)["problems"]
        assert any(str(path) in p and expect in p for p in problems), problems
    for args in (["recall", "-q", "databases"], ["context", "-q", "databases"]):
        res = cli(proj, *args)
        assert res.exit_code in (0, 1) and "Traceback" not in res.output, (args, res.output)
        if res.exit_code == 1:  # the command needed the file: its error names it
            line = one_error_line(res)
            assert str(path) in line and expect in line


def test_status_lists_every_problem_instead_of_stopping_at_the_first(proj: Path) -> None:
    d = proj / ".memofs"
    (d / "config.json").write_bytes(b"{oops")
    (d / "memory/memories.jsonl").write_bytes(_row(created_at=5) + b"\n" + json.dumps(GOOD).encode() + b"\n")
    (d / "memory/core.md").write_bytes(b"\xff")
    (d / "graph/nodes.jsonl").write_bytes(b"[" * 100 + b"\n{}\n")
    (d / "manifest.json").write_text(json.dumps({"version": "2", "projectId": 5, "createdAt": 1}))
    res = cli(proj, "status", "--json")
    assert res.exit_code == 1
    problems = json.loads(res.stdout)["problems"]
    for needle in ("config.json:1: invalid JSON", "memories.jsonl:1: field 'created_at'", "core.md: not valid UTF-8",
                   "nodes.jsonl:1: invalid JSON", "manifest.json: field 'version' must be '1'",
                   "manifest.json: field 'projectId'", "manifest.json: field 'createdAt'",
                   "manifest.json: field 'updatedAt'", "manifest.json: field 'memory' must be an object"):
        assert sum(needle in p for p in problems) == 1, (needle, problems)
    human = cli(proj, "doctor")
    assert human.exit_code == 1 and human.stdout.count("problem: ") == len(problems)
    assert human.stdout.rstrip().endswith("UNHEALTHY")


def test_manifest_validation_accepts_what_init_writes(proj: Path) -> None:
    from memofs.store.project import Store

    s = Store.open(proj)
    assert s.manifest_problems() == []
    m = json.loads(s.paths.manifest.read_text())
    m["graph"]["nodes"] = "../elsewhere.jsonl"
    s.paths.manifest.write_text(json.dumps(m))
    assert s.manifest_problems() == [
        f"{s.paths.manifest}: field 'graph.nodes' must be '.memofs/graph/nodes.jsonl'; got '../elsewhere.jsonl'"]


def test_safe_json_depth_limit_and_errors() -> None:
    ok = "[" * 64 + "]" * 64
    assert safe_json.parse(ok, "x") is not None
    with pytest.raises(safe_json.JSONFileError, match=r"^f:3: invalid JSON \(nested deeper than 64 levels\)$"):
        safe_json.parse("[" * 65 + "]" * 65, "f:3")
    # brackets inside strings do not count, escaped quotes do not end a string
    assert safe_json.parse(json.dumps({"t": '\\"' + "[" * 500}), "x") == {"t": '\\"' + "[" * 500}
    with pytest.raises(safe_json.JSONFileError, match=r"^f:2: invalid JSON"):
        safe_json.parse('{\n"a": }', "f", line_numbers=True)
    with pytest.raises(safe_json.JSONFileError, match=r"^f: not valid UTF-8 \(byte 1\)$"):
        safe_json.parse(b'"\xff"', "f")
    with pytest.raises(safe_json.JSONFileError, match="expected a JSON object, got int"):
        safe_json.parse("3", "f", expect=dict)


# ---------------------------------------------------------------------- context cache
def _expandable(proj: Path) -> dict:
    for i in range(10):
        remember(proj, f"delta decision {i}: pool size {i * 10} for the tenant database", "--kind", "decision")
    b = json.loads(cli(proj, "context", "-q", "tenant database", "--budget", "1024", "--json").stdout)
    return next(e for e in b["expandable"] if e["section"] == "recall")


CACHE_DAMAGE = {
    "not json": b"{oops",
    "invalid utf-8": b'[{"key": "\xff"}]',
    "deep": DEEP.encode(),
    "object": b'{"key": "x"}',
    "entry not object": b"[1, 2]",
    "lists is a list": None,  # filled in from the real entry
    "items not strings": None,
    "created_at str": None,
    "meta list": None,
    "unknown section": None,
}


@pytest.mark.parametrize("case", list(CACHE_DAMAGE))
def test_damaged_context_cache_is_discarded_with_a_warning(proj: Path, case: str) -> None:
    rec = _expandable(proj)
    path = proj / ".memofs/tmp/context-cache.json"
    data = CACHE_DAMAGE[case]
    if data is None:
        entries = json.loads(path.read_text())
        e = entries[0]
        if case == "lists is a list":
            e["lists"] = ["x"]
        elif case == "items not strings":
            e["lists"]["recall"] = [1, {"a": 2}]
        elif case == "created_at str":
            e["created_at"] = "soon"
        elif case == "meta list":
            e["meta"] = []
        else:
            e["lists"]["bogus"] = ["x"]
        data = json.dumps(entries).encode()
    path.write_bytes(data)
    line = one_error_line(cli(proj, "context", "--expand", rec["cursor"]))
    assert "has expired or is unknown" in line  # the damaged entry is gone, not crashed on
    path.write_bytes(data)
    res = cli(proj, "context", "-q", "tenant database", "--budget", "1024", "--json")
    assert res.exit_code == 0, res.output
    warnings = json.loads(res.stdout)["warnings"]
    assert any("discarded" in w and "context" in w for w in warnings), warnings
    fresh = next(e for e in json.loads(res.stdout)["expandable"] if e["section"] == "recall")
    assert cli(proj, "context", "--expand", fresh["cursor"]).exit_code == 0  # the cache works again


def test_cache_never_holds_query_text_the_gate_refuses(proj: Path) -> None:
    _expandable(proj)
    secret_query = "tenant database password = correcthorsebattery"
    b = json.loads(cli(proj, "context", "-q", secret_query, "--budget", "1024", "--json").stdout)
    assert b["expandable"], "the briefing must have cached something for this test to mean anything"
    raw = (proj / ".memofs/tmp/context-cache.json").read_text()
    assert "correcthorsebattery" not in raw
    assert "tenant database [REDACTED]" in raw  # the query is kept, its secret is not


# ---------------------------------------------------------------------- 3. cursor.key
def test_cursor_key_is_created_atomically_with_mode_0600(proj: Path) -> None:
    _expandable(proj)
    tmp = proj / ".memofs/tmp"
    key = tmp / "cursor.key"
    assert len(bytes.fromhex(key.read_text())) == 32
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert not [p.name for p in tmp.iterdir() if p.name.startswith(".cursor.key")]  # no temp left behind


@pytest.mark.parametrize("content,why", [
    (b"", "key is empty or too short (0 bytes, at least 16)"),
    (b"\n  \n", "key is empty or too short (0 bytes, at least 16)"),
    (b"abcd", "key is empty or too short (2 bytes, at least 16)"),
    (b"00" * 15, "key is empty or too short (15 bytes, at least 16)"),
    (b"zz" * 32, "not a hex key"),
    (b"\xff" * 32, "not a hex key"),
])
def test_empty_or_short_cursor_key_is_refused(proj: Path, content: bytes, why: str) -> None:
    rec = _expandable(proj)
    key = proj / ".memofs/tmp/cursor.key"
    key.write_bytes(content)
    for args in (["context", "--expand", rec["cursor"]], ["context", "-q", "tenant"]):
        line = one_error_line(cli(proj, *args))
        assert f"{key}: {why}; delete it to issue new cursors" in line
    assert key.read_bytes() == content  # never silently replaced
    key.unlink()
    assert cli(proj, "context", "-q", "tenant").exit_code == 0  # a new key is made
    assert len(bytes.fromhex(key.read_text())) == 32


# ---------------------------------------------------------------------- 5. the secret gate
# Fakes assembled at run time (this file holds no token-shaped string); (text, rule).
SHOULD_BLOCK = [
    ("redis://" + ":s3cr3tpassw0rd" + "@cache.internal:6379/0", "connection_string_credentials"),
    ("postgres://" + "app:Zm9v/YmFy+cXV4" + "@db.internal:5432/app", "connection_string_credentials"),
    ("mysql://" + "root:hunter2hunter2" + "@10.0.0.5:3306/db", "connection_string_credentials"),
    ("mongodb+srv://" + "user:p%40ss:w0rd" + "@cluster0.mongodb.net/test", "connection_string_credentials"),
    ("amqp://" + "guest:Gu3st!pw" + "@rabbit:5672/", "connection_string_credentials"),
    ("clone https://" + "deploy:Tok3nValue" + "@git.example.com/repo.git", "connection_string_credentials"),
    ("DATABASE_URL=postgresql://" + "svc:Pa55word" + "@db:5432/prod", "connection_string_credentials"),
    ("DB_" + "PASSWORD=" + "Sup3rS3cretValue!", "secret_assignment"),
    ("JWT_" + "SECRET=" + "f9a8b7c6d5e4f3a2b1c0", "secret_assignment"),
    ("password" + " = " + "correcthorsebattery", "secret_assignment"),
    ("config " + "password" + " = " + "correct-horse-battery", "secret_assignment"),
    ('PASSWORD: "' + "Sup3r$ecret" + '"', "secret_assignment"),
    ("export API_" + "KEY=" + "a8f5f167f44f4964e6c998dee827110c", "secret_assignment"),
    ("client_" + "secret: " + "9f8e7d6c5b4a39281706", "secret_assignment"),
    ('{"api-' + 'key": "' + "k3y-VALUE-123456" + '"}', "secret_assignment"),
    ("MYSQL_ROOT_" + "PASSWORD=" + "rootpass123", "secret_assignment"),
    ("auth_" + "token=" + "abc123def456ghi", "secret_assignment"),
    ("secret" + " = " + "S3cr3tValue99", "secret_assignment"),
    ("app.secret_" + "key = '" + "dev-Key-0123456789'", "secret_assignment"),
    ("SESSION_" + "SECRET=" + "Xk9#mPq2$vL8", "secret_assignment"),
    ("private_" + "key = " + '"MIIEvQIBADANBgkqhkiG"', "secret_assignment"),
    ("passwd" + "=" + "Tr0ub4dor&3", "secret_assignment"),
    ("pwd" + ": " + "zaq1@WSXcde3", "secret_assignment"),
    ("db." + "password=" + "changeit123", "secret_assignment"),
    ("---- BEGIN SSH2 " + "ENCRYPTED PRIVATE KEY ----\nComment: x\nP2/56wAAAgIAAAAmZGwt", "private_key_block"),
    ("---- BEGIN SSH2 " + "PRIVATE KEY ----", "private_key_block"),
    ("PuTTY-User-" + "Key-File-2: ssh-rsa\nEncryption: none", "private_key_block"),
    ("PuTTY-User-" + "Key-File-3: ssh-ed25519", "private_key_block"),
    ("-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", "private_key_block"),
    ("-----BEGIN " + "OPENSSH PRIVATE KEY-----", "private_key_block"),
    ("-----BEGIN " + "PRIVATE KEY-----", "private_key_block"),
    ("-----BEGIN " + "EC PRIVATE KEY-----", "private_key_block"),
    ("-----BEGIN " + "ENCRYPTED PRIVATE KEY-----", "private_key_block"),
    ("-----BEGIN " + "PGP PRIVATE KEY BLOCK-----", "private_key_block"),
    ("deploy user key " + "AKIA" + "IOSFODNN7EXAMPLE", "aws_access_key_id"),
    ("aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY", "aws_secret_access_key"),
    ("ci token " + "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "github_token"),
    ("github" + "_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_token"),
    ("model key " + "sk" + "-proj-" + "Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56", "openai_api_key"),
    ("sk" + "-" + "T3BlbkFJ" + "a1b2c3d4e5f6g7h8i9j0K1L2M3N4O5P6q7r8", "openai_api_key"),
    ("maps " + "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "google_api_key"),
    ("bot " + "xoxb" + "-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack_token"),
    ("billing " + "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
    ("restricted " + "rk" + "_test_" + "51HabcDEFghiJKLmnoPQ", "stripe_key"),
    ("session " + "eyJ" + "hbGciOiJIUzI1NiJ9." + "eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "jwt_token"),
]

SHOULD_ALLOW = [
    "sk-learn-compatible-estimator-interface",
    "secret: rotate-quarterly-through-vault",
    "secret: keep-it-in-the-vault",
    "secret: rotate-quarterly",
    "task-runner-sk-module-compatibility-layer",
    "risk-averse-deployment-strategy-for-payments",
    "Auth token validation failure handled with 401",
    "Password policy requires 12 characters and a symbol",
    "Connect to postgres://localhost:5432/app (no credentials in the URL)",
    "redis://cache.internal:6379/0",
    "http://localhost:3000/users/@me",
    "The api_key is read from ${OPENAI_API_KEY} at start-up",
    "password = os.environ['DB_PASSWORD']",
    "api_key: ${API_KEY}",
    "token: <paste-your-token>",
    "password: {{ vault_db_password }}",
    "Reset the password via the admin page",
    "The secret sauce is caching",
    "DB_PASSWORD is read from the environment",
    "Set PASSWORD_MIN_LENGTH to 12",
    "password=short",
    "The JWT_SECRET lives in Vault",
    "passwords: see the 1Password vault",
    "See https://docs.python.org/3/library/re.html",
    "email me at dev@example.com",
    "ssh git@github.com:org/repo.git",
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "---- BEGIN SSH2 PUBLIC KEY ----",
    "PuTTY is the terminal the ops team uses",
    "AKIA is the prefix of AWS access key ids",
    "use eyJ-prefixed base64 for JWT headers",
    "Use D1 for tenant metadata (decision rationale: edge latency)",
    "Never store secrets (keys, tokens, passwords)",
]


def test_the_table_is_big_enough() -> None:
    assert len(SHOULD_BLOCK) + len(SHOULD_ALLOW) >= 60
    assert len(SHOULD_BLOCK) >= 30 and len(SHOULD_ALLOW) >= 30


@pytest.mark.parametrize("text,rule", SHOULD_BLOCK)
def test_gate_blocks(text: str, rule: str) -> None:
    from memofs.files import secrets

    rules = [v.rule for v in secrets.scan(text)]
    assert rule in rules, (text, rules)
    with pytest.raises(secrets.WriteBlockedError):
        secrets.check(text)
    assert secrets.REDACTED in secrets.redact(text)


@pytest.mark.parametrize("text", SHOULD_ALLOW)
def test_gate_allows(text: str) -> None:
    from memofs.files import secrets

    assert secrets.scan(text) == []
    assert secrets.redact(text) == text


def test_gate_stays_fast_on_adversarial_runs() -> None:
    import time

    from memofs.files import secrets

    for text in ("sk-" * 33_000, "postgres://" * 9_000, "secret:" * 14_000, "a-" * 50_000, "password:" * 11_000):
        t0 = time.perf_counter()
        secrets.scan(text)
        assert time.perf_counter() - t0 < 3.0, text[:12]


AKIA = "AKIA" + "IOSFODNN7EXAMPLE"
CONN = "postgres://" + "app:Zm9v/YmFy+cXV4" + "@db.internal:5432/app"


@pytest.mark.parametrize("field_args", [
    ["--tag", AKIA],
    ["--supersedes", CONN],
    ["--supersedes", "mem_1", "--supersedes", "DB_" + "PASSWORD=" + "Sup3rS3cretValue!"],
    ["--anchor", AKIA + ".txt"],
])
def test_every_stored_field_is_scanned(proj: Path, field_args: list[str]) -> None:
    (proj / (AKIA + ".txt")).write_text("x\n")
    before = (proj / ".memofs/memory/memories.jsonl").read_bytes()
    line = one_error_line(cli(proj, "remember", "an ordinary memory", *field_args))
    assert line.startswith("memofs: error: Write blocked: content matched 1 secret pattern(s)")
    assert AKIA not in line and "Sup3r" not in line  # the message never echoes the secret
    assert (proj / ".memofs/memory/memories.jsonl").read_bytes() == before


# ---------------------------------------------------------------------- 4. inputs at the edges
@pytest.mark.parametrize("value,read_only", [
    ("1", True), ("true", True), ("TRUE", True), ("yes", True), (" Yes ", True), ("on", True),
    ("", False), ("0", False), ("false", False), ("no", False), ("OFF", False),
])
def test_read_only_env_is_parsed_strictly(proj: Path, monkeypatch, value: str, read_only: bool) -> None:
    import memofs.surfaces.mcp_server

    seen: dict = {}
    monkeypatch.setattr(memofs.surfaces.mcp_server, "serve", lambda store, **kw: seen.update(kw))
    res = runner.invoke(app, ["--root", str(proj), "mcp"], env={**ENV, "MEMOFS_MCP_READ_ONLY": value})
    assert res.exit_code == 0, res.output
    assert seen["read_only"] is read_only


@pytest.mark.parametrize("value", ["maybe", "2", "y", "enabled", "tru"])
def test_unknown_read_only_value_refuses_to_start(proj: Path, value: str) -> None:
    res = sh(proj, "mcp", env={"MEMOFS_MCP_READ_ONLY": value}, timeout=20)  # must not start serving stdio
    line = one_error_line(res)
    assert line == (f"memofs: error: MEMOFS_MCP_READ_ONLY={value!r} is not a boolean; "
                    "use 1/true/yes/on or 0/false/no/off")


def test_read_only_yes_refuses_remember_over_mcp(proj: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def call() -> object:
        params = StdioServerParameters(command=MEMOFS, args=["--root", str(proj), "mcp"],
                                       env={**ENV, "MEMOFS_MCP_READ_ONLY": "yes"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await s.call_tool("memofs.remember", {"content": "should not be stored"})

    res = anyio.run(call)
    assert res.is_error and res.structured_content["error"]["code"] == "MCP_AUTHORIZATION_ERROR"
    assert (proj / ".memofs/memory/memories.jsonl").read_bytes() == b""


def test_budget_zero_is_an_error_not_the_default(proj: Path) -> None:
    rec = _expandable(proj)
    for args in (["context", "-q", "tenant", "--budget", "0"], ["context", "--expand", rec["cursor"], "--budget", "0"]):
        line = one_error_line(cli(proj, *args))
        assert "budget must be an integer in [1024," in line and "got 0" in line


def test_non_utf8_argv_and_stdin_get_a_clear_message(proj: Path) -> None:
    res = sh(proj, argv=[MEMOFS.encode(), b"--root", str(proj).encode(), b"remember", b"caf\xe9 au lait"])
    line = one_error_line(res)
    assert line == "memofs: error: argument 4 ('caf\ufffd au lait') is not valid UTF-8"  # U+FFFD shown
    line = one_error_line(sh(proj, "remember", "-", stdin=b"caf\xe9 au lait\n"))
    assert line == "memofs: error: stdin is not valid UTF-8 (byte 3)"
    assert (proj / ".memofs/memory/memories.jsonl").read_bytes() == b""


def test_text_starting_with_dashes_is_text_after_double_dash(proj: Path) -> None:
    res = cli(proj, "remember", "--json", "--", "-----BEGIN the release checklist with five steps")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["text"] == "-----BEGIN the release checklist with five steps"
    key = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    line = one_error_line(cli(proj, "remember", "--", key))
    assert "Write blocked" in line and "private_key_block" in line
    out = json.loads(cli(proj, "recall", "-q", "release checklist", "--json").stdout)
    assert [r["text"] for r in out["results"]] == ["-----BEGIN the release checklist with five steps"]


# ---------------------------------------------------------------------- 6. the error boundaries
@pytest.mark.parametrize("exc", [KeyError("boom"), ValueError("numpy says no"), AttributeError("x has no y")])
def test_a_bug_of_ours_is_an_internal_error_exit_3(proj: Path, monkeypatch, exc: Exception) -> None:
    from memofs.store.project import Store

    def broken(self):
        raise exc

    monkeypatch.setattr(Store, "load", broken)
    res = cli(proj, "recall", "-q", "anything")
    line = one_error_line(res, code=3, prefix="memofs: internal error: ")
    assert line == f"memofs: internal error: {type(exc).__name__}: {exc} (run memofs doctor)"
    doc = cli(proj, "doctor", "--json")  # doctor keeps going and lists it
    assert doc.exit_code == 1
    assert f"internal error: {type(exc).__name__}: {exc}" in json.loads(doc.stdout)["problems"]


def test_user_errors_stay_exit_1(proj: Path) -> None:
    for args in (["remember", " "], ["remember", "x", "--tag", "bad tag"], ["recall", "-q", " "],
                 ["context", "--expand", "bogus"]):
        one_error_line(cli(proj, *args))


def _tools(root: Path, live=None):
    from datetime import datetime, timezone

    from memofs.store.cursor import ContextCache
    from memofs.surfaces.mcp_server import MemofsTools
    from memofs.store.project import LiveStore, Store

    now = datetime(2026, 3, 1, tzinfo=timezone.utc)
    store = Store.open(root, clock=lambda: now)
    return MemofsTools(live or LiveStore(store), ContextCache(clock=lambda: 0.0), lambda: now)


def test_mcp_blames_the_caller_only_for_what_the_caller_sent(proj: Path) -> None:
    from memofs.surfaces.mcp_server import ToolError

    class BrokenModel:
        class store:  # noqa: N801 - a store whose files are all in place (the server checks links per call)
            @staticmethod
            def refuse_links_out() -> None:
                pass

        def state(self):
            raise ValueError("bad model file: weights shape (3,) != (384,)")

    with pytest.raises(ToolError) as info:
        _tools(proj, BrokenModel()).call("memofs.recall", {"query": "x"})
    assert (info.value.code, info.value.status) == ("MEMOFS_INTERNAL_ERROR", 500)
    assert str(info.value) == "internal error: ValueError: bad model file: weights shape (3,) != (384,) (run memofs doctor)"

    tools = _tools(proj)
    for args, code in (({"content": "ok", "tags": ["bad tag"]}, "MCP_VALIDATION_ERROR"),
                       ({"content": "lone \ud800 surrogate"}, "MCP_VALIDATION_ERROR"),
                       ({"content": "x", "anchors": [".memofs/config.json"]}, "MCP_VALIDATION_ERROR"),
                       ({"content": "x", "supersedes": [CONN]}, "MEMOFS_WRITE_BLOCKED")):
        with pytest.raises(ToolError) as info:
            tools.call("memofs.remember", args)
        assert info.value.code == code, (args, info.value)
    (proj / ".memofs/memory/memories.jsonl").write_bytes(_row(created_at=5) + b"\n")
    with pytest.raises(ToolError) as info:
        tools.call("memofs.recall", {"query": "x"})
    assert (info.value.code, info.value.status) == ("MEMOFS_STORE_ERROR", 500)
    assert "memories.jsonl:1: field 'created_at'" in str(info.value)


# ---------------------------------------------------------------------- derived data after a crash
def test_doctor_finds_and_fix_rebuilds_what_a_crash_left_out(proj: Path) -> None:
    ids = [remember(proj, "We use Postgres with PgBouncer for pooling"), remember(proj, "The API depends on Redis")]
    d = proj / ".memofs"
    healthy_events = (d / "events/memory-events.jsonl").read_text()
    healthy_graph = {n: (d / "graph" / n).read_text() for n in ("nodes.jsonl", "edges.jsonl")}
    assert json.loads(cli(proj, "doctor", "--json").stdout)["healthy"]
    # what kill -9 between the memory append and the event/graph writes leaves
    lines = healthy_events.splitlines(keepends=True)
    (d / "events/memory-events.jsonl").write_text(lines[0])
    (d / "graph/nodes.jsonl").write_text("")
    (d / "graph/edges.jsonl").write_text("")
    (d / "graph/.nodes.jsonl.x1y2.tmp").write_text("half a rewrite")
    (d / "indexes/.embeddings-tmp-abc").write_text("half a rewrite")
    res = cli(proj, "doctor", "--json")
    assert res.exit_code == 1
    problems = json.loads(res.stdout)["problems"]
    assert f"1 memories have no memory.created event (first: {ids[1]}); run `memofs doctor --fix` to rebuild it from memories.jsonl" in problems
    assert any(p.startswith(f"2 memories have graph facts missing (first: {ids[0]})") for p in problems)
    assert sum(p.startswith("orphan temp file ") for p in problems) == 2
    assert cli(proj, "status").exit_code == 1  # status sees the temp files too (cheap check)
    fixed = cli(proj, "doctor", "--fix", "--json")
    assert fixed.exit_code == 0, fixed.output
    out = json.loads(fixed.stdout)
    assert out["healthy"] and out["fixed"] == [
        "removed orphan temp file .memofs/graph/.nodes.jsonl.x1y2.tmp (14 bytes)",
        "removed orphan temp file .memofs/indexes/.embeddings-tmp-abc (14 bytes)",
        "appended 1 missing memory.created event(s)",
        "re-extracted graph facts of 2 memory(ies)"]
    # rebuilt exactly as the writes would have made them
    assert (d / "events/memory-events.jsonl").read_text() == healthy_events
    assert {n: (d / "graph" / n).read_text() for n in healthy_graph} == healthy_graph
    assert json.loads(cli(proj, "doctor", "--fix", "--json").stdout)["fixed"] == []  # idempotent


def test_store_files_are_all_mode_0644(proj: Path) -> None:
    remember(proj, "We use Postgres with PgBouncer for pooling")
    from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile

    import numpy as np

    EmbeddingsFile(proj / ".memofs/indexes/embeddings.jsonl").upsert(
        [EmbeddingRecord(id="m", vector=np.ones(3, dtype=np.float32), embedder="e", text_sha256="0" * 64)])
    modes = {p.relative_to(proj).as_posix(): stat.S_IMODE(p.stat().st_mode)
             for p in (proj / ".memofs").rglob("*") if p.is_file() and p.name not in ("cursor.key", ".lock")}
    assert (proj / ".memofs/graph/nodes.jsonl").stat().st_size > 0  # the graph was rewritten
    assert {k: v for k, v in modes.items() if v != 0o644} == {}
