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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from memofs.ranking.config import SIGNAL_FIELDS, RecallConfig
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.recall import Recaller
from memofs.signals.frame import ContextColumns, SignalFrame

from memofs_eval.data import EvalData
from memofs_eval.embed import CachedEmbedder, embedding_cache, make_embedder

FORMAT = 2
COLUMNS: tuple[str, ...] = ("order_key", "bm25", "fuzzy", "cosine", "rerank", "age_days", "confidence", "kind", "stale", "is_graph")
#: :class:`ContextColumns` fields, stored once per scope (they do not depend on the query)
CONTEXT_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ContextColumns))
_MEMOFS = Path(__file__).resolve().parents[1] / "memofs"
RECOMBINATION_ONLY = frozenset({"fusion.py", "learned.py"})  # applied live, never cached


def extraction_code_hash() -> str:
    """Hash of the memofs sources that shape signals (all but fusion, which is recombined
    live): a pipeline change invalidates cached frames instead of silently reusing them."""
    import memofs_datasets.format as dataset_format

    h = hashlib.sha256()
    for p in sorted(_MEMOFS.rglob("*.py")):
        if p.name not in RECOMBINATION_ONLY:
            h.update(p.relative_to(_MEMOFS).as_posix().encode())
            h.update(p.read_bytes())
    # how corpora, scopes and graphs are built from a dataset shapes the frames too
    for p in (Path(__file__), Path(dataset_format.__file__)):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def signal_config(cfg: RecallConfig) -> RecallConfig:
    """The default config carrying only ``cfg``'s signal fields: the Recaller's own config
    (its reranker takes ``fuzzy_partial`` from it)."""
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


def compute_frames(data: EvalData, cfg: RecallConfig, embedder: str, cache_root: Path, progress: bool = False) -> tuple[dict[str, SignalFrame], str]:
    """Extract frames with the pipeline itself: one Recaller per scope, precomputed vectors."""
    ds = data.dataset
    scfg = signal_config(cfg)
    inner = make_embedder(embedder, [m.text for m in ds.memories])
    emb = CachedEmbedder(inner, embedding_cache(cache_root)) if inner is not None else None
    by_scope: dict[str | None, list] = defaultdict(list)
    for q in data.queries:
        by_scope[q.scope].append(q)
    frames: dict[str, SignalFrame] = {}
    bar = tqdm(total=len(data.queries), desc=f"signals {data.name} [{embedder}]", disable=not progress, leave=False)
    if emb is not None:
        emb.warm([m.text for m in ds.memories], progress, f"embed {data.name} [{embedder}]")  # the whole corpus, chunked
    for scope in sorted(by_scope, key=lambda s: (s is not None, s or "")):
        queries = by_scope[scope]
        corpus = ds.corpus_for(queries[0])
        rec = Recaller(scfg, embedder=emb, graph=EntityGraph(*ds.graph_for(scope)), anchor_root=_anchor_root(data, scope))
        vectors = emb.encode([m.text for m in corpus]) if emb is not None else None
        rec.add(corpus, vectors=vectors)
        if emb is not None:  # the rewritten query texts, encoded in one batch
            emb.warm([rec.query_text(q.text, q.task_type, scfg)[0].text for q in queries])
        for q in queries:
            frames[q.id] = rec.signals(q.text, task_type=q.task_type, now=ds.now_for(q), config=scfg)
            bar.update(1)
    bar.close()
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
    """``frames(data, cfg, embedder)``: from ``<root>/signals/<key>.npz`` or computed and stored."""

    def __init__(self, root: Path, progress: bool = False) -> None:
        self.root = root
        self.progress = progress
        self.hits = 0
        self.misses = 0
        self._memo: dict[str, FrameSet] = {}

    def frames(self, data: EvalData, cfg: RecallConfig, embedder: str) -> FrameSet:
        key = group_key(data, cfg, embedder)
        if key in self._memo:
            return self._memo[key]
        path = self.root / "signals" / f"{key}.npz"
        if path.is_file():
            frames, name = load_frames(path)
            fs = FrameSet(key, frames, name, computed=False)
            self.hits += 1
        else:
            frames, name = compute_frames(data, cfg, embedder, self.root, self.progress)
            save_frames(path, frames, name)
            fs = FrameSet(key, frames, name, computed=True)
            self.misses += 1
        self._memo[key] = fs
        return fs
