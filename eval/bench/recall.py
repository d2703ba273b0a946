"""End-to-end recall benchmark: ``Recaller.recall`` at 1k / 10k / 100k memories.

    python -m memofs_eval.bench.recall [--quick] [--sizes 1000 10000 100000]

Workload (seeded, identical every run):

* texts: :func:`memofs_eval.bench.corpus.corpus` (LoCoMo turns when present, replicated
  with perturbation); ``created_at`` uniform over the 730 days before ``NOW``; kinds drawn
  from the seven memory kinds; confidence missing for 30 %, else uniform in [0.3, 1];
  60 memories anchored into a temporary source tree in which some files are then modified
  or deleted (so drift runs); an :class:`EntityGraph` of 36 nodes named after frequent
  corpus words (so entity resolution and the graph documents run).
* document vectors: MiniLM through the on-disk :class:`EmbeddingCache` for the first
  ``E = min(n, base texts, encode cap)`` texts; text ``j >= E`` gets the vector of text
  ``j mod E`` plus seeded Gaussian noise (sigma per dimension), renormalised. ``corpus()``
  lays copies out in base order, so with ``E`` = the number of base texts each replicated
  text reuses the vector of the text it was perturbed from. 100k memories thus need no
  100k encodes.

Measured per size, interleaved query by query so machine noise hits all alike:

* ``recall`` with the query embedding (live MiniLM) and without it: the same Recaller with
  a :class:`FrozenQueryEmbedder` that returns MiniLM vectors of the rewritten query texts,
  computed before timing (a dict lookup, about a microsecond, stays in the timing); after
  each live recall, a bare ``encode`` of the same rewritten query text (the floor of the
  live figure: target live p50 <= encode p50 + 1.5 x peer p50);
* peer: bm25s top-10 (its faster query path) on the same tokens + a bare numpy dense top-10
  (``M @ q``, ``argpartition``, sort of 10) on the same vectors; ratio = ours / peer;
* a stage profile (:func:`staged_recall`) read from ``Recaller.recall``'s own per-stage
  stopwatch (``profile=``); every profiled result is checked against a plain ``recall``;
* context briefing build and cursor expansion latency (when ``memofs.store.briefing`` exists),
  each next to a plain ``recall`` of the same query;
* peak RSS of building + querying the index, in a fresh subprocess: inputs loaded first,
  then the kernel's peak mark (``VmHWM``) is reset and read after one query; the same for
  the peer's indexes.

Prints a markdown section and writes ``reports/bench-recall.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memofs.signals.anchors import sha256_file
from memofs.graph.entity_graph import EntityGraph
from memofs.files.records import MEMORY_KINDS, Anchor, GraphEdge, GraphNode, Memory
from memofs.ranking.recall import Recaller
from memofs.text.tokenize import tokenize
from memofs_eval.bench.corpus import base_texts, corpus, queries
from memofs_eval.bench.output import emit
from memofs_eval.bench.timing import median_time, timed
from memofs_eval.reporting.markdown import table

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
SPAN_DAYS = 730.0
N_ANCHORED = 60
N_TREE_FILES = 20
N_GRAPH_NODES = 36
STAGES: tuple[str, ...] = (
    "rewrite + entities", "lexical (BM25 + fuzzy)", "query embedding", "vector cosine",
    "rerank overlap", "anchor check", "frame build", "fusion", "results",
)


# ---------------------------------------------------------------------- shared helpers
@dataclass
class Series:
    """One cost measured at several corpus sizes (for growth fits and plots)."""

    name: str
    unit: str
    sizes: list[int]
    values: list[float]
    peer: bool = False  # a peer's curve (drawn dashed, not flagged)
    figure: str = ""  # which figure draws it ("" = growth table only)


@dataclass
class Section:
    """A benchmark's markdown, its numeric series and its headline rows."""

    title: str
    markdown: str
    series: list[Series] = field(default_factory=list)
    headline: list[tuple[str, str, str, str]] = field(default_factory=list)  # (what, ours, peer, ratio)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def embedding_cache():
    """The harness's on-disk embedding cache (``<cache>/embeddings``), shared with the eval runs."""
    from memofs.signals.embedding_cache import EmbeddingCache
    from memofs_eval._env import cache_root

    return EmbeddingCache(cache_root() / "embeddings")


def live_embedder():
    from memofs.signals.embedders.local import LocalEmbedder

    return LocalEmbedder()


# ---------------------------------------------------------------------- workload
@dataclass(frozen=True)
class RecallBenchConfig:
    sizes: tuple[int, ...] = (1000, 10000, 100000, 1000000)
    queries: int = 60
    passes: int = 1
    profile_queries: int = 20
    encode_cap: int = 6000
    noise: float = 0.025  # per-dimension sigma: cosine to the base vector ~ 1 / sqrt(1 + 384 sigma^2) ~ 0.9
    seed: int = 0
    k: int = 10
    rss: bool = True


@dataclass
class Workload:
    texts: list[str]
    memories: list[Memory]
    vectors: NDArray[np.float32]
    graph: EntityGraph
    tree: Path
    queries: list[str]
    encoded: int  # distinct texts with a real MiniLM vector


def encode_cap(cap: int) -> int:
    """At most the number of base texts, so every text past it is a perturbed copy of text
    ``j mod E`` (the layout of :func:`corpus`)."""
    return min(cap, len(base_texts()[0]))


def doc_vectors(texts: Sequence[str], cap: int, noise: float, seed: int, cache, embedder) -> tuple[NDArray[np.float32], int]:
    """MiniLM for the first ``E = min(len(texts), cap)`` texts; ``v_j = unit(v_{j mod E} + N(0, noise^2 I))``
    for ``j >= E``."""
    e = min(len(texts), cap)
    base = cache.encode(embedder, list(texts[:e]))
    n = len(texts)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    out[:e] = base
    if n > e:
        rng = np.random.default_rng(seed)
        src = np.arange(e, n) % e
        noisy = base[src] + rng.normal(0.0, noise, size=(n - e, base.shape[1])).astype(np.float32)
        out[e:] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    return out, e


def make_tree(root: Path, rng: random.Random) -> list[Anchor]:
    """Write ``N_TREE_FILES`` files, record their anchors, then modify 5 and delete 2."""
    anchors = []
    for i in range(N_TREE_FILES):
        p = root / "src" / f"module_{i:02d}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# module {i}\nVALUE = {rng.randrange(10**6)}\n", encoding="utf-8")
        anchors.append(Anchor(p.relative_to(root).as_posix(), sha256_file(p)))
    for i in range(5):
        (root / anchors[i].path).write_text("# changed after the memory was written\n", encoding="utf-8")
    for i in range(5, 7):
        (root / anchors[i].path).unlink()
    return anchors


def make_memories(texts: Sequence[str], anchors: Sequence[Anchor], seed: int) -> list[Memory]:
    rng = random.Random(seed)
    n = len(texts)
    anchored = set(rng.sample(range(n), min(N_ANCHORED, n))) if anchors else set()
    out = []
    for j, text in enumerate(texts):
        conf = None if rng.random() < 0.3 else round(rng.uniform(0.3, 1.0), 2)
        out.append(Memory(
            id=f"m{j:07d}", text=text, kind=rng.choice(MEMORY_KINDS),
            created_at=NOW - timedelta(days=rng.uniform(0.0, SPAN_DAYS)), confidence=conf,
            anchors=(anchors[j % len(anchors)],) if j in anchored else (),
        ))
    return out


def make_graph(texts: Sequence[str]) -> EntityGraph:
    """Nodes for the ``N_GRAPH_NODES`` most frequent corpus words of >= 5 letters; a chain
    of ``uses`` edges so entity state lines are non-empty."""
    counts = Counter(t for text in texts for t in tokenize(text) if len(t) >= 5 and t.isalpha())
    words = [w for w, _ in counts.most_common(N_GRAPH_NODES)]
    g = EntityGraph()
    for w in words:
        g.upsert_node(GraphNode(id=f"ent:{w}", label=w.title(), type="concept", aliases=(f"{w}s",),
                                summary=f"Entity for {w} in the benchmark corpus."))
    for a, b in zip(words, words[1:]):
        g.upsert_edge(GraphEdge(source=f"ent:{a}", target=f"ent:{b}", type="uses"))
    return g


def workload(n: int, cfg: RecallBenchConfig, tree: Path, cache=None, embedder=None, n_queries: int | None = None) -> Workload:
    texts = corpus(n, seed=cfg.seed)
    cache = cache or embedding_cache()
    embedder = embedder or live_embedder()
    vectors, e = doc_vectors(texts, encode_cap(cfg.encode_cap), cfg.noise, cfg.seed, cache, embedder)
    anchors = make_tree(tree, random.Random(cfg.seed))
    mems = make_memories(texts, anchors, cfg.seed)
    qs = [" ".join(q) for q in queries(texts, cfg.queries if n_queries is None else n_queries, seed=cfg.seed + 1)]
    return Workload(texts, mems, vectors, make_graph(texts[: min(n, 6000)]), tree, qs, e)


def build(w: Workload, embedder=None) -> Recaller:
    rec = Recaller(embedder=embedder, graph=w.graph, anchor_root=w.tree)
    rec.add(w.memories, vectors=w.vectors)
    return rec


class FrozenQueryEmbedder:
    """Returns query vectors computed before timing (MiniLM on the rewritten query texts),
    so ``recall`` runs in full except the model call. A lookup miss raises, and the Recaller's
    wrapper would then silently go lexical-only, so misses are also counted and checked."""

    def __init__(self, name: str, table: dict[str, NDArray[np.float32]]) -> None:
        self.name = name
        self.table = table
        self.dim = next(iter(table.values())).shape[0] if table else 384
        self.misses = 0

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        try:
            return np.stack([self.table[t] for t in texts])
        except KeyError:
            self.misses += 1
            raise


def frozen_for(rec: Recaller, qs: Sequence[str], live) -> FrozenQueryEmbedder:
    texts = sorted({rec.query_text(q)[0].text for q in qs})
    vecs = live.encode(texts)
    return FrozenQueryEmbedder(live.name, dict(zip(texts, vecs, strict=True)))


# ---------------------------------------------------------------------- stage profile
def staged_recall(rec: Recaller, query: str, now: datetime, k: int) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """``Recaller.recall`` with its own per-stage stopwatch (``profile=``): the (id, score)
    list and seconds per stage. The timing lives in the pipeline, so nothing is replayed."""
    t: dict[str, float] = dict.fromkeys(STAGES, 0.0)
    hits = rec.recall(query, k, now=now, profile=t)
    return [(h.id, h.score) for h in hits], t


# ---------------------------------------------------------------------- peers
class Peer:
    """bm25s (Lucene BM25, memofs tokens) + bare numpy dense top-k over the same data."""

    def __init__(self, texts: Sequence[str], vectors: NDArray[np.float32], k: int) -> None:
        import bm25s

        toks = [tokenize(t) for t in texts]
        self.vocab = {t: i for i, t in enumerate(sorted({t for ts in toks for t in ts}))}
        self.bm25 = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
        self.bm25.index(bm25s.tokenization.Tokenized(ids=[[self.vocab[t] for t in ts] for ts in toks], vocab=self.vocab),
                        show_progress=False)
        self.mat = np.ascontiguousarray(vectors, dtype=np.float32)
        self.k = k
        self.lexical: Callable[[list[int]], object] = self._scores_path

    def q_ids(self, query: str) -> list[int]:
        return [self.vocab[t] for t in tokenize(query) if t in self.vocab]

    def _scores_path(self, q: list[int]) -> object:
        s = self.bm25.get_scores(q)
        top = np.argpartition(-s, min(self.k, len(s) - 1))[: self.k]
        return top[np.argsort(-s[top], kind="stable")]

    def _retrieve_path(self, q: list[int]) -> object:
        if not q:
            return None
        return self.bm25.retrieve([q], k=min(self.k, self.mat.shape[0]), backend_selection="numba",
                                  show_progress=False, n_threads=1)

    def calibrate(self, qs: Sequence[list[int]]) -> str:
        """Keep bm25s's faster query path (so the ratio is conservative)."""
        a = median_time(lambda: [self._scores_path(q) for q in qs], 3)
        b = median_time(lambda: [self._retrieve_path(q) for q in qs], 3)
        self.lexical = self._scores_path if a <= b else self._retrieve_path
        return "get_scores + argpartition" if a <= b else "retrieve (numba)"

    def dense(self, qv: NDArray[np.float32]) -> object:
        s = self.mat @ qv
        k = min(self.k, len(s) - 1)
        top = np.argpartition(-s, k)[: self.k]
        return top[np.argsort(-s[top])]


# ---------------------------------------------------------------------- memory (subprocess)
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> str:
    """Reset the kernel's peak-RSS mark (``VmHWM``) to the current RSS, so a later peak
    reading covers only what follows; falls back to ``ru_maxrss`` where that is refused."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return "VmHWM"
    except OSError:
        return "ru_maxrss"


def _peak_kib(method: str) -> int:
    if method == "VmHWM":
        return _status_kib("VmHWM")
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def rss_child(n: int, vec_path: str, which: str, seed: int = 0) -> dict[str, float | str]:
    """In a fresh process: load the inputs, reset the peak-RSS mark, then build and query
    memofs's Recaller (``which="memofs"``) or the peer (``"peer"``); report the peak and the
    resident growth over the post-input baseline, in MiB."""
    import gc

    vectors = np.load(vec_path)
    texts = corpus(n, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        anchors = make_tree(Path(tmp), random.Random(seed))
        mems = make_memories(texts, anchors, seed)
        graph = make_graph(texts[: min(n, 6000)])
        # load code first (numba kernels, lazy imports) on a 3-memory corpus, so the peak
        # below is the index's, not the compiler's
        if which == "memofs":
            warm: object = Recaller(embedder=None)
            warm.add(mems[:3], vectors=vectors[:3])
            warm.recall(texts[0], 2, now=NOW)
        else:
            warm = Peer(texts[:3], vectors[:3], 2)
            warm._scores_path(warm.q_ids(texts[0]))
            warm.dense(vectors[0])
        del warm
        gc.collect()
        method = _reset_peak()
        base = _status_kib("VmRSS")
        peak0 = base if method == "VmHWM" else _peak_kib(method)
        if which == "memofs":
            rec = Recaller(embedder=None, graph=graph, anchor_root=tmp)
            rec.add(mems, vectors=vectors)
            rec.recall("benchmark memory recall", 10, now=NOW)  # lays out the BM25 matrices
            keep: object = rec
        else:
            peer = Peer(texts, vectors, 10)
            peer._scores_path(peer.q_ids("benchmark memory recall"))
            peer.dense(vectors[0])
            keep = peer
        gc.collect()
        peak1, cur1 = _peak_kib(method), _status_kib("VmRSS")
        del keep
    return {"peak_mib": (peak1 - peak0) / 1024, "resident_mib": (cur1 - base) / 1024, "method": method}


def measure_rss(n: int, vectors: NDArray[np.float32], seed: int) -> dict[str, dict[str, float]]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        vp = Path(tmp) / "vectors.npy"
        np.save(vp, vectors)
        for which in ("memofs", "peer"):
            code = ("import json,sys; from memofs_eval.bench.recall import rss_child; "
                    f"print(json.dumps(rss_child({n}, {str(vp)!r}, {which!r}, {seed})))")
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                                  env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
            if proc.returncode != 0:
                raise RuntimeError(f"RSS subprocess ({which}, n={n}) failed:\n{proc.stderr[-2000:]}")
            out[which] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


# ---------------------------------------------------------------------- briefing
def measure_briefing(rec: Recaller, qs: Sequence[str], k: int) -> dict[str, list[float]]:
    """ms per ``build_context`` (compact briefing, 8 KiB cap) and per ``expand_context`` of its
    recall cursor, each next to a plain ``recall`` of the same query (the peer)."""
    from memofs.store import briefing, cursor

    core = "# Core Memory\n\n## Stable Facts\n\n- The benchmark corpus is replicated LoCoMo turns.\n"
    mems = list(rec.memories.values())
    recent = sorted(mems, key=lambda m: m.created_at, reverse=True)[:20]
    events = [{"timestamp": m.created_at.isoformat(), "type": "memory.created", "summary": m.text[:160]} for m in recent]
    cache = cursor.ContextCache(clock=time.time)
    out: dict[str, list[float]] = {"build": [], "expand": [], "recall": []}
    # ordered and rendered once, as a store state (LiveStore) keeps them across briefings
    notes = briefing.notes_head(mems) if hasattr(briefing, "notes_head") else None
    extra = {"notes": notes} if notes is not None else {}

    def build(q: str):
        return briefing.build_context(rec, query=q, core=core, events=events, memories=mems, cache=cache, now=NOW, **extra)

    build(qs[0])  # warm-up
    for q in qs:
        b, a = timed(lambda: build(q))
        _, r = timed(lambda: rec.recall(q, k, now=NOW))
        out["build"].append(a * 1e3)
        out["recall"].append(r * 1e3)
        cur = next((e["cursor"] for e in b.expandable if e["section"] == "recall"), None)
        cur = cur or (b.expandable[0]["cursor"] if b.expandable else None)
        if cur is not None:
            _, e = timed(lambda: briefing.expand_context(cache, cur))
            out["expand"].append(e * 1e3)
    return out


# ---------------------------------------------------------------------- one size
@dataclass
class SizeResult:
    n: int
    encoded: int
    build_s: float
    peer_build_s: float
    frozen_ms: list[float]
    live_ms: list[float]
    encode_ms: list[float]  # a bare MiniLM encode of the same rewritten query text, right after the live recall
    peer_ms: list[float]
    peer_lex_ms: list[float]
    peer_dense_ms: list[float]
    peer_path: str
    stages_ms: dict[str, float]  # mean per query
    profile_total_ms: float
    rss: dict[str, dict[str, float]] | None
    briefing: dict[str, list[float]] | None = None
    stages_p50_ms: dict[str, float] = field(default_factory=dict)  # median per query (growth fits: robust to spikes)


def measure_size(n: int, cfg: RecallBenchConfig, live, cache) -> SizeResult:
    with tempfile.TemporaryDirectory() as tmp:
        w = workload(n, cfg, Path(tmp), cache, live)
        def build_and_lay_out() -> Recaller:  # BM25 matrices are laid out lazily, on the first query
            r = build(w)
            r.recall(w.queries[0], now=NOW)
            return r

        rec, build_s = timed(build_and_lay_out)
        frozen = frozen_for(rec, w.queries, live)
        rec.embedder.inner = frozen
        peer, peer_build_s = timed(lambda: Peer(w.texts, w.vectors, cfg.k))
        q_ids = [peer.q_ids(q) for q in w.queries]
        qtexts = [rec.query_text(q)[0].text for q in w.queries]
        qvecs = [frozen.table[t] for t in qtexts]
        warm = max(1, min(10, len(w.queries)))
        peer_path = peer.calibrate(q_ids[:warm])
        for i, q in enumerate(w.queries[:warm]):  # warm-up: compiled kernels, layouts, hash caches, model threads
            rec.recall(q, cfg.k, now=NOW)
            if i < 2:
                rec.embedder.inner = live
                rec.recall(q, cfg.k, now=NOW)
                rec.embedder.inner = frozen
        frozen_ms, live_ms, encode_ms, peer_ms, lex_ms, dense_ms = [], [], [], [], [], []
        for _ in range(cfg.passes):
            for q, qi, qv, qt in zip(w.queries, q_ids, qvecs, qtexts, strict=True):
                rec.embedder.inner = frozen
                _, a = timed(lambda: rec.recall(q, cfg.k, now=NOW))
                rec.embedder.inner = live
                _, b = timed(lambda: rec.recall(q, cfg.k, now=NOW))
                _, e = timed(lambda: live.encode([qt]))
                encode_ms.append(e * 1e3)
                _, c = timed(lambda: peer.lexical(qi))
                _, d = timed(lambda: peer.dense(qv))
                frozen_ms.append(a * 1e3)
                live_ms.append(b * 1e3)
                lex_ms.append(c * 1e3)
                dense_ms.append(d * 1e3)
                peer_ms.append((c + d) * 1e3)
        # stage profile with the live embedder (the query embedding is one of the stages)
        rec.embedder.inner = live
        per_stage: dict[str, list[float]] = {s: [] for s in STAGES}
        pq = w.queries[: cfg.profile_queries]
        for q in pq:
            got, t = staged_recall(rec, q, NOW, cfg.k)
            want = [(r.id, r.score) for r in rec.recall(q, cfg.k, now=NOW)]
            if got != want:
                raise AssertionError(f"profiled recall diverged from Recaller.recall for {q!r}: {got[:3]} vs {want[:3]}")
            for s, v in t.items():
                per_stage[s].append(v * 1e3)
        if frozen.misses:
            raise AssertionError(f"{frozen.misses} frozen query vectors missing: 'without embedding' ran lexical-only")
        stages = {s: statistics.fmean(v) for s, v in per_stage.items()}
        stage_p50 = {s: statistics.median(v) for s, v in per_stage.items()}
        rec.embedder.inner = frozen  # briefing latency without the model call, like the main figure
        brief = measure_briefing(rec, pq, cfg.k)
        rss = measure_rss(n, w.vectors, cfg.seed) if cfg.rss else None
        return SizeResult(n, w.encoded, build_s, peer_build_s, frozen_ms, live_ms, encode_ms, peer_ms, lex_ms, dense_ms,
                          peer_path, stages, sum(stages.values()), rss, brief, stage_p50)


# ---------------------------------------------------------------------- report
def render(results: list[SizeResult], cfg: RecallBenchConfig, source: str, quick: bool) -> Section:
    nq = len(results[0].frozen_ms) if results else 0
    lines = [
        f"Corpus: {source}, replicated with perturbation; {cfg.queries} three-word queries x {cfg.passes} passes "
        f"= {nq} timed recalls per size after a warm-up, top-{cfg.k}, default RecallConfig. "
        f"Document vectors: MiniLM via the embedding cache for the first E texts, then the vector of text j mod E "
        f"plus N(0, {cfg.noise}^2) noise per dimension, renormalised. "
        "*Without embedding* = the full pipeline with the query vector looked up from a table of MiniLM vectors "
        "computed before timing; *with* = live MiniLM encode of the query. "
        "Peer = bm25s top-10 on the same tokens (its faster path) + bare numpy dense top-10 (M @ q, argpartition) "
        "on the same vectors, timed right after each recall.",
        "",
        table(("memories", "E (MiniLM texts)", "build s (add + first query)", "p50 ms (no emb)", "p95 ms (no emb)", "p50 ms (with emb)",
               "p95 ms (with emb)", "peer p50 ms (bm25s + numpy)", "ratio no-emb / peer (target <= 2x at 100k)", "bm25s path"),
              [(f"{r.n:,}", f"{r.encoded:,}", f"{r.build_s:.2f}", f"{percentile(r.frozen_ms, 50):.2f}", f"{percentile(r.frozen_ms, 95):.2f}",
                f"{percentile(r.live_ms, 50):.2f}", f"{percentile(r.live_ms, 95):.2f}",
                f"{percentile(r.peer_ms, 50):.2f} (bm25s {percentile(r.peer_lex_ms, 50):.2f} + numpy {percentile(r.peer_dense_ms, 50):.2f})",
                f"{percentile(r.frozen_ms, 50) / percentile(r.peer_ms, 50):.2f}x", r.peer_path) for r in results],
              "rrrrrrrrrl"),
    ]
    lines += ["", "Recall with the live query embedding against its floor: a bare `encode` of the same rewritten query text "
              "(the text the pipeline embeds), timed right after each live recall. Target (issue 18): live recall p50 <= "
              "bare encode p50 + 1.5 x peer p50.", ""]
    floor = []
    for r in results:
        l50, e50, p50 = percentile(r.live_ms, 50), percentile(r.encode_ms, 50), percentile(r.peer_ms, 50)
        floor.append((f"{r.n:,}", f"{l50:.2f}", f"{e50:.2f}", f"{p50:.2f}", f"{e50 + 1.5 * p50:.2f}", "yes" if l50 <= e50 + 1.5 * p50 else "no"))
    lines.append(table(("memories", "live recall p50 ms", "bare encode p50 ms", "peer p50 ms", "limit: encode + 1.5 x peer", "met"),
                       floor, "rrrrrl"))
    if results and results[0].rss is not None:
        lines += ["", "Peak RSS growth of building and querying the index, each in a fresh process: inputs loaded first, "
                  f"then the peak mark is reset and read again after one query ({results[0].rss['memofs']['method']}), "
                  "and the resident growth that stays (VmRSS).", ""]
        rss = []
        for r in results:
            m, p = r.rss["memofs"], r.rss["peer"]  # type: ignore[index]
            rss.append((f"{r.n:,}", f"{m['peak_mib']:.1f}", f"{m['resident_mib']:.1f}", f"{p['peak_mib']:.1f}",
                        f"{m['peak_mib'] / max(p['peak_mib'], 0.1):.1f}x"))
        lines.append(table(("memories", "memofs peak MiB", "memofs resident MiB", "peer peak MiB (bm25s + float32 matrix)", "ratio peak"),
                           rss, "rrrrr"))
    lines += ["", f"Stage profile: mean ms per query over {cfg.profile_queries} queries (the growth table fits the per-stage medians), from "
              "`Recaller.recall`'s own per-stage stopwatch (`profile=`) with the live embedder (each profiled result is checked "
              "to equal a plain `recall`); share of the total in brackets.", "",
              table(["stage", *(f"{r.n:,}" for r in results)],
                    [*([s, *(f"{r.stages_ms[s]:.2f} ({100 * r.stages_ms[s] / max(r.profile_total_ms, 1e-12):.0f}%)" for r in results)]
                       for s in STAGES),
                     ["**total**", *(f"{r.profile_total_ms:.2f}" for r in results)]],
                    "l" + "r" * len(results))]
    if results:
        big = results[-1]
        no_emb = {s: v for s, v in big.stages_ms.items() if s != "query embedding"}
        top = max(no_emb, key=no_emb.get)
        lines += ["", f"Largest stage at {big.n:,} memories without the query embedding: **{top}** "
                  f"({100 * no_emb[top] / max(sum(no_emb.values()), 1e-12):.0f}% of the rest)."]
    if results and results[0].briefing is not None:
        lines += ["", f"Context briefing (`build_context`, compact, 8 KiB cap, over {cfg.profile_queries} queries; query vectors "
                  "from the table) and cursor expansion (`expand_context` of the briefing's cursor, cache only). "
                  "Peer: a plain `recall` of the same query, timed right after.", ""]
        brief = []
        for r in results:
            b = r.briefing or {}
            bb, rr = percentile(b["build"], 50), percentile(b["recall"], 50)
            ee = percentile(b["expand"], 50) if b["expand"] else float("nan")
            brief.append((f"{r.n:,}", f"{bb:.2f}", f"{ee:.3f}", f"{rr:.2f}", f"{bb / rr:.2f}x", f"{ee / rr:.3f}x"))
        lines.append(table(("memories", "briefing p50 ms", "expansion p50 ms", "recall p50 ms", "ratio briefing / recall",
                            "ratio expansion / recall"), brief, "rrrrrr"))
    else:
        lines += ["", "Context briefing: skipped (memofs/store/briefing.py absent)."]
    if quick:
        lines.insert(0, "(--quick smoke sizes, not a measurement)\n")
    sizes = [r.n for r in results]
    series = [
        Series("recall p50, no query embedding", "ms", sizes, [percentile(r.frozen_ms, 50) for r in results], figure="latency"),
        Series("recall p95, no query embedding", "ms", sizes, [percentile(r.frozen_ms, 95) for r in results], figure="latency"),
        Series("recall p50, with query embedding", "ms", sizes, [percentile(r.live_ms, 50) for r in results], figure="latency"),
        Series("bare MiniLM encode of the query p50", "ms", sizes, [percentile(r.encode_ms, 50) for r in results], peer=True),
        Series("peer p50: bm25s + numpy top-k", "ms", sizes, [percentile(r.peer_ms, 50) for r in results], peer=True, figure="latency"),
        Series("index build", "s", sizes, [r.build_s for r in results]),
        Series("peer build (bm25s + matrix)", "s", sizes, [r.peer_build_s for r in results], peer=True),
    ]
    series += [Series(f"stage p50: {s}", "ms", sizes, [r.stages_p50_ms[s] for r in results]) for s in STAGES if s != "results"]
    if results and results[0].briefing is not None:
        series.append(Series("briefing build p50", "ms", sizes, [percentile(r.briefing["build"], 50) for r in results], figure="latency"))  # type: ignore[index]
        if all(r.briefing["expand"] for r in results):  # type: ignore[index]
            series.append(Series("cursor expansion p50", "ms", sizes, [percentile(r.briefing["expand"], 50) for r in results]))  # type: ignore[index]
    if results and results[0].rss is not None:
        series += [
            Series("memofs index peak RSS", "MiB", sizes, [r.rss["memofs"]["peak_mib"] for r in results], figure="memory"),  # type: ignore[index]
            Series("peer index peak RSS", "MiB", sizes, [r.rss["peer"]["peak_mib"] for r in results], peer=True, figure="memory"),  # type: ignore[index]
        ]
    headline = []
    if results:
        big = results[-1]
        f50, l50, p50 = percentile(big.frozen_ms, 50), percentile(big.live_ms, 50), percentile(big.peer_ms, 50)
        headline += [
            (f"recall p50 at {big.n:,} memories, no query embedding", f"{f50:.1f} ms", f"{p50:.1f} ms", f"{f50 / p50:.2f}x (target <= 2x)"),
            (f"recall p95 at {big.n:,} memories, no query embedding", f"{percentile(big.frozen_ms, 95):.1f} ms",
             f"{percentile(big.peer_ms, 95):.1f} ms", f"{percentile(big.frozen_ms, 95) / percentile(big.peer_ms, 95):.2f}x"),
            (f"recall p50 at {big.n:,} memories, with query embedding", f"{l50:.1f} ms", f"{p50:.1f} ms", f"{l50 / p50:.2f}x"),
            (f"recall p50 at {big.n:,} memories, with query embedding, over a bare encode", f"{l50:.1f} ms",
             f"{percentile(big.encode_ms, 50):.1f} ms encode + {p50:.1f} ms peer",
             f"{(l50 - percentile(big.encode_ms, 50)) / p50:.2f}x peer beyond the encode (target <= 1.5x)"),
        ]
        if big.briefing is not None:
            bb, rr = percentile(big.briefing["build"], 50), percentile(big.briefing["recall"], 50)
            headline.append((f"briefing build p50 at {big.n:,} memories", f"{bb:.1f} ms", f"{rr:.1f} ms (recall)", f"{bb / rr:.2f}x"))
            if big.briefing["expand"]:
                ee = percentile(big.briefing["expand"], 50)
                headline.append((f"cursor expansion p50 at {big.n:,} memories", f"{ee:.2f} ms", f"{rr:.1f} ms (recall)", f"{ee / rr:.3f}x"))
        if big.rss is not None:
            m, p = big.rss["memofs"]["peak_mib"], big.rss["peer"]["peak_mib"]
            headline.append((f"index peak RSS at {big.n:,} memories", f"{m:.0f} MiB", f"{p:.0f} MiB", f"{m / max(p, 0.1):.1f}x"))
    return Section("End-to-end recall", "\n".join(lines), series, headline)


def run(cfg: RecallBenchConfig, quick: bool = False, live=None, cache=None) -> tuple[Section, list[SizeResult]]:
    live = live or live_embedder()
    cache = cache or embedding_cache()
    results = [measure_size(n, cfg, live, cache) for n in cfg.sizes]
    _, source = base_texts()
    return render(results, cfg, source, quick), results


def quick_config() -> RecallBenchConfig:
    return RecallBenchConfig(sizes=(300, 1000), queries=5, passes=1, profile_queries=2, encode_cap=64)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--queries", type=int, default=None)
    ap.add_argument("--no-rss", action="store_true")
    ap.add_argument("--out", type=Path, default=REPORTS / "bench-recall.md")
    a = ap.parse_args(argv)
    cfg = quick_config() if a.quick else RecallBenchConfig()
    if a.sizes:
        cfg = RecallBenchConfig(**{**cfg.__dict__, "sizes": tuple(a.sizes)})
    if a.queries:
        cfg = RecallBenchConfig(**{**cfg.__dict__, "queries": a.queries})
    if a.no_rss:
        cfg = RecallBenchConfig(**{**cfg.__dict__, "rss": False})
    section, _ = run(cfg, a.quick)
    return emit(section, a.out, "memofs_eval.bench.recall")


if __name__ == "__main__":
    main()
