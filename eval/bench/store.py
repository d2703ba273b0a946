"""Store benchmark: ``memofs remember`` throughput and rehydration from ``.memofs/``.

    python -m memofs_eval.bench.store [--quick]

* remember: ``Store.remember`` (in-process API: validation, secret gate, lock, the fsynced
  append of the memory, then its event and new graph facts appended as derived lines,
  fsynced by a checkpoint every 64 writes) into stores already holding P
  memories (1k to 100k: the write must stay flat), without and with the MiniLM embedder
  (which also appends the vector to ``embeddings.jsonl``). Peers measured in the same
  run: a bare durable append (``O_APPEND`` write of the same JSON line + ``fsync``), and
  one MiniLM encode of the same text. When ``memofs.surfaces.cli`` exists, ``memofs remember`` as a
  subprocess is timed too (process start included).
* rehydrate: :func:`memofs.store.project.rehydrate` of a store holding N memories whose vectors are
  all in ``embeddings.jsonl`` (written by the bench from the same vectors as the recall
  benchmark), against the time MiniLM would need to re-embed them, estimated as
  N / (texts per second measured on a sample in the same run). Two starts are timed: the
  first (every line parsed, every text tokenized, the binary sidecars written) and a later
  one (memories, vectors and the recall tokens' counts from their sidecars, which is what
  every start after the first pays).
  Target (issue 18): the later start of 100k <= 1 s. CLI start: ``memofs recall`` as a
  process on the largest store against the same command on an empty store (the difference
  is what the store adds to a start; target <= 1 s), lexical-only and with MiniLM.

Skipped with a printed note when ``memofs/store/project.py`` is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np

from memofs_eval.bench.corpus import base_texts, corpus
from memofs_eval.bench.output import emit
from memofs_eval.bench.recall import (
    NOW, REPORTS, Section, Series, doc_vectors, embedding_cache, encode_cap, live_embedder, make_memories, percentile,
)
from memofs_eval.bench.timing import timed
from memofs_eval.reporting.markdown import table


@dataclass(frozen=True)
class StoreBenchConfig:
    prefill: tuple[int, ...] = (0, 1000, 10000, 100000)
    writes: int = 100
    writes_embedded: int = 5
    rehydrate_sizes: tuple[int, ...] = (1000, 10000, 100000)
    encode_sample: int = 256
    rehydrate_repeat_below: int = 100000  # later starts up to this size: median of 3 (one run of ~1 s is as noisy as the machine)
    encode_cap: int = 6000
    noise: float = 0.025
    cli_calls: int = 3
    start_calls: int = 3  # `memofs recall` processes per cell of the CLI start table (after one warm-up)
    kernel_runs: int = 2  # fresh processes per kernel backend (alternating) on the largest store
    kernel_queries: int = 40  # recalls timed in each, after its first
    seed: int = 0


def write_store(root: Path, texts: list[str], vectors: np.ndarray | None, embedder_name: str, seed: int) -> None:
    """A ``.memofs/`` store holding ``texts`` as memories (and their vectors), written in bulk
    through the store's own record format."""
    from memofs.store import project as st
    from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile, text_sha256

    s = st.Store.init(root, now=NOW)
    mems = make_memories(texts, (), seed)
    with open(s.paths.memories, "a", encoding="utf-8") as fh:
        for m in mems:
            fh.write(json.dumps(st.memory_to_json(m), ensure_ascii=False) + "\n")
    # a bulk load derives no events or graph facts (as before); the checkpoint says so, so
    # rehydration times the load, not a re-derivation of every memory's derived lines
    s.checkpoint_derived()
    if vectors is not None:
        EmbeddingsFile(s.paths.embeddings)._write_lines(  # one bulk write, as the vector bench does
            EmbeddingRecord(id=m.id, vector=vectors[i], embedder=embedder_name, text_sha256=text_sha256(m.text),
                            namespace=m.namespace, metadata={"kind": m.kind}).to_json()
            for i, m in enumerate(mems))


def bare_append(path: Path, line: str) -> None:
    """The floor of a durable JSONL write: one O_APPEND write + fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class RememberResult:
    prefill: int
    embedded: bool
    ours_ms: list[float]
    peer_ms: list[float]
    peer: str


def bench_remember(cfg: StoreBenchConfig, live, vec_source: dict[int, np.ndarray]) -> list[RememberResult]:
    from memofs.store import project as st

    texts = corpus(max(cfg.prefill) + cfg.writes, seed=cfg.seed + 7)
    fresh = texts[-cfg.writes:]
    out = []
    for embedded in (False, True):
        n_writes = cfg.writes_embedded if embedded else cfg.writes
        for p in cfg.prefill:
            with tempfile.TemporaryDirectory() as tmp:
                vecs = vec_source[p] if embedded and p else None
                write_store(Path(tmp), texts[:p], vecs, live.name, cfg.seed)
                s = st.Store.open(tmp)
                emb = live if embedded else None
                s.remember("warm-up write so the lock and files are open once", now=NOW, embedder=emb)
                ours, peer = [], []
                for i, text in enumerate(fresh[:n_writes]):
                    when = NOW + timedelta(seconds=i + 1)
                    _, a = timed(lambda: s.remember(text, kind="note", confidence=0.8, now=when, embedder=emb))
                    if embedded:
                        _, b = timed(lambda: live.encode([text]))
                    else:
                        line = json.dumps({"id": f"x{i}", "text": text, "created_at": when.isoformat()})
                        _, b = timed(lambda: bare_append(Path(tmp) / "bare.jsonl", line))
                    ours.append(a * 1e3)
                    peer.append(b * 1e3)
                out.append(RememberResult(p, embedded, ours, peer, "MiniLM encode of the text" if embedded else "bare append + fsync"))
    return out


def bench_cli(cfg: StoreBenchConfig) -> str:
    times, err = [], ""
    with tempfile.TemporaryDirectory() as tmp:
        from memofs.store import project as st

        st.Store.init(tmp, now=NOW)
        env = {**os.environ, "MEMOFS_EMBEDDER": "none"}
        for i in range(cfg.cli_calls + 1):
            cmd = [sys.executable, "-m", "memofs", "remember", f"bench note number {i} about the deploy window"]
            proc, dt = timed(lambda: subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env))
            if proc.returncode != 0:
                err = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
                return f"`memofs remember` CLI: failed (`{' '.join(cmd[1:4])} ...` exit {proc.returncode}: {err[0]})."
            if i:  # the first call warms the OS page cache
                times.append(dt * 1e3)
    return (f"`memofs remember` CLI (subprocess, lexical-only, {len(times)} calls after one warm-up): "
            f"median {percentile(times, 50):.0f} ms per call, process start and imports included.")


@dataclass
class CliStart:
    """``memofs recall`` as a fresh process on a store of ``n`` memories and on an empty one."""

    n: int
    embedder: str
    store_s: list[float]
    empty_s: list[float]
    one_s: list[float]

    @property
    def beyond_s(self) -> float:
        """What the stored memories add to a process start: median(store) - median(empty)."""
        return statistics.median(self.store_s) - statistics.median(self.empty_s)

    @property
    def beyond_one_s(self) -> float:
        """The same against a one-memory store, which also pays what any non-empty corpus
        costs a first scored recall, not what its size costs."""
        return statistics.median(self.store_s) - statistics.median(self.one_s)


START_QUERY = "deploy window database"


def bench_cli_start(cfg: StoreBenchConfig, root: Path, n: int) -> list[CliStart]:
    """``memofs recall`` processes on the store at ``root`` (its sidecars already written)
    against the same command on an empty store: the empty store's process pays the
    interpreter, the imports and (with vectors) the model load, not a query encode (it has
    no vectors), so the difference is what the store costs a start, its first query encode
    included (target issue 18: <= 1 s)."""
    from memofs.store import project as st

    out = []
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as one:
        st.Store.init(empty, now=NOW)
        st.Store.init(one, now=NOW).remember("The deploy window is Tuesday after the database backup.", now=NOW)
        for embedder in ("none", "local"):
            env = {**os.environ, "MEMOFS_EMBEDDER": embedder}
            cmd = [sys.executable, "-m", "memofs", "recall", "-q", START_QUERY, "--json"]
            times: dict[str, list[float]] = {"store": [], "empty": [], "one": []}
            for i in range(cfg.start_calls + 1):
                for where, cwd in (("store", str(root)), ("empty", empty), ("one", one)):
                    proc, dt = timed(lambda: subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env))
                    if proc.returncode != 0:
                        err = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
                        raise RuntimeError(f"`memofs recall` in the {where} store failed (exit {proc.returncode}): {err[0]}")
                    if i:  # the first round warms the page cache
                        times[where].append(dt)
            out.append(CliStart(n, "MiniLM" if embedder == "local" else "none", times["store"], times["empty"], times["one"]))
    return out


# A fresh process: the store's state, then one recall (what a CLI command pays), then
# `queries` more (what a long-lived server pays per query); prints JSON.
_KERNEL_PROBE = """
import json, sys, time
from memofs.store.project import LiveStore, Store
from memofs_eval.bench.recall import NOW
root, queries = sys.argv[1], json.loads(sys.argv[2])
state = LiveStore(Store.open(root, clock=lambda: NOW), embedder=None).state()
t = time.perf_counter(); state.recaller.recall(queries[0], 10, now=NOW, explain=True); first = time.perf_counter() - t
per = []
for q in queries[1:]:
    t = time.perf_counter(); state.recaller.recall(q, 10, now=NOW, explain=True); per.append((time.perf_counter() - t) * 1e3)
print(json.dumps({"first_s": first, "per_ms": per, "numba": "numba" in sys.modules}))
"""


@dataclass
class KernelRun:
    """Recall in fresh processes under one kernel backend (``memofs.signals.kernels``)."""

    backend: str
    first_s: list[float]  # the first recall of each process
    per_ms: list[float]  # every later recall, all processes pooled
    loaded_numba: bool


def bench_kernels(cfg: StoreBenchConfig, root: Path) -> list[KernelRun]:
    """First and later lexical recalls in fresh processes on the store at ``root``, under
    numba's compiled kernels and under numpy's loops (the CLI's), alternating."""
    texts = corpus(cfg.kernel_queries + 1, seed=cfg.seed + 11)
    queries = json.dumps([" ".join(t.split()[:3]) for t in texts])
    runs = {b: KernelRun(b, [], [], False) for b in ("numba", "numpy")}
    for _ in range(cfg.kernel_runs):
        for b, run_ in runs.items():
            env = {**os.environ, "MEMOFS_EMBEDDER": "none", "MEMOFS_KERNELS": b}
            proc = subprocess.run([sys.executable, "-c", _KERNEL_PROBE, str(root), queries], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                err = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
                raise RuntimeError(f"kernel probe ({b}) failed (exit {proc.returncode}): {err[0]}")
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            run_.first_s.append(got["first_s"])
            run_.per_ms.extend(got["per_ms"])
            run_.loaded_numba = got["numba"]
    return list(runs.values())


@dataclass
class RehydrateResult:
    n: int
    seconds: float  # a start from the sidecar
    embedded: int
    loaded: int
    reembed_s: float
    first_s: float = float("nan")  # the first start: every line parsed, the sidecar written


def encode_rate(live, n: int) -> float:
    texts, _ = base_texts()
    sample = texts[-n:]  # the tail: not what the warm-up encoded
    live.encode(sample[:8])
    _, dt = timed(lambda: live.encode(sample))
    return len(sample) / dt


def bench_rehydrate(cfg: StoreBenchConfig, live, rate: float, cache
                    ) -> tuple[list[RehydrateResult], dict[int, np.ndarray], list[CliStart], list[KernelRun]]:
    from memofs.store import project as st

    out, vec_by_n, starts, kernel_runs = [], {}, [], []
    for n in cfg.rehydrate_sizes:
        texts = corpus(n, seed=cfg.seed)
        vectors, _ = doc_vectors(texts, encode_cap(cfg.encode_cap), cfg.noise, cfg.seed, cache, live)
        vec_by_n[n] = vectors
        with tempfile.TemporaryDirectory() as tmp:
            write_store(Path(tmp), texts, vectors, live.name, cfg.seed)
            store = st.Store.open(tmp)
            _, first = timed(lambda: st.rehydrate(store, embedder=live))  # parses everything, writes the sidecar
            repeats = 3 if n <= cfg.rehydrate_repeat_below else 1  # median of 3 sidecar starts
            times = []
            for _ in range(repeats):
                res = None  # one rehydrated store alive at a time
                res, t = timed(lambda: st.rehydrate(store, embedder=live))
                times.append(t)
            dt = statistics.median(times)
            if res.embedded:
                print(f"[bench.store] rehydrate re-embedded {res.embedded} of {n} memories (expected 0)")
            out.append(RehydrateResult(n, dt, res.embedded, res.loaded_vectors, n / rate, first))
            del res
            if n == max(cfg.rehydrate_sizes):
                starts = bench_cli_start(cfg, Path(tmp), n)
                kernel_runs = bench_kernels(cfg, Path(tmp))
    return out, vec_by_n, starts, kernel_runs


def run(cfg: StoreBenchConfig, quick: bool = False, live=None, cache=None) -> Section:
    live = live or live_embedder()
    cache = cache or embedding_cache()
    rate = encode_rate(live, cfg.encode_sample)
    rehydrated, vec_by_n, starts, kernel_runs = bench_rehydrate(cfg, live, rate, cache)
    need = {p for p in cfg.prefill if p}
    src = {}
    for p in need:  # prefill vectors: the rehydration ones when sizes match, else computed the same way
        src[p] = vec_by_n[p] if p in vec_by_n else doc_vectors(corpus(p, seed=cfg.seed + 7), encode_cap(cfg.encode_cap), cfg.noise, cfg.seed, cache, live)[0]
    remembered = bench_remember(cfg, live, src)
    cli = bench_cli(cfg)
    lines = ["(--quick smoke sizes, not a measurement)\n"] if quick else []
    lines += [
        f"`Store.remember` latency into a store already holding P memories (median of the writes after one warm-up "
        f"write; {cfg.writes} lexical-only writes, {cfg.writes_embedded} with MiniLM). Peers, timed right after each write: "
        "a bare `O_APPEND` write + `fsync` of the same JSON line (lexical), one MiniLM encode of the text (embedded).",
        "",
    ]
    writes = []
    for r in remembered:
        m, pm = percentile(r.ours_ms, 50), percentile(r.peer_ms, 50)
        writes.append((f"{r.prefill:,}", "MiniLM" if r.embedded else "none", f"{m:.1f}", f"{percentile(r.ours_ms, 95):.1f}",
                       f"{1e3 / m:,.1f}", r.peer, f"{pm:.2f}", f"{m / pm:.1f}x"))
    lines.append(table(("P (memories already stored)", "embedder", "median ms", "p95 ms", "writes/s", "peer", "peer median ms", "ratio"),
                       writes, "rlrrrlrr"))
    lines += ["", cli, "",
              f"Rehydration (`memofs.store.project.rehydrate`: memories.jsonl + embeddings.jsonl + graph into a ready Recaller) "
              f"against re-embedding every memory with MiniLM, estimated from {rate:,.0f} texts/s measured on "
              f"{cfg.encode_sample} texts in this run. First start: every JSONL line parsed, every text tokenized and the memories, "
              f"vector and terms sidecars written; later starts: memories, vectors and the recall tokens' counts from the sidecars (stores up to {cfg.rehydrate_repeat_below:,} "
              "memories: median of 3; larger: one run).", "",
              table(("memories", "first start s", "later start s", "vectors loaded", "re-embedded", "re-embed estimate s",
                     "ratio (later / re-embed)"),
                    [(f"{r.n:,}", f"{r.first_s:.2f}", f"{r.seconds:.2f}", f"{r.loaded:,}", f"{r.embedded:,}", f"{r.reembed_s:,.0f}",
                      f"{r.seconds / r.reembed_s:.3f}x") for r in rehydrated], "rrrrrrr")]
    if starts:
        lines += ["", f"CLI start: `memofs recall -q \"{START_QUERY}\" --json` as a fresh process on the {starts[0].n:,}-memory store "
                  f"(its sidecars written by the first start above) against the same command on an empty store, which pays the "
                  f"interpreter, the imports and, with MiniLM, the model load (a store without vectors skips the query encode), "
                  f"and on a one-memory store, which also pays what the first scored recall of any corpus costs, the query encode "
                  f"included once its warm-up call has stored the memory's vector (median of {cfg.start_calls} "
                  "calls each after one warm-up, alternating). A CLI command runs numpy's loops, not numba's compiled kernels "
                  "(`memofs.signals.kernels`: one query per process). Target (issue 18): the store adds <= 1 s, judged against "
                  "the empty store.", "",
                  table(("memories", "embedder", "store s", "empty store s", "one-memory store s", "added by the store s",
                         "added beyond one memory s", "met (<= 1 s)"),
                        [(f"{c.n:,}", c.embedder, f"{statistics.median(c.store_s):.2f}", f"{statistics.median(c.empty_s):.2f}",
                          f"{statistics.median(c.one_s):.2f}", f"{c.beyond_s:.2f}", f"{c.beyond_one_s:.2f}",
                          "yes" if c.beyond_s <= 1.0 else "no") for c in starts], "rlrrrrrl")]
    if kernel_runs:
        nb, npy = kernel_runs
        extra_first = statistics.median(nb.first_s) - statistics.median(npy.first_s)
        saved_ms = percentile(npy.per_ms, 50) - percentile(nb.per_ms, 50)
        lines += ["", f"Kernels (`memofs.signals.kernels`): lexical recall on the {starts[0].n if starts else rehydrated[-1].n:,}-memory "
                  f"store in {cfg.kernel_runs} fresh processes per backend (alternating): the first recall of each process, then "
                  f"{cfg.kernel_queries} more. Both give the same rankings and scores (`tests/test_memofs/signals/test_kernels.py`).", "",
                  table(("kernels", "numba imported", "first recall s (median)", "later recall p50 ms", "p95 ms"),
                        [(r.backend, "yes" if r.loaded_numba else "no", f"{statistics.median(r.first_s):.2f}",
                          f"{percentile(r.per_ms, 50):.2f}", f"{percentile(r.per_ms, 95):.2f}") for r in kernel_runs], "llrrr")]
        even = (f"so numba's kernels pay for their load after about {extra_first * 1e3 / saved_ms:,.0f} queries in one process"
                if saved_ms > 0 and extra_first > 0 else "so numba's kernels save nothing here")
        lines += ["", f"numba costs a process {extra_first:+.2f} s on its first recall and saves {saved_ms:.2f} ms on each later one, "
                  f"{even}: the CLI (one query per process) runs numpy, `memofs mcp` runs numba."]
    sizes = [r.n for r in rehydrated]
    series = [
        Series("rehydrate from .memofs/", "s", sizes, [r.seconds for r in rehydrated], figure="store"),
        Series("first start (parse + sidecar write)", "s", sizes, [r.first_s for r in rehydrated], figure="store"),
        Series("re-embed estimate (MiniLM)", "s", sizes, [r.reembed_s for r in rehydrated], peer=True, figure="store"),
    ]
    for embedded in (False, True):
        rs = [r for r in remembered if r.embedded == embedded and r.prefill > 0]
        if len(rs) >= 2:
            series.append(Series(f"remember ({'MiniLM' if embedded else 'lexical'}) vs store size", "ms",
                                 [r.prefill for r in rs], [percentile(r.ours_ms, 50) for r in rs]))
    headline = []
    if rehydrated:
        big = rehydrated[-1]
        headline.append((f"rehydrate {big.n:,} memories from .memofs/", f"{big.seconds:.1f} s",
                         f"{big.reembed_s:,.0f} s (re-embed estimate)", f"{big.seconds / big.reembed_s:.3f}x"))
    for c in starts:
        headline.append((f"`memofs recall` process on {c.n:,} memories ({c.embedder}), beyond an empty store",
                         f"{statistics.median(c.store_s):.2f} s", f"{statistics.median(c.empty_s):.2f} s (empty store)",
                         f"+{c.beyond_s:.2f} s (target <= 1 s)"))
    for r in remembered:
        if r.prefill == max(cfg.prefill):
            m, pm = percentile(r.ours_ms, 50), percentile(r.peer_ms, 50)
            headline.append((f"remember into {r.prefill:,} stored memories ({'MiniLM' if r.embedded else 'lexical'})",
                             f"{m:.1f} ms", f"{pm:.2f} ms ({r.peer})", f"{m / pm:.1f}x"))
    return Section("Store", "\n".join(lines), series, headline)


def quick_config() -> StoreBenchConfig:
    return StoreBenchConfig(prefill=(0, 200), writes=3, writes_embedded=1, rehydrate_sizes=(100, 300),
                            encode_sample=8, encode_cap=64, cli_calls=1, start_calls=1,
                            kernel_runs=1, kernel_queries=3)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-store.md")
    a = ap.parse_args(argv)
    section = run(quick_config() if a.quick else StoreBenchConfig(), a.quick)
    return emit(section, a.out, "memofs_eval.bench.store")


if __name__ == "__main__":
    main()
