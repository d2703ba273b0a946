"""Signal frames computed once and cached on disk, reused across configs and runs.

A *signal group* is (dataset content hash, signal settings = ``RecallConfig.signal_key()``,
embedder, memofs extraction code). For each group every query's :class:`SignalFrame` is
extracted by :meth:`Recaller.signals` (one Recaller per scope namespace; corpus vectors
from the embedding cache) and stored as one ``.npz`` under ``<cache>/signals/``: the frame
columns concatenated over queries with offsets, plus the id list of each scope.
Fusion never runs here; configs that differ only in fusion fields share a group.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memofs_eval.provenance.code_closure import digest
from memofs.ranking.config import SIGNAL_FIELDS, RecallConfig
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.recall import Recaller
from memofs.signals.embedding_cache import CHUNK
from memofs.signals.frame import ContextColumns, SignalFrame

from memofs_eval.inputs.data import EvalData, load
from memofs_eval.runs.embed import CachedEmbedder, embedding_cache, make_embedder
from memofs_eval.execution.executor import LOCAL, Executor
from memofs_eval.inputs.spec import DatasetRef

FORMAT = 3  # 3: the superseded and is_phrase columns
COLUMNS: tuple[str, ...] = ("order_key", "bm25", "fuzzy", "cosine", "rerank", "age_days", "confidence", "kind", "stale", "is_graph",
                            "superseded", "is_phrase")
#: :class:`ContextColumns` fields, stored once per scope (they do not depend on the query)
CONTEXT_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ContextColumns))
_MEMOFS = Path(__file__).resolve().parents[2] / "memofs"
RECOMBINATION_ONLY = frozenset({"fusion.py", "learned.py", "learned_features.py", "learned_model.py", "query_cues.py"})  # applied live, never cached


def extraction_code_hash() -> str:
    """Hash of the memofs sources that shape signals (all but fusion, which is recombined
    live): a pipeline change invalidates cached frames instead of silently reusing them."""
    import memofs_datasets.format as dataset_format

    h = hashlib.sha256()
    for p in sorted(_MEMOFS.rglob("*.py")):
        if p.name not in RECOMBINATION_ONLY:
            h.update(p.relative_to(_MEMOFS).as_posix().encode())
            h.update(digest(p).encode())  # comments and docstrings never invalidate a cache
    # how corpora, scopes and graphs are built from a dataset shapes the frames too
    fmt = Path(dataset_format.__file__).parent  # the format's modules (format.py re-exports them)
    for p in (Path(__file__), *(fmt / f"{m}.py" for m in ("format", "dataset", "loader", "validation", "writer"))):
        h.update(p.name.encode())
        h.update(digest(p).encode())
    return h.hexdigest()[:16]


def signal_config(cfg: RecallConfig) -> RecallConfig:
    """The default config carrying only ``cfg``'s signal fields: the Recaller's own config
    (its reranker takes ``fuzzy_partial`` from it).

    The cached frames hold the deterministic reranker's overlap for every document; a model
    reranker scores only a fused pool's top ``rerank_top_n`` per query, which no frame holds,
    so such a config is refused here rather than silently scored with the overlap."""
    if cfg.reranker != "deterministic":
        raise ValueError(f"reranker={cfg.reranker!r} is scored by online recall only (the systems study, "
                         "python -m memofs_eval.studies.systems); the cached-signal harness holds the "
                         "deterministic reranker's overlap alone")
    return RecallConfig().replace(**{f: getattr(cfg, f) for f in SIGNAL_FIELDS})


def group_key(data: EvalData, cfg: RecallConfig, embedder: str) -> str:
    payload = json.dumps({"format": FORMAT, "dataset": data.content_hash, "signals": list(map(repr, cfg.signal_key())),
                          "embedder": embedder, "code": extraction_code_hash(),
                          "queries": [q.id for q in data.queries]}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


@dataclass
class FrameSet:
    """Every query's frame for one signal group, keyed by query id."""

    key: str
    frames: dict[str, SignalFrame]
    embedder_name: str
    computed: bool  # False when read from the cache


def _anchor_root(data: EvalData, scope: str | None) -> Path | None:
    if scope is not None:
        return data.dataset.anchor_root(scope)
    ns = data.dataset.namespaces
    # an unscoped corpus mixes namespaces; anchors resolve only when there is just one
    return data.dataset.anchor_root(ns[0]) if len(ns) == 1 else None


@dataclass(frozen=True)
class ExtractionPlan:
    """What one signal group's extraction does, fixed before any task runs: the scopes in
    order (each a Recaller over one corpus, with its query ids) and the embedding batches
    (every distinct corpus and rewritten query text, sorted, cut in ``CHUNK``). The batches
    do not depend on the executor, so every text is encoded in the same batch either way."""

    scopes: tuple[tuple[str | None, tuple[str, ...]], ...]
    batches: tuple[tuple[str, ...], ...]

    @property
    def n_texts(self) -> int:
        return sum(len(b) for b in self.batches)


def _recaller(data: EvalData, scfg: RecallConfig, scope: str | None, emb: CachedEmbedder | None) -> Recaller:
    return Recaller(scfg, embedder=emb, graph=EntityGraph(*data.dataset.graph_for(scope)), anchor_root=_anchor_root(data, scope))


def extraction_plan(data: EvalData, cfg: RecallConfig, embedder: str) -> ExtractionPlan:
    """Scopes (unscoped first, then by name) and embedding batches of one signal group."""
    scfg = signal_config(cfg)
    by_scope: dict[str | None, list[str]] = defaultdict(list)
    first: dict[str | None, object] = {}
    for q in data.queries:
        by_scope[q.scope].append(q.id)
        first.setdefault(q.scope, q)
    order = sorted(by_scope, key=lambda s: (s is not None, s or ""))
    texts: set[str] = set()
    if embedder != "none":
        texts.update(m.text for m in data.dataset.memories)
        queries = {q.id: q for q in data.queries}
        for scope in order:  # the rewritten query texts (the graph shapes them; no corpus needed)
            rec = _recaller(data, scfg, scope, None)
            texts.update(rec.query_text(queries[i].text, queries[i].task_type, scfg)[0].text for i in by_scope[scope])
    ordered = sorted(texts)
    batches = tuple(tuple(ordered[i:i + CHUNK]) for i in range(0, len(ordered), CHUNK))
    return ExtractionPlan(tuple((s, tuple(by_scope[s])) for s in order), batches)


_EMBEDDER: list[tuple[tuple, CachedEmbedder]] = []  # this process's last embedder (a worker's, under Dask)


def cached_embedder(data: EvalData, embedder: str, cache_root: Path) -> CachedEmbedder | None:
    """The spec's embedder behind the embedding cache; the last one is kept per process, so
    a worker fits LSA or loads MiniLM once for all its tasks, not once per task."""
    if embedder == "none":
        return None
    key = (embedder, data.content_hash, str(cache_root))
    if _EMBEDDER and _EMBEDDER[0][0] == key:
        return _EMBEDDER[0][1]
    inner = make_embedder(embedder, [m.text for m in data.dataset.memories])
    emb = CachedEmbedder(inner, embedding_cache(cache_root))
    _EMBEDDER[:] = [(key, emb)]
    return emb


def embed_batch(data: EvalData, embedder: str, cache_root: Path, texts: Sequence[str]) -> int:
    """One embedding task: encode the batch's texts the cache lacks (one ``encode`` call)
    and store them in the content-addressed cache; returns how many texts it holds."""
    emb = cached_embedder(data, embedder, cache_root)
    if emb is not None:
        emb.warm(list(texts))
    return len(texts)


def scope_frames(data: EvalData, cfg: RecallConfig, embedder: str, cache_root: Path,
                 scope: tuple[str | None, Sequence[str]]) -> tuple[dict[str, SignalFrame], str]:
    """One extraction task: the frames of one scope's queries, by the pipeline's own
    ``Recaller.signals`` over that scope's corpus (vectors read from the cache the
    embedding batches filled), and the resolved embedder name."""
    name, qids = scope
    scfg = signal_config(cfg)
    emb = cached_embedder(data, embedder, cache_root)
    wanted = set(qids)
    queries = [q for q in data.queries if q.id in wanted]
    corpus = data.dataset.corpus_for(queries[0])
    rec = _recaller(data, scfg, name, emb)
    rec.add(corpus, vectors=emb.encode([m.text for m in corpus]) if emb is not None else None)
    if emb is not None:  # the rewritten query texts, in memory before the per-query loop
        emb.warm([rec.query_text(q.text, q.task_type, scfg)[0].text for q in queries])
    frames = {q.id: rec.signals(q.text, task_type=q.task_type, now=data.dataset.now_for(q), config=scfg) for q in queries}
    return frames, (emb.name if emb is not None else "none")


def load_checked(ref: DatasetRef, content_hash: str) -> EvalData:
    """A worker's copy of the dataset, loaded from its path and checked against the
    client's content hash (workers on other machines need the path on a shared mount)."""
    data = EvalData(ref, load(ref))
    if data.content_hash != content_hash:
        raise ValueError(f"dataset {ref.name!r}: {ref.path} holds different data on this worker "
                         f"(content hash {data.content_hash}, the client has {content_hash})")
    return data


def frames_only(path: str) -> dict[str, SignalFrame]:
    """A worker's copy of a signal group's frames, read from the shared cache."""
    return load_frames(Path(path))[0]


def compute_frames(data: EvalData, cfg: RecallConfig, embedder: str, cache_root: Path, progress: bool = False,
                   executor: Executor | None = None) -> tuple[dict[str, SignalFrame], str]:
    """Extract frames with the pipeline itself: the plan's embedding batches, then one task
    per scope. ``executor`` fans the tasks out (Dask); by default they run here, in order.
    Either way the frames come back in the plan's order and are the same bytes."""
    ex = executor or LOCAL
    plan = extraction_plan(data, cfg, embedder)
    shared = ex.shared(data, load_checked, data.ref, data.content_hash)
    ex.map(embed_batch, plan.batches, shared, embedder, cache_root,
           desc=f"embed {data.name} [{embedder}]", progress=progress, weight=len)
    parts = ex.map(scope_frames, plan.scopes, shared, cfg, embedder, cache_root,
                   desc=f"signals {data.name} [{embedder}]", progress=progress, weight=lambda s: len(s[1]))
    frames: dict[str, SignalFrame] = {}
    for part, _ in parts:
        frames.update(part)
    if parts:
        return frames, parts[0][1]
    emb = cached_embedder(data, embedder, cache_root)  # no query: the name alone
    return frames, (emb.name if emb is not None else "none")


def save_frames(path: Path, frames: dict[str, SignalFrame], embedder_name: str) -> None:
    """Write atomically (temp file + rename) so concurrent runs never read half a file."""
    qids = list(frames)
    scopes: dict[tuple[str, ...], int] = {}
    scope_of = []
    for qid in qids:
        scope_of.append(scopes.setdefault(frames[qid].ids, len(scopes)))
    lengths = np.array([len(frames[q]) for q in qids], dtype=np.int64)
    arrays: dict[str, np.ndarray] = {
        c: (np.concatenate([getattr(frames[q], c) for q in qids]) if qids else np.zeros(0)) for c in COLUMNS
    }
    arrays["offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    arrays["scope_of"] = np.array(scope_of, dtype=np.int64)
    # context per scope: the first query of each scope carries it (a Recaller per scope)
    first = {s: qids[i] for i, s in reversed(list(enumerate(scope_of)))}
    ctx = [frames[first[s]].context for s in range(len(scopes))]
    if ctx and all(c is not None for c in ctx):
        for c in CONTEXT_COLUMNS:
            arrays[f"context_{c}"] = np.concatenate([getattr(x, c) for x in ctx])
    meta = {
        "qids": qids,
        "query_text": [frames[q].query_text for q in qids],
        "vector_ok": [frames[q].vector_ok for q in qids],
        "rerank_ok": [frames[q].rerank_ok for q in qids],
        "scopes": [list(ids) for ids in scopes],
        "embedder": embedder_name,
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_frames(path: Path) -> tuple[dict[str, SignalFrame], str]:
    with np.load(path) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        cols = {c: z[c] for c in COLUMNS}
        offsets, scope_of = z["offsets"], z["scope_of"]
        ctx_cols = {c: z[f"context_{c}"] for c in CONTEXT_COLUMNS} if "context_prev_row" in z.files else None
    scopes = [tuple(ids) for ids in meta["scopes"]]
    contexts: list[ContextColumns | None] = [None] * len(scopes)
    if ctx_cols is not None:
        ends = np.cumsum([0] + [len(ids) for ids in scopes])
        contexts = [ContextColumns(**{c: v[ends[i]:ends[i + 1]] for c, v in ctx_cols.items()}) for i in range(len(scopes))]
    frames = {}
    for i, qid in enumerate(meta["qids"]):
        a, b = int(offsets[i]), int(offsets[i + 1])
        frames[qid] = SignalFrame(
            ids=scopes[int(scope_of[i])], **{c: cols[c][a:b] for c in COLUMNS},
            query_text=meta["query_text"][i], vector_ok=meta["vector_ok"][i], rerank_ok=meta["rerank_ok"][i],
            context=contexts[int(scope_of[i])],
        )
    return frames, meta["embedder"]


class SignalCache:
    """``frames(data, cfg, embedder)``: from ``<root>/signals/<key>.npz`` or computed (on
    ``executor`` when one is given) and stored. ``root`` is content-addressed throughout, so
    workers and later runs sharing it extract nothing twice."""

    def __init__(self, root: Path, progress: bool = False, executor: Executor | None = None) -> None:
        self.root = root
        self.progress = progress
        self.executor = executor
        self.hits = 0
        self.misses = 0
        self._memo: dict[str, FrameSet] = {}

    def path(self, key: str) -> Path:
        """The stored frames of signal group ``key``."""
        return self.root / "signals" / f"{key}.npz"

    def frames(self, data: EvalData, cfg: RecallConfig, embedder: str) -> FrameSet:
        key = group_key(data, cfg, embedder)
        if key in self._memo:
            return self._memo[key]
        path = self.path(key)
        if path.is_file():
            frames, name = load_frames(path)
            fs = FrameSet(key, frames, name, computed=False)
            self.hits += 1
        else:
            frames, name = compute_frames(data, cfg, embedder, self.root, self.progress, self.executor)
            save_frames(path, frames, name)
            fs = FrameSet(key, frames, name, computed=True)
            self.misses += 1
        self._memo[key] = fs
        return fs
