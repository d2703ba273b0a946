"""The probe of issue 36, re-run: hostile input against the CLI, the MCP server and the
store files, every call under a timeout, counted as the issue's table.

    python -m memofs_eval.bench.hostile_probe [--timeout 20] [--sample 1.0] [--seed 0]

Families (lexical-only stores, ``MEMOFS_EMBEDDER=none``; the forged-cache family also builds a
store with seeded 8-d vectors):

* damage: corrupt bytes, a FIFO, an empty file, a directory, a link out of ``.memofs/`` and a
  link loop at every store and index path, each x status / recall / context / doctor /
  doctor --fix / remember, on a fresh copy of a small store;
* anchors: ``remember --anchor`` with loops, links out, absolute and ``..`` paths, a FIFO, a
  directory; then every command with a loop planted at an anchored path;
* secrets: the forms the issue lists (labelled tokens, Slack/Stripe/npm/HF, an unlabelled AWS
  key, PEM and OpenSSH bodies; base64, URL-encoded, zero-width and fullwidth variants; split
  across lines, out of scope by the gate's documented promise) and the harmless texts;
* metadata depth, size, huge and non-finite numbers; bad CLI input; SIGINT during remember
  and recall (real processes);
* raw JSON-RPC lines to ``memofs mcp`` over stdio and Streamable HTTP;
* concurrent writer processes, and ``kill -9`` of a writer process mid-run;
* forged index caches (issue 36 item 7).

CLI calls of the in-process families run through typer's runner with a SIGALRM timeout (a
hang raises out of the call and is counted); the others are subprocesses under
``timeout=``. ``--sample`` keeps that fraction of the damage family (seeded), to fit a
slower machine; the table says how many ran. "clean" counts an answer (exit 0) or one
``memofs: error:`` line with exit 1 (130 after SIGINT); "exit 3" is our internal error.
This is a probe, not a figure: no report imports it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memofs_eval.reporting.markdown import table

ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}
MEMOFS = str(Path(sys.executable).with_name("memofs"))
OUTSIDE = "OUTSIDE PRIVATE KEY MATERIAL"


class Hang(BaseException):
    """Raised by the alarm: a call ran past its timeout (BaseException: the runner re-raises it)."""


@dataclass
class Tally:
    """One row of the table."""

    family: str
    tries: int = 0
    clean: int = 0
    tracebacks: int = 0
    hangs: int = 0
    lost: int = 0
    exit3: int = 0
    forgeries: int = 0
    secrets: int = 0
    followed: int = 0  # links out of .memofs/ followed (outside content shown or changed)
    notes: list[str] = field(default_factory=list)

    def count(self, code: int | None, out: str, *, hang: bool = False, traceback: bool = False,
              ok: tuple[int, ...] = (0, 1)) -> None:
        self.tries += 1
        if hang:
            self.hangs += 1
        elif traceback or "Traceback (most recent call last)" in out:
            self.tracebacks += 1
        elif code == 3 or "internal error" in out:
            self.exit3 += 1
        elif code in ok:
            self.clean += 1
        else:
            self.notes.append(f"exit {code}: {out.strip()[-120:]}")


@dataclass
class Result:
    code: int | None
    out: str
    err: str
    hang: bool = False
    traceback: bool = False

    @property
    def text(self) -> str:
        return self.out + self.err


@contextmanager
def alarm(seconds: float) -> Iterator[None]:
    def fire(*_: object) -> None:
        raise Hang()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Cli:
    """``memofs`` in this process (typer's runner) under a SIGALRM timeout."""

    def __init__(self, timeout: float) -> None:
        from typer.testing import CliRunner

        from memofs.surfaces.cli import app

        self.app, self.runner, self.timeout = app, CliRunner(), timeout

    def __call__(self, root: Path | str, *args: str, env: dict[str, str] | None = None) -> Result:
        try:
            with alarm(self.timeout):
                res = self.runner.invoke(self.app, ["--root", str(root), *args], env={**ENV, **(env or {})})
        except Hang:
            return Result(None, "", "", hang=True)
        tb = res.exception is not None and not isinstance(res.exception, SystemExit)
        return Result(res.exit_code, res.stdout, res.stderr, traceback=tb)


def memory_ids(root: Path) -> set[str]:
    """Ids in memories.jsonl as raw lines (independent of the store's reader)."""
    try:
        data = (root / ".memofs" / "memory" / "memories.jsonl").read_bytes()
    except OSError:
        return set()
    return {m.decode() for m in re.findall(rb'"id":\s*"([^"]+)"', data)}


# ---------------------------------------------------------------------------------- damage
DURABLE = ("memory/memories.jsonl", "memory/core.md", "events/memory-events.jsonl", "graph/nodes.jsonl",
           "graph/edges.jsonl", "indexes/embeddings.jsonl", "config.json", "manifest.json", ".lock")
CACHES = ("indexes/derived.json", "indexes/memories.sidecar.json", "indexes/memories.*.texts.npy",
          "indexes/memories.*.sha.npy", "indexes/terms.sidecar.json", "indexes/terms.*.data.npy",
          "indexes/terms.*.indptr.npy", "tmp/context-cache.json", "tmp/cursor.key")
KINDS = ("corrupt", "fifo", "empty", "dir", "link_out", "loop")
COMMANDS = (("status",), ("recall", "-q", "postgres pool"), ("context", "-q", "postgres pool"), ("doctor",),
            ("doctor", "--fix"), ("remember", "a memory written after the damage", "--json"))


def damage(src: Path, dst: Path, rel: str, kind: str, rng: random.Random) -> None:
    shutil.copytree(src, dst, symlinks=True)
    found = sorted((dst / ".memofs").glob(rel))
    path = found[0] if found else dst / ".memofs" / rel
    if kind == "corrupt" and path.is_file():
        data = bytearray(path.read_bytes() or b"x")
        for _ in range(max(1, len(data) // 50)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
        return
    if os.path.lexists(path):
        path.unlink()
    if kind in ("fifo", "corrupt"):
        os.mkfifo(path) if kind == "fifo" else path.write_bytes(bytes(rng.randrange(256) for _ in range(64)))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "dir":
        path.mkdir()
    elif kind == "link_out":
        (dst.parent / f"{dst.name}-outside.txt").write_text(OUTSIDE + "\n")
        path.symlink_to(dst.parent / f"{dst.name}-outside.txt")
    else:
        path.symlink_to(path.name)


def family_damage(cli: Cli, work: Path, sample: float, rng: random.Random) -> Tally:
    t = Tally("damage: corrupt/FIFO/empty/dir/link-out/loop at every store and index path x 6 commands")
    src = work / "damage-template"
    src.mkdir()
    cli(src, "init")
    ids = {json.loads(cli(src, "remember", f"Postgres pool {i} uses PgBouncer", "--json").out)["id"] for i in range(4)}
    cli(src, "context", "-q", "postgres pool")
    cases = [(rel, kind, cmd) for rel in DURABLE + CACHES for kind in KINDS for cmd in COMMANDS]
    if sample < 1:
        cases = rng.sample(cases, max(1, int(len(cases) * sample)))
        t.notes.append(f"sampled {len(cases)} of {len(DURABLE + CACHES) * len(KINDS) * len(COMMANDS)} cases (seeded)")
    for n, (rel, kind, cmd) in enumerate(cases):
        root = work / f"damage-{n}"
        damage(src, root, rel, kind, rng)
        res = cli(root, *cmd)
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
        outside = root.parent / f"{root.name}-outside.txt"
        if OUTSIDE in res.text or (outside.exists() and outside.read_text() != OUTSIDE + "\n"):
            t.followed += 1
        if rel != "memory/memories.jsonl":  # the damaged file's own content is the probe's doing
            have = memory_ids(root)
            acked = {json.loads(res.out)["id"]} if cmd[0] == "remember" and res.code == 0 else set()
            if not (ids | acked) <= have:
                t.lost += 1
        shutil.rmtree(root, ignore_errors=True)
    return t


# ---------------------------------------------------------------------------------- anchors
def family_anchors(cli: Cli, work: Path) -> Tally:
    t = Tally("anchors (loops, links out, absolute, .., FIFO, dir)")
    root = work / "anchors"
    (root / "src").mkdir(parents=True)
    cli(root, "init")
    (root / "src" / "t.py").write_text("x = 1\n")
    (root / "src" / "loop.py").symlink_to("loop.py")
    (work / "anchor-outside.py").write_text("secret = 1\n")
    (root / "src" / "out.py").symlink_to(work / "anchor-outside.py")
    os.mkfifo(root / "src" / "fifo.py")
    for a in ("src/t.py", "src/loop.py", "src/out.py", "src/fifo.py", "src", "/etc/passwd", "../outside.py",
              "src/../../x.py", "missing.py", "src/t.py\x00x", "a" * 5000, ""):
        res = cli(root, "remember", f"about {a[:20]!r}", "--anchor", a)
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
    res = cli(root, "remember", "anchored to a file made a loop later", "--anchor", "src/t.py")
    t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
    (root / "src" / "t.py").unlink()
    (root / "src" / "t.py").symlink_to("t.py")
    for cmd in COMMANDS[:5]:
        res = cli(root, *cmd)
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
    return t


# ---------------------------------------------------------------------------------- secrets
GH = "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
PG = "postgres://" + "admin:s3cr3tPass" + "@db:5432/app"


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


SECRET_FORMS = [  # assembled so this file holds none whole
    "GITHUB_TOKEN=" + "Zx9kQ2mLp4Rt7Vw1Yb8N", "API_TOKEN=" + "Zx9kQ2mLp4Rt7Vw1",
    "NPM_TOKEN=" + "npm" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "HF_TOKEN=" + "hf" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7", "AWS_SESSION_TOKEN=" + "FwoGZXIvYXdzEJr//////////wEaDH3xk",
    "SLACK_TOKEN=" + "T0a9b8c7d6e5f4g3", "xapp" + "-1-A0123BCDEF-1234567890-abcdef0123456789",
    "https://hooks.slack.com/services/" + "T00000000/B00000000/" + "XXXXXXXXXXXXXXXXXXXXXXXX",
    "whsec" + "_" + "aB3dE5fG7hJ9kL2mN4pQ6rS8", "the key is " + AWS_SECRET,
    "MIIEpAIBAAKCAQEA" + "7bq9xYh3kLm2Np4Qr6St8Uv0Wx2Yz4Ab6Cd8Ef0Gh2Ij4Kl6", "b3BlbnNzaC1rZXktdjE" + "AAAAABG5vbmUAAAAEbm9uZQ",
    "AKIA" + "IOSFODNN7EXAMPLE", "token " + GH, "sk" + "-proj-" + "Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56",
    "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "xoxb-" + "123456789012-AbCdEfGhIjKl", "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "aws_secret_access_key = " + AWS_SECRET, "-----BEGIN " + "RSA PRIVATE KEY-----", "password" + "=" + "Sup3r$ecret!9", PG,
    "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    # encoded: base64 (4), URL-encoded (4), zero-width and fullwidth (2)
    base64.b64encode(("token " + GH).encode()).decode(), base64.b64encode(PG.encode()).decode(),
    base64.urlsafe_b64encode(GH.encode()).decode(), base64.b64encode(("aws_secret_access_key = " + AWS_SECRET).encode()).decode(),
    urllib.parse.quote(PG, safe=""), urllib.parse.quote(GH, safe="").replace("_", "%5F"),
    urllib.parse.quote("password" + "=" + "Sup3r$ecret!9", safe=""), urllib.parse.quote("token " + GH, safe=""),
    GH[:5] + "\u200b" + GH[5:], _fullwidth(GH),
]
SPLIT = [GH[:12] + "\n" + GH[12:], "aws_secret_access_key =\n" + AWS_SECRET, PG[:14] + "\n" + PG[14:],
         "AKIA" + "IOSF\nODNN7EXAMPLE"]  # out of scope by the gate's documented promise (counted apart)
HARMLESS = [
    "Ran pwd: /workspace/service-api", "api_key: required on every request", "passwd: /etc/passwd is world readable",
    "private_key: config/keys/server.pem", "Template: postgres://user:password@host:5432/db",
    "Connect with postgres://<user>:<password>@db:5432/app", "token: use the refresh flow",
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed the pool", "see src/memofs/files/secrets.py and docs/api/tokens.md",
    "Ｐostgres ｕses ＰgBouncer", "Encoded greeting: aGVsbG8gd29ybGQsIHRoaXMgaXMgcGxhaW4gdGV4dA==", "100% of requests use %20 escapes",
    "tokens and passwords are never stored", "The deploy window is Tuesday", "Set API_TOKEN in the CI secrets store",
]


def family_secrets(cli: Cli, work: Path) -> tuple[Tally, Tally]:
    t = Tally(f"secrets: {len(SECRET_FORMS)} forms (+{len(SPLIT)} split across lines, out of scope)")
    h = Tally(f"harmless texts ({len(HARMLESS)})")
    root = work / "secrets"
    root.mkdir()
    cli(root, "init")
    for text in SECRET_FORMS:
        res = cli(root, "remember", "--", text)  # "--": a PEM header starts with dashes
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
        t.secrets += res.code == 0
        ref = cli(root, "remember", "plain text", "--source-ref", json.dumps({"sourceType": text}))
        t.count(ref.code, ref.text, hang=ref.hang, traceback=ref.traceback)
        if text in ref.text:
            t.notes.append(f"--source-ref echoed {text[:8]}...")
    split_stored = 0
    for text in SPLIT:
        res = cli(root, "remember", "--", text)
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
        split_stored += res.code == 0
    t.notes.append(f"split across lines stored: {split_stored} of {len(SPLIT)} (documented out of scope)")
    for text in HARMLESS:
        res = cli(root, "remember", "--", text)
        h.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
        if res.code != 0:
            h.notes.append(f"wrongly refused: {text!r}")
    return t, h


# ---------------------------------------------------------------------------------- metadata, CLI input
def family_input(cli: Cli, work: Path) -> Tally:
    t = Tally("metadata depth/size/huge ints, bad CLI input, long queries")
    root = work / "input"
    root.mkdir()
    cli(root, "init")
    keep = json.loads(cli(root, "remember", "Postgres uses PgBouncer", "--json").out)["id"]

    def nested(d: int) -> str:
        return '{"a":' * d + "1" + "}" * d

    metas = [nested(63), nested(64), nested(70), "[" * 5000 + "]" * 5000, '{"n": ' + "9" * 5000 + "}",
             json.dumps({"big": "x" * 70_000}), '{"x": NaN}', '{"x": 1e400}', "[1,2]", "not json", '{"a": "\\ud800"}']
    cases: list[tuple[str, ...]] = [("remember", "metadata case", "--metadata", m) for m in metas]
    cases += [("recall", "-q", "x", "-k", "0"), ("recall", "-q", "x", "-k", "-1"), ("recall", "-q", "x", "-k", "abc"),
              ("recall", "-q", ""), ("recall", "-q", "a" * 4097), ("recall", "-q", "b" * (1 << 20)),
              ("context", "-q", "c" * 100_000), ("recall", "-q", "\ud800"), ("remember", ""), ("remember", "x\x00y"),
              ("remember", "t", "--kind", "weird"), ("remember", "t", "--confidence", "2"),
              ("remember", "t", "--confidence", "nan"), ("remember", "t", "--tag", "t" * 10_000),
              ("remember", "t", "--supersedes", "no-such-id"), ("recall", "--bogus"), ("doctor", "--fix", "extra"),
              ("remember", "t", "--source-ref", "[]"), ("remember", "t", "--source-ref", "{"),
              ("remember", "t", "--tag", "\ud800"), ("remember", "t", "--title", "\udcff"), ("remember", "t", "--source", "\ud800"),
              ("remember", "t", "--source-ref", '{"sourceType": "\\ud800"}'), ("remember", "\ud800 text")]
    for args in cases:
        res = cli(root, *args)
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback, ok=(0, 1, 2))  # 2: click's usage error
        if res.code not in (0, 1, 2):
            t.notes.append(f"{' '.join(a[:30] for a in args)}: exit {res.code}: {res.text.strip()[-160:]}")
    for env in ({"MEMOFS_EMBED_ON_WRITE": "maybe"}, {"MEMOFS_EMBEDDER": "bogus"}):
        res = cli(root, "remember", "env case", env=env)
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
    for bad_root in (work / "no-such-dir", work / "input" / ".memofs" / "config.json"):
        res = cli(bad_root, "status")
        t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
    after = cli(root, "status")
    if after.code != 0 or keep not in memory_ids(root):
        t.lost += 1
    return t


def fresh_store(work: Path, name: str, timeout: float) -> tuple[Path, dict[str, str]]:
    """A new store made by ``memofs init`` in its own process, and the environment to run ``memofs`` in."""
    root = work / name
    root.mkdir()
    env = {**os.environ, **ENV}
    subprocess.run([MEMOFS, "--root", str(root), "init"], env=env, capture_output=True, timeout=timeout)
    return root, env


def family_sigint(work: Path, timeout: float, rng: random.Random, runs: int) -> Tally:
    t = Tally(f"Ctrl-C (SIGINT) during remember / recall ({runs} processes)")
    root, env = fresh_store(work, "sigint", timeout)
    startup = 0
    for n in range(runs):
        args = ["remember", f"interrupted memory {n}", "--json"] if n % 2 == 0 else ["recall", "-q", "interrupted"]
        p = subprocess.Popen([MEMOFS, "--root", str(root), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(rng.uniform(0.05, 1.5))
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            t.count(None, "", hang=True)
            continue
        if "Traceback" in err and "/memofs/" not in err and "<frozen site>" in err:
            startup += 1  # Python's own start-up (site, .pth files): before any memofs code runs
            continue
        t.count(p.returncode, out + err, ok=(0, 1, 130, -signal.SIGINT))  # -2: the default action, silent
        if args[0] == "remember" and p.returncode == 0 and json.loads(out)["id"] not in memory_ids(root):
            t.lost += 1
    if startup:
        t.notes.append(f"{startup} interrupted during Python's own start-up (site), before memofs code: "
                       "Python's traceback, not counted above")
    st = subprocess.run([MEMOFS, "--root", str(root), "status"], env=env, capture_output=True, text=True, timeout=timeout)
    t.count(st.returncode, st.stdout + st.stderr, ok=(0,))
    return t


# ---------------------------------------------------------------------------------- MCP raw lines
DEEP = '{"a":' * 5000 + "1" + "}" * 5000
RAW = [
    '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memofs.recall","arguments":{"query":"\\ud800"}}}',
    '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":' + DEEP + "}", "not json at all",
    '{"jsonrpc":"2.0","id":10,"method":"tools/list"', "[]", "[1, 2]", "42", '"a string"', "null",
    '{"jsonrpc":"2.0","id":11,"method":5}', '{"jsonrpc":"1.0","id":12,"method":"ping"}', '{"id":13,"method":"ping"}',
    '{"jsonrpc":"2.0","id":14}', "\x00\x01\x02", '{"jsonrpc":"2.0","id":15,"method":"tools/list","params":"x"}',
    '{"jsonrpc":"2.0","id":true,"method":"ping"}',  # the SDK reads this as a notification (id dropped): no reply
]


def stdio_exchange(cmd: list[str], env: dict[str, str], lines: list[str], last_id: str, timeout: float
                   ) -> tuple[list[dict], str, bool]:
    """Write ``lines`` to ``cmd``'s stdin and read its JSON replies until the one with id
    ``last_id`` (stdin stays open till then: at end of input the SDK cancels requests still
    in flight, so closing it early loses replies). Returns (replies, stderr, timed out)."""
    import queue
    import threading

    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         text=True, encoding="utf-8", errors="replace")
    got: queue.Queue[str | None] = queue.Queue()
    err: list[str] = []

    def pump() -> None:
        for ln in p.stdout:
            got.put(ln)
        got.put(None)

    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True).start()
    p.stdin.write("\n".join(lines) + "\n")
    p.stdin.flush()
    replies, late, deadline = [], False, time.monotonic() + timeout
    while True:
        try:
            ln = got.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            late = True
            break
        if ln is None:
            break
        if ln.strip():
            replies.append(json.loads(ln))
            if replies[-1].get("id") == last_id:
                break
    p.stdin.close()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    time.sleep(0.1)
    return replies, "".join(err), late


def family_mcp(work: Path, timeout: float) -> Tally:
    t = Tally(f"MCP raw JSON-RPC lines: stdio ({len(RAW)}) and Streamable HTTP")
    root, env = fresh_store(work, "mcp", timeout)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}
    lines = [json.dumps(init), '{"jsonrpc":"2.0","method":"notifications/initialized"}']
    for n, line in enumerate(RAW):
        lines += [line, json.dumps({"jsonrpc": "2.0", "id": f"ping-{n}", "method": "ping"})]
    replies, err, late = stdio_exchange([MEMOFS, "--root", str(root), "mcp"], env, lines, f"ping-{len(RAW) - 1}",
                                        timeout * 3)
    t.hangs += late
    replies = replies[1:]
    for n, line in enumerate(RAW):
        pong = next((i for i, r in enumerate(replies) if r.get("id") == f"ping-{n}"), None)
        before = replies[:pong] if pong is not None else replies
        t.tries += 1
        if "Traceback" in err:
            t.tracebacks += 1
        elif before and "error" in before[0]:
            t.clean += 1
        else:
            t.notes.append(f"stdio: no reply to {line[:50]!r}")
        replies = replies[pong + 1:] if pong is not None else []
    # Streamable HTTP: malformed bodies POSTed to /mcp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([MEMOFS, "--root", str(root), "mcp", "--http", f"127.0.0.1:{port}"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout * 2
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        for body in RAW[:15] + ["", "{" * 100_000]:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body.encode("utf-8", "surrogatepass"),
                                         headers={"Content-Type": "application/json",
                                                  "Accept": "application/json, text/event-stream"})
            t.tries += 1
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    payload = r.read().decode("utf-8", "replace")
            except urllib.error.HTTPError as e:
                payload = e.read().decode("utf-8", "replace")
            except (TimeoutError, urllib.error.URLError) as e:
                t.hangs += isinstance(getattr(e, "reason", e), TimeoutError)
                t.notes.append(f"http: {type(e).__name__} for {body[:40]!r}")
                continue
            (t.notes.append(f"http: no JSON-RPC error for {body[:40]!r}") if '"error"' not in payload else None)
            t.clean += '"error"' in payload
    finally:
        srv.terminate()
        try:
            _, err = srv.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            _, err = srv.communicate()
    if "Traceback" in err:
        t.tracebacks += 1
    return t


# ---------------------------------------------------------------------------------- concurrency, kill -9
_WRITER = r"""
import sys
from memofs.store.project import Store, wall_clock
s = Store.open(sys.argv[1], clock=wall_clock)
for i in range(int(sys.argv[3])):
    m = s.remember(f"writer {sys.argv[2]} memory {i} about queues")
    print(m.id, flush=True)
"""


def family_writers(work: Path, timeout: float, rng: random.Random, kills: int) -> Tally:
    t = Tally(f"4 concurrent writer processes x 15, then kill -9 of a writer ({kills} runs)")
    root, env = fresh_store(work, "writers", timeout)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(root), f"c{w}", "15"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for w in range(4)]
    acked: list[str] = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout * 6)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            t.hangs += 1
        t.count(p.returncode, err)
        acked += out.split()
    for k in range(kills):
        p = subprocess.Popen([sys.executable, "-c", _WRITER, str(root), f"k{k}", "100000"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        time.sleep(rng.uniform(1.5, 3.0))
        p.kill()
        out, _ = p.communicate()
        t.tries += 1
        t.clean += 1
        acked += out.split()
    have = memory_ids(root)
    t.lost += sum(a not in have for a in acked)
    t.notes.append(f"{len(acked)} acknowledged writes checked")
    for args in (["doctor", "--fix"], ["status"], ["recall", "-q", "queues"]):
        r = subprocess.run([MEMOFS, "--root", str(root), *args], env=env, capture_output=True, text=True, timeout=timeout * 3)
        t.count(r.returncode, r.stdout + r.stderr, ok=(0,))
    return t


# ---------------------------------------------------------------------------------- forged caches
def forge_text(store: Any, old: str, new: str) -> None:
    """The issue's first forgery: the memories index rewritten through its own writer with
    one text changed (under whatever cache key is current: the caller picks a forger's)."""
    from memofs.files.sidecar import PrefixStamp

    mems = [replace(m, text=new) if m.text == old else m for m in store.load(sidecar=False).memories]
    p = store.paths.memories
    stamp = PrefixStamp.take(p, p.stat().st_size, p.read_bytes().count(b"\n"))
    with store.lock():
        if not store._memories_sidecar().write(mems, stamp):
            raise RuntimeError("memories.jsonl moved on while forging")


def swap_vector_rows(store: Any, i: int = 0, j: int = 1) -> None:
    """The issue's second forgery: rows ``i`` and ``j`` of the vector sidecar's matrices
    swapped in place (unit length kept, shapes and dtypes unchanged)."""
    import numpy as np

    d = store.paths.embeddings.parent
    gen = json.loads((d / "embeddings.sidecar.json").read_text())["generation"]
    for col in ("unit", "vectors"):
        a = np.load(d / f"embeddings.{gen}.{col}.npy", mmap_mode="r+")
        a[[i, j]] = a[[j, i]]
        a.flush()
        del a


def family_forgeries(cli: Cli, work: Path) -> Tally:
    import numpy as np

    from memofs.signals.vector_index import unit_rows
    from memofs.store.project import Store, rehydrate

    t = Tally("forged index caches (text via the writer, swapped vector rows, copied from another key)")

    class Hashed:
        name, dim = "probe-hash", 8

        def encode(self, texts):  # deterministic vectors from the text's hash
            import hashlib

            return np.array([np.frombuffer(hashlib.sha256(x.encode()).digest()[:8], dtype=np.uint8).astype(np.float32) - 100
                             for x in texts], dtype=np.float32).reshape(len(texts), 8)

    @contextmanager
    def other_key() -> Iterator[None]:
        old = os.environ.get("MEMOFS_CACHE_DIR")
        os.environ["MEMOFS_CACHE_DIR"] = str(work / "forger-key")
        try:
            yield
        finally:
            os.environ.pop("MEMOFS_CACHE_DIR") if old is None else os.environ.__setitem__("MEMOFS_CACHE_DIR", old)

    root = work / "forged"
    root.mkdir()
    from datetime import datetime, timezone

    now = datetime(2026, 3, 1, tzinfo=timezone.utc)  # an injected clock: the probe is reproducible
    s = Store.init(root, clock=lambda: now)
    for i, topic in enumerate(["databases", "caches", "deploy windows", "queues", "logging", "tests"]):
        s.remember(f"memory {i} about {topic}", embedder=Hashed())
    rehydrate(s, embedder=Hashed())
    true_texts = {m.text for m in s.load(sidecar=False).memories}
    with other_key():  # 1: one text changed, written through the store's own writer
        forge_text(s, "memory 0 about databases", "forged zebra text")
    res = cli(root, "recall", "-q", "zebra databases", "--json")
    t.count(res.code, res.text, hang=res.hang, traceback=res.traceback)
    got = {r["text"] for r in json.loads(res.out)["results"]} if res.code == 0 else set()
    t.forgeries += bool(got - true_texts)
    doc = cli(root, "doctor")
    t.count(doc.code, doc.text, hang=doc.hang, traceback=doc.traceback)
    d = s.paths.embeddings.parent  # 2: two rows of the vector matrices swapped in place
    rehydrate(s, embedder=Hashed())
    swap_vector_rows(s)
    state = rehydrate(s, embedder=Hashed())
    qv = Hashed().encode(["databases"])[0]
    want = unit_rows(Hashed().encode([m.text for m in state.memories]), 8) @ (qv / np.linalg.norm(qv))
    t.tries += 1
    t.clean += 1
    t.forgeries += not np.allclose(state.recaller._vectors.row_scores(qv), want, atol=1e-6)
    with other_key():  # 3: every cache rewritten under another user's key (a clone's)
        for f in list(d.iterdir()):
            if ".sidecar." in f.name or f.suffix == ".npy":
                f.unlink()
        rehydrate(s, embedder=Hashed())
    from memofs.files.memories_sidecar import MemoriesSidecar

    t.tries += 1
    t.clean += 1
    t.forgeries += MemoriesSidecar(s.paths.memories, d).read() is not None
    return t


# ---------------------------------------------------------------------------------- table
def tally_table(rows: list[Tally]) -> str:
    """The issue's table: one row per probe family."""
    return table(("probe", "tries", "clean", "tracebacks", "hangs", "data lost", "exit 3", "forgeries", "secrets stored", "links followed"),
                 [(r.family, f"{r.tries:,}", f"{r.clean:,}", r.tracebacks, r.hangs, r.lost, r.exit3, r.forgeries, r.secrets, r.followed)
                  for r in rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per call")
    ap.add_argument("--sample", type=float, default=1.0, help="fraction of the damage family to run (seeded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sigint", type=int, default=8, help="SIGINT runs")
    ap.add_argument("--kills", type=int, default=3, help="kill -9 runs")
    args = ap.parse_args(argv)
    os.environ.update(ENV)
    rng = random.Random(args.seed)
    cli = Cli(args.timeout)
    rows: list[Tally] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memofs-hostile-") as tmp:
        work = Path(tmp)
        steps: list[tuple[str, Callable[[], object]]] = [
            ("damage", lambda: family_damage(cli, work, args.sample, rng)),
            ("anchors", lambda: family_anchors(cli, work)),
            ("secrets", lambda: family_secrets(cli, work)),
            ("input", lambda: family_input(cli, work)),
            ("sigint", lambda: family_sigint(work, args.timeout, rng, args.sigint)),
            ("mcp", lambda: family_mcp(work, args.timeout)),
            ("writers", lambda: family_writers(work, args.timeout, rng, args.kills)),
            ("forgeries", lambda: family_forgeries(cli, work)),
        ]
        for name, step in steps:
            t = time.monotonic()
            got = step()
            rows.extend(got if isinstance(got, tuple) else [got])
            print(f"[hostile_probe] {name}: {time.monotonic() - t:.1f} s", file=sys.stderr, flush=True)
    print(tally_table(rows))
    for r in rows:
        for note in r.notes[:12]:
            print(f"- {r.family.split(':')[0]}: {note}")
    print(f"\n{sum(r.tries for r in rows):,} tries in {time.monotonic() - t0:.0f} s; "
          f"python -m memofs_eval.bench.hostile_probe {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    bad = sum(r.tracebacks + r.hangs + r.lost + r.exit3 + r.forgeries + r.secrets + r.followed for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
