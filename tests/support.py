"""What several test files share: the repository's paths, the example budget of costly property
tests, a signal frame from rows, the CLI run in-process, a naive lexical reference, a writer
killed mid-write, the fields of a memory record, and a call followed through the project's files.
"""

from __future__ import annotations

import hashlib
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memofs.files.records import Memory
from memofs.signals.frame import SignalFrame, kind_code

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = REPO_ROOT / "tests" / "data"
NAN = float("nan")
CLI_ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}


def examples(n: int) -> int:
    """The example budget of a costly Hypothesis test: ``n``, or a third of it (at least 20)
    when ``$MEMOFS_TEST_FAST`` is set, which only ``make test-fast`` (the inner loop) does;
    ``make test`` and CI always run all ``n``."""
    return max(20, n // 3) if os.environ.get("MEMOFS_TEST_FAST") else n


def frame(rows: list[dict], query: str = "", vector_ok: bool = True, rerank_ok: bool = True) -> SignalFrame:
    """A signal frame from rows of ``id`` plus any of ``bm25``, ``fuzzy``, ``cos``, ``rerank``,
    ``age``, ``conf``, ``kind``, ``stale``, ``graph`` (absent scores NaN, as extraction leaves them)."""
    n = len(rows)
    col = lambda k, d: np.array([r.get(k, d) for r in rows], dtype=float)  # noqa: E731
    ids = tuple(r["id"] for r in rows)
    order = np.empty(n, dtype=np.int64)
    order[np.argsort(np.array(ids, dtype=object))] = np.arange(n)
    return SignalFrame(
        ids=ids, order_key=order, bm25=col("bm25", 0.0), fuzzy=col("fuzzy", 0.0), cosine=col("cos", NAN),
        rerank=col("rerank", NAN), age_days=col("age", NAN), confidence=col("conf", NAN),
        kind=np.array([kind_code(r.get("kind", "note")) for r in rows]), stale=np.array([r.get("stale", False) for r in rows]),
        is_graph=np.array([r.get("graph", False) for r in rows]), query_text=query, vector_ok=vector_ok, rerank_ok=rerank_ok,
    )


class HashEmbedder:
    """The project's one test double for an embedder: deterministic ``dim``-d vectors (at most 32)
    from the SHA-256 of the text. Not normalised by default (so a stored row and the index's row
    differ); ``unit=True`` gives unit vectors, as MiniLM does. Records what it encodes in
    ``encoded``; setting ``fail`` makes it raise, as an embedder that is down (no vector)."""

    name = "hash-test"

    def __init__(self, dim: int = 8, unit: bool = False) -> None:
        assert 0 < dim <= 32, "one SHA-256 digest gives 32 components"
        self.dim, self.unit = dim, unit
        self.encoded: list[str] = []
        self.fail = False

    def encode(self, texts):
        if self.fail:
            raise RuntimeError("embedder down")
        self.encoded += list(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[: self.dim].astype(np.float32) - 100
                for t in texts]
        out = np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True) if self.unit else out


def cli_run(root: Path, *args: str, code: int = 0, stdin: str | None = None):
    """``memofs --root ROOT ARGS`` in this process (typer's runner), lexical-only; asserts the exit code."""
    from typer.testing import CliRunner

    from memofs.surfaces.cli import app

    res = CliRunner().invoke(app, ["--root", str(root), *args], env=CLI_ENV, input=stdin)
    assert res.exit_code == code, (args, res.exit_code, res.output, res.exception)
    return res


def cli_json(root: Path, *args: str):
    """:func:`cli_run` with ``--json``, parsed."""
    import json

    return json.loads(cli_run(root, *args, "--json").stdout)


def fields_of(m: Memory) -> tuple:
    """Every field, metadata included (Memory's == leaves it out), with the zone of created_at."""
    when = m.created_at
    return (m.id, m.text, m.kind, when, when.utcoffset() if when else None, type(m.confidence), m.confidence,
            m.namespace, m.tags, m.anchors, m.supersedes, m.metadata)


# --------------------------------------------------------------------------- naive BM25 + fuzzy
# A reference written from the spec's formulas with plain loops, deliberately independent of
# memofs.signals.bm25: no numpy, no sparse matrices, no shared helpers except the tokenizer.

def naive_fuzzy(q_terms: list[str], d_terms: list[str], partial: float = 0.25) -> float:
    if not q_terms or not d_terms:
        return 0.0
    total = 0.0
    for q in q_terms:
        if q in d_terms:
            total += 1.0
            continue
        for d in d_terms:
            if d in q or q in d:
                total += partial
                break
    return total / len(q_terms)


def naive_scores(
    docs: list[list[str]], q_terms: list[str], k1=1.2, b=0.75, fuzzy_boost=0.15, partial=0.25
) -> list[tuple[float, float, float]]:
    """(bm25, fuzzy, raw) for every document."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n if n else 0.0
    out = []
    unique_q = []
    for t in q_terms:
        if t not in unique_q:
            unique_q.append(t)
    for d in docs:
        bm25 = 0.0
        for t in unique_q:
            tf = d.count(t)
            if tf == 0:
                continue
            df = sum(1 for other in docs if t in other)
            idf = max(0.0, math.log(1 + (n - df + 0.5) / (df + 0.5)))
            rel = len(d) / avgdl if avgdl > 0 else 1.0
            bm25 += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * rel))
        fz = naive_fuzzy(q_terms, d, partial)
        out.append((bm25, fz, bm25 + fuzzy_boost * fz))
    return out


# --------------------------------------------------------------------------- kill -9 mid-write


def kill_mid_write(script: str, root: Path, delay: float) -> None:
    """Start ``python -c script root``, wait for its "ready" line, sleep ``delay`` s, SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO_ROOT)) if p)}
    proc = subprocess.Popen([sys.executable, "-c", script, str(root)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.stdout.close()
        proc.stderr.close()


# --------------------------------------------------------------------------- call paths (issue 35)


@dataclass(frozen=True)
class CallPath:
    files: tuple[str, ...]  # the file executing, each change of file once (calls and returns)

    @property
    def returns(self) -> int:
        """Entries into a file control had already been in."""
        return len(self.files) - len(set(self.files))

    @property
    def entered(self) -> Counter:
        return Counter(self.files)


def follow(fn: Callable[..., Any], *args: Any, packages: tuple[str, ...] = ("memofs",), **kwargs: Any) -> tuple[Any, CallPath]:
    """Run ``fn`` under a profile hook; frames outside ``packages`` (numpy, the standard
    library) are transparent."""
    roots = tuple(str(REPO_ROOT / p) + "/" for p in packages)
    seq: list[str] = []
    stack: list[str | None] = []

    def own(filename: str) -> str | None:
        return str(Path(filename).relative_to(REPO_ROOT)) if filename.startswith(roots) else None

    def note(f: str | None) -> None:
        if f is not None and (not seq or seq[-1] != f):
            seq.append(f)

    def hook(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event == "call":
            stack.append(own(frame.f_code.co_filename))
            note(stack[-1])
        elif event == "return" and stack:
            stack.pop()
            note(next((s for s in reversed(stack) if s is not None), None))

    sys.setprofile(hook)
    try:
        out = fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return out, CallPath(tuple(seq))
