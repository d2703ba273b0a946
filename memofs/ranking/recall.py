"""The recall pipeline: rewrite -> entities -> signals -> fusion (spec, end to end).

:class:`Recaller` owns one corpus (a project's memories, or one scoped corpus of a
benchmark): a BM25 index, a vector index, the entity graph and an anchor checker.
:meth:`Recaller.signals` extracts every signal for one query;
:func:`memofs.ranking.fusion.fuse` combines them. ``now`` is always injected (argument or clock);
scoring never reads the wall clock itself.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, partial
from itertools import repeat
from operator import attrgetter
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.signals.anchors import AnchorChecker
from memofs.signals.bm25 import BM25Index
from memofs.signals.fuzzy import OverlapIndex
from memofs.signals.term_counts import TermCounts
from memofs.ranking.config import RecallConfig
from memofs.signals.embedders.base import Embedder
from memofs.signals.embedders.select import SafeEmbedder
from memofs.ranking.fusion import fuse
from memofs.ranking.pools import Fused, Pools, pools
from memofs.graph.entity_graph import SUPERSEDES, EntityGraph
from memofs.files.memory_table import MemoryMap, MemoryTable
from memofs.files.records import Memory
from memofs.signals.phrase_scan import PhraseHit, PhraseScanner
from memofs.signals.rerank import DeterministicFallbackReranker, Reranker, reranker_for
from memofs.text.index_text import upstream_index_text
from memofs.text.rewrite import rewrite_query
from memofs.text.stem import tokenize_stemmed
from memofs.text.stopwords import UPSTREAM_STOP_WORDS
from memofs.text.tokenize import tokenize
from memofs.signals.frame import KIND_CODES, OTHER_KIND, ContextColumns, SignalFrame, context_columns
from memofs.signals.vector_index import VectorIndex

log = logging.getLogger(__name__)

GRAPH_PREFIX = "graph:"


@dataclass(frozen=True)
class RecallResult:
    id: str
    text: str
    score: float
    memory: Memory | None
    explain: dict[str, Any] | None = None
    source: str = "memory"  # memory | graph | core | notes (a phrase-scan block of core.md / notes.md)


class _Stopwatch:
    """``with stage(name):`` adds the block's wall time to ``profile[name]`` (no-op when None)."""

    def __init__(self, profile: dict[str, float] | None) -> None:
        self.profile = profile

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.profile is None:
            yield
            return
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.profile[name] = self.profile.get(name, 0.0) + time.perf_counter() - t0


class Recaller:
    """Hybrid recall over one corpus.

    ``embedder``: an :class:`~memofs.signals.embedders.base.Embedder`, or None for lexical-only.
    It is wrapped so a failure never reaches the caller (spec zero-key tier 2).
    ``reranker``: defaults to the one ``config.reranker`` names (:func:`~memofs.signals.rerank.reranker_for`:
    :class:`DeterministicFallbackReranker` in the reference).
    ``clock``: returns "now" when :meth:`recall` gets none.
    """

    def __init__(
        self,
        config: RecallConfig | None = None,
        *,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        graph: EntityGraph | None = None,
        anchor_root: Path | str | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.config = config or RecallConfig()
        self.embedder = SafeEmbedder(embedder)
        self.reranker: Reranker = reranker or reranker_for(self.config.reranker, self.config.reranker_model,
                                                           partial=self.config.fuzzy_partial)
        self.graph = graph or EntityGraph()
        self.anchors = AnchorChecker(anchor_root)
        self.clock = clock
        self._memories = MemoryMap()
        self._vectors: VectorIndex | None = None
        self._lexical: dict[tuple[float, float, float], BM25Index] = {}
        # counts adopted by add(terms=...), and the ids added, replaced or removed since
        self._terms: TermCounts | None = None
        self._touched: dict[str, None] = {}
        # the fallback reranker's overlap for *every* document (SignalFrame for the harness)
        # comes from its overlap index over its own tokens; online recall scores only the
        # pool and never builds it
        self._rerank_index: OverlapIndex | None = None
        self._rerank_rows: tuple[tuple[str, ...], NDArray[np.int64]] | None = None  # (ids it aligns, rows)
        self._graph_docs: dict[str, str] = {}
        self._columns: dict[int, _CorpusColumns] = {}
        self._superseded_by: dict[str, tuple[str, ...]] | None = None
        self.phrases = PhraseScanner()
        self.refresh_graph()

    # --- corpus ---------------------------------------------------------------------
    @property
    def memories(self) -> Mapping[str, Memory]:
        """The corpus's records by id, in the order added (a rehydrated store's stay
        columns until read: :class:`~memofs.files.memory_table.MemoryMap`)."""
        return self._memories

    def __len__(self) -> int:
        return len(self._memories)

    def _texts(self) -> Iterable[tuple[str, str]]:
        yield from zip(list(self._memories), self._memories.texts())
        yield from self._graph_docs.items()

    def _lexical_text(self, doc_id: str, upstream_text: bool) -> str:
        """A memory's lexical document: its text, or upstream's ``(title ?? first 80
        characters) + "\n" + text`` (``RecallConfig.upstream_index_text``)."""
        m = self._memories[doc_id]
        return upstream_index_text(m.text, (m.metadata or {}).get("title")) if upstream_text else m.text

    def _graph_docs_for(self, aliases: bool) -> dict[str, str]:
        """The graph's BM25 documents, with the aliases (ours) or without (upstream's)."""
        return self._graph_docs if aliases else dict(self.graph.bm25_documents(aliases=False))

    def _lexical_index(self, cfg: RecallConfig) -> BM25Index:
        key = (cfg.k1, cfg.b, cfg.fuzzy_partial, cfg.upstream_index_text, cfg.graph_doc_aliases, cfg.upstream_stop_words,
               cfg.stem)
        idx = self._lexical.get(key)
        if idx is None:
            split = tokenize_stemmed if cfg.stem else tokenize
            tokenizer = partial(split, stop_words=UPSTREAM_STOP_WORDS) if cfg.upstream_stop_words else split
            idx = BM25Index(k1=cfg.k1, b=cfg.b, fuzzy_boost=cfg.fuzzy_boost, fuzzy_partial=cfg.fuzzy_partial,
                            tokenizer=tokenizer)
            if cfg.upstream_index_text or cfg.upstream_stop_words or cfg.stem:
                # other texts or tokens than the shared term counts: tokenized here
                idx.add_many((d, self._lexical_text(d, cfg.upstream_index_text)) for d in list(self._memories))
                idx.add_many(self._graph_docs_for(cfg.graph_doc_aliases).items())
                self._lexical[key] = idx
                return idx
            if self._terms is None:  # the corpus tokenized once, as one matrix every index adopts
                mems = self._memories
                self._terms, self._touched = TermCounts.build(list(mems), mems.texts()), {}
            # the counts, less what changed since, then the rest as texts
            idx.add_counts(self._terms)
            touched = list(self._touched)
            idx.remove(touched)
            idx.add_many((d, self._memories[d].text) for d in touched if d in self._memories)
            idx.add_many(self._graph_docs_for(cfg.graph_doc_aliases).items())
            self._lexical[key] = idx
        return idx

    def add(self, memories: Iterable[Memory], vectors: NDArray[np.float32] | None = None, *,
            index: VectorIndex | None = None, terms: TermCounts | None = None) -> None:
        """Add or replace memories. ``vectors`` (one row per memory) skips embedding;
        otherwise the embedder encodes the texts, and a failure leaves them without
        vectors (lexical-only for those memories) rather than raising. ``index``: instead of
        ``vectors``, an index holding exactly these memories' vectors (a rehydration's): a
        Recaller without vectors takes it as its own, so a loaded matrix is never copied
        (its rows follow the memories' order, :meth:`VectorIndex.in_order`); otherwise its
        rows are upserted like ``vectors``. ``terms``: the recall tokens' counts of these
        memories or of the first of them (a store's terms sidecar), which an empty
        Recaller's lexical indexes adopt instead of tokenizing those texts. A
        :class:`~memofs.files.memory_table.MemoryTable` (a load's) given to an empty
        Recaller is adopted: its records are built only when read."""
        if index is not None and vectors is not None:
            raise ValueError("give vectors or an index, not both")
        table = memories if isinstance(memories, MemoryTable) and not self._memories else None
        mems: Sequence[Memory] = table if table is not None else list(memories)
        # column-wise (map, not a loop per memory): a start adds every memory at once
        if table is not None:
            ids, texts = table.ids, table.texts
        else:
            ids, texts = list(map(attrgetter("id"), mems)), list(map(attrgetter("text"), mems))
        if not (all(ids) and all(map(isinstance, texts, repeat(str)))):
            bad = next(m for m in mems if not isinstance(m.text, str) or not m.id)
            raise ValueError(f"memory {bad.id!r}: needs a non-empty id and str text")
        if terms is not None and terms.ids != tuple(ids[:len(terms)]):
            raise ValueError("term counts must cover the first of the memories given, in order")
        if terms is not None and not self._memories and not self._lexical:
            self._terms, self._touched = terms, dict.fromkeys(ids[len(terms):])
        elif self._terms is not None:
            self._touched.update(dict.fromkeys(ids))
        if table is not None:
            self._memories.adopt(table)
        else:
            self._memories.set_many(ids, mems)
        if self._lexical or self._rerank_index is not None:  # built on first use otherwise
            pairs = list(zip(ids, texts))
            for key, idx in self._lexical.items():
                idx.add_many([(d, self._lexical_text(d, True)) for d in ids] if key[3] else pairs)
            if self._rerank_index is not None:
                self._rerank_index.add_many(pairs)
        if index is not None and mems:
            if self._vectors is None and len(index) == len(self._memories) == len(mems):
                self._vectors = index.in_order(ids)
                self._invalidate()
                return
            vectors = index.vectors_of(ids)
        if vectors is None and mems and self.embedder.available:
            vectors = self.embedder.encode(texts)
        if vectors is not None and len(mems):
            vectors = np.asarray(vectors, dtype=np.float32)
            if self._vectors is None:
                self._vectors = VectorIndex(vectors.shape[1])
            self._vectors.upsert(ids, vectors)
        self._invalidate()

    def remove(self, ids: Iterable[str]) -> None:
        ids = [i for i in ids if i in self._memories]
        for i in ids:
            del self._memories[i]
        if self._terms is not None:
            self._touched.update(dict.fromkeys(ids))
        for idx in self._lexical.values():
            idx.remove(ids)
        if self._rerank_index is not None:
            self._rerank_index.remove(ids)
        if self._vectors is not None:
            self._vectors.remove(ids)
        self._invalidate()

    def disable_vectors(self) -> None:
        """Go lexical-only (zero-key tier 2): drop the embedder and any stored vectors."""
        self.embedder = SafeEmbedder(None)
        self._vectors = None
        self._invalidate()

    def set_phrase_sources(self, sources: Mapping[str, str]) -> None:
        """The texts of ``core.md`` and ``notes.md`` (``{"core": ..., "notes": ...}``) that
        recall phrase-scans into its lexical candidates (upstream-facts section 2;
        :mod:`memofs.signals.phrase_scan`; switched by ``RecallConfig.use_phrase_scan``)."""
        self.phrases = PhraseScanner(sources)

    def refresh_graph(self) -> None:
        """Re-index the graph's active nodes as ``graph:<id>`` BM25 documents."""
        old = list(self._graph_docs)
        self._graph_docs = dict(self.graph.bm25_documents())
        for key, idx in self._lexical.items():
            idx.remove(old)
            idx.add_many(self._graph_docs_for(key[4]).items())
        if self._rerank_index is not None:
            self._rerank_index.remove(old)
            self._rerank_index.add_many(self._graph_docs.items())
        self._invalidate()

    def _invalidate(self) -> None:
        self._columns.clear()
        self._rerank_rows = None
        self._superseded_by = None

    def superseded_by(self) -> dict[str, tuple[str, ...]]:
        """Superseded memory id -> what supersedes it (spec "Entity-boost": the pipeline
        tracks which items have been superseded), in memory order:

        * memory level: a memory of this corpus lists the id in ``supersedes``
          (``remember --supersedes``); the superseder's id is given;
        * graph level: an active ``supersedes`` edge ``A -> B`` where the memory is linked
          to entity ``B`` (its ``metadata["entities"]``, the node ids it states, as the
          datasets and upstream's source refs link them) and not to ``A`` (a memory that
          names both states the change itself); given as ``"graph:A"``.

        A memory never supersedes itself. Cached until the corpus or the graph changes."""
        if self._superseded_by is not None:
            return self._superseded_by
        out: dict[str, dict[str, None]] = {}
        extras = self._memories.with_extras()  # the others supersede nothing and link no entity
        for m in extras:
            for old in m.supersedes:
                if old != m.id and old in self._memories:
                    out.setdefault(old, {})[m.id] = None
        replaced: dict[str, list[str]] = {}  # superseded node -> superseding nodes
        for e in self.graph.edges:
            if e.type == SUPERSEDES and e.status == "active":
                replaced.setdefault(e.target, []).append(e.source)
        if replaced:
            for m in extras:
                ents = m.metadata.get("entities") if m.metadata else None
                if not ents:
                    continue
                linked = set(ents)
                for node in ents:
                    for newer in replaced.get(node, ()):
                        if newer not in linked:
                            out.setdefault(m.id, {})[f"{GRAPH_PREFIX}{newer}"] = None
        order = {d: i for i, d in enumerate(self._memories)} if out else {}
        self._superseded_by = {d: tuple(out[d]) for d in sorted(out, key=order.__getitem__)}
        return self._superseded_by

    # --- signals --------------------------------------------------------------------
    def _layout(self, idx: BM25Index) -> _CorpusColumns:
        """Query-independent columns aligned with ``idx.ids`` (cached until the corpus changes)."""
        cols = self._columns.get(id(idx))
        if cols is None:
            cols = _CorpusColumns.build(idx, self._memories, self._vectors, self.superseded_by())
            self._columns[id(idx)] = cols
        return cols

    def _rerank_all(self, text: str, ids: tuple[str, ...]) -> NDArray[np.float64]:
        """The fallback reranker's overlap for every document, aligned with ``ids``
        (:meth:`DeterministicFallbackReranker.corpus_index`: equal, bit for bit, to its
        :meth:`~DeterministicFallbackReranker.score` of each text)."""
        assert isinstance(self.reranker, DeterministicFallbackReranker)  # frame.rerank_ok says so
        if self._rerank_index is None:
            self._rerank_index = self.reranker.corpus_index()
            self._rerank_index.add_many(self._texts())
            self._rerank_rows = None
        # lexical indexes of different (k1, b) may order the same documents differently
        if self._rerank_rows is None or self._rerank_rows[0] is not ids:
            pos = {d: i for i, d in enumerate(self._rerank_index.ids)}
            self._rerank_rows = (ids, np.fromiter((pos[d] for d in ids), dtype=np.int64, count=len(ids)))
        return self._rerank_index.overlap(text)[self._rerank_rows[1]]

    def _text_of(self, doc_id: str, cfg: RecallConfig | None = None) -> str:
        """The document's text; with ``cfg``, the text its lexical signals and reranker read
        (upstream's document text and graph documents under the parity switches)."""
        mem = self._memories.get(doc_id)
        if mem is not None:
            return self._lexical_text(doc_id, True) if cfg is not None and cfg.upstream_index_text else mem.text
        graph = self._graph_docs if cfg is None else self._graph_docs_for(cfg.graph_doc_aliases)
        return graph.get(doc_id) or self.phrases.text_of(doc_id) or ""

    def _now(self, now: datetime | None) -> datetime:
        if now is not None:
            return now
        if self.clock is None:
            raise ValueError("recall needs 'now': pass now=... or give the Recaller a clock")
        return self.clock()

    def query_text(self, query: str, task_type: str | None = None, cfg: RecallConfig | None = None):
        """The rewritten recall query and the resolved entities (spec "Task-aware biasing",
        "Entity-boost"): entities resolved on the expanded terms feed their terms back.
        ``cfg.entity_match`` picks the resolution rule (recall tokens, or upstream's raw
        substrings, see :meth:`EntityGraph.resolve_entities`)."""
        cfg = cfg or self.config
        task = task_type or cfg.task_type
        rq = rewrite_query(query, task, use_task=cfg.use_rewrite, use_lexicon=cfg.use_lexicon)
        resolved = (self.graph.resolve_entities(rq.expanded_terms, match=cfg.entity_match)
                    if self.graph.active_nodes() else [])
        if resolved and cfg.use_entity_boost:
            rq = rewrite_query(query, task, use_task=cfg.use_rewrite, use_lexicon=cfg.use_lexicon, extra_terms=self.graph.expansion_terms(resolved))
        return rq, resolved

    def signals(
        self,
        query: str,
        *,
        task_type: str | None = None,
        now: datetime | None = None,
        config: RecallConfig | None = None,
        profile: dict[str, float] | None = None,
    ) -> SignalFrame:
        """Every signal of every document for ``query`` (see :class:`SignalFrame`).

        ``profile``, when given, accumulates seconds per stage (the benchmarks read it).
        Online :meth:`recall` computes the rerank overlap and the anchor drift for its
        candidate pool only; this frame has them for every document (the harness caches it).
        """
        cfg = config or self.config
        stage = _Stopwatch(profile)
        frame, cols = self._extract(query, task_type, now, cfg, stage, context=True, k=cfg.top_k)
        if frame.rerank_ok and (cfg.upstream_index_text or not cfg.graph_doc_aliases):
            # the corpus overlap index holds memofs's texts: other texts are scored one by one
            with stage("rerank overlap"):
                self._rerank_pool(frame, cfg.replace(use_reranker=True), np.arange(len(frame)))
        elif frame.rerank_ok:
            with stage("rerank overlap"):
                n = len(cols.ids)
                frame.rerank[:n] = self._rerank_all(frame.query_text, cols.ids)
                if len(frame) > n:  # phrase-scan blocks are not in the corpus's overlap index
                    self._rerank_pool(frame, cfg.replace(use_reranker=True), np.arange(n, len(frame)))
        self._drift(frame, cols, np.arange(len(frame)), stage)
        return frame

    def _extract(self, query: str, task_type: str | None, now: datetime | None, cfg: RecallConfig,
                 stage: _Stopwatch, context: bool, k: int) -> tuple[SignalFrame, _CorpusColumns]:
        """The frame with every signal the pools need (lexical, cosine, age, ...), and the
        corpus columns; the rerank overlap (NaN) and drift (False) wait for
        :meth:`signals` or the pool. ``context``: attach the corpus's
        :class:`~memofs.signals.frame.ContextColumns` (only the learned fusion reads them).
        ``k``: the result count, which sizes the phrase scan (top ``ceil(k *
        lexical_pool_multiplier)`` blocks per file, upstream's ``K*2``)."""
        if not isinstance(query, str):
            raise TypeError(f"query must be str, got {type(query).__name__}")
        now = self._now(now)
        with stage("rewrite + entities"):
            rq, resolved = self.query_text(query, task_type, cfg)
        text = rq.text
        with stage("frame build"):
            idx = self._lexical_index(cfg)
            cols = self._layout(idx)
            ids = cols.ids
            age = np.subtract(now.timestamp(), cols.created_ts)  # in place: one array, not three
            age /= 86400.0
            np.maximum(age, 0.0, out=age)
            n = len(ids)
        with stage("lexical (BM25 + fuzzy)"):
            lex = idx.score(text)
        cosine: NDArray[np.float64] | None = None
        vector_ok = False
        notes: list[str] = []
        if self._vectors is not None and len(self._vectors) and text.strip():
            with stage("query embedding"):
                qv = self.embedder.encode([text])
            if qv is None:
                notes.append(f"embedder {self.embedder.name} failed: lexical only")
            else:
                vector_ok = True
                with stage("vector cosine"):
                    cosine = cols.cosines(self._vectors.row_scores(qv[0]))
        elif not self.embedder.available:
            notes.append("no embedder: lexical only")
        with stage("frame build"):
            frame = SignalFrame(
                ids=ids, order_key=cols.order_key, bm25=lex.bm25, fuzzy=lex.fuzzy,
                cosine=cosine if cosine is not None else np.full(n, np.nan), rerank=np.full(n, np.nan),
                age_days=age, confidence=cols.confidence, kind=cols.kind, stale=np.zeros(n, dtype=bool),
                is_graph=cols.is_graph, query_text=text, vector_ok=vector_ok,
                rerank_ok=isinstance(self.reranker, DeterministicFallbackReranker) and bool(text.strip()),
                entities=tuple(resolved), notes=notes, context=cols.context if context else None,
                superseded=cols.superseded,
            )
        # the learned fusion's features know nothing of blocks: it scores the corpus alone
        if self.phrases and cfg.fusion == "formula":
            with stage("phrase scan"):
                hits = self.phrases.scan(query, math.ceil(k * cfg.lexical_pool_multiplier))
                frame = with_phrase_rows(frame, [h for h in hits if h.block.id not in self._memories])
        return frame, cols

    def _drift(self, frame: SignalFrame, cols: _CorpusColumns, rows: NDArray[np.int64], stage: _Stopwatch) -> None:
        """Mark the anchored documents among ``rows`` whose anchors drifted (spec drift)."""
        if self.anchors.root is None or not cols.anchored.any():
            return
        rows = rows[rows < len(cols.ids)]  # phrase-scan blocks have no anchors
        with stage("anchor check"):
            for i in rows[cols.anchored[rows]].tolist():
                drift = self.anchors.drift(self._memories[frame.ids[i]].anchors)
                if drift is not None:
                    frame.stale[i] = True
                    frame.stale_reasons[frame.ids[i]] = str(drift)

    # --- recall ---------------------------------------------------------------------
    def _rerank_pool(self, frame: SignalFrame, cfg: RecallConfig, rows: NDArray[np.int64]) -> None:
        """Score the candidate pool with the reranker; a failing reranker skips the fold."""
        if not cfg.use_reranker or rows.size == 0 or not frame.query_text.strip():
            return
        texts = [self._text_of(frame.ids[r], cfg) for r in rows.tolist()]
        try:
            scores = np.asarray(self.reranker.score(frame.query_text, texts), dtype=np.float64)
            if scores.shape != (rows.size,):
                raise ValueError(f"reranker returned shape {scores.shape}, expected ({rows.size},)")
        except Exception as exc:  # a failing reranker never breaks recall
            log.warning("reranker %s failed (%s); fold skipped", getattr(self.reranker, "name", "?"), exc)
            frame.notes.append(f"reranker failed: {exc}")
            frame.rerank_ok = False
            return
        frame.rerank[rows] = scores
        frame.rerank_ok = True

    def _rerank_rows_of(self, frame: SignalFrame, cfg: RecallConfig, pool: Pools) -> NDArray[np.int64]:
        """The pool rows the reranker scores: all of them for a corpus reranker (the spec's
        fold over every candidate); for a model reranker, the top ``cfg.rerank_top_n`` of the
        fused pool (its order before the fold, ties by id), ascending."""
        rows = pool.rows
        if getattr(self.reranker, "scores_corpus", True) or rows.size <= cfg.rerank_top_n or not cfg.use_reranker:
            return rows
        first = fuse(frame, cfg, rows.size, candidates=pool)
        return np.sort(first.rows[:cfg.rerank_top_n])

    def recall(
        self,
        query: str,
        k: int | None = None,
        *,
        task_type: str | None = None,
        now: datetime | None = None,
        explain: bool = False,
        config: RecallConfig | None = None,
        profile: dict[str, float] | None = None,
    ) -> list[RecallResult]:
        """The top ``k`` memories for ``query`` (default ``config.top_k``); ``profile`` as in
        :meth:`signals`. The candidate pools come first; the rerank overlap and the anchor
        check then run on the pool alone (they never change which documents are in it)."""
        cfg = config or self.config
        k = cfg.top_k if k is None else k
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        stage = _Stopwatch(profile)
        frame, cols = self._extract(query, task_type, now, cfg, stage, context=cfg.fusion == "learned", k=k)
        with stage("fusion"):
            pool = pools(frame, cfg, k)
        blend_ready = frame.rerank_ok
        self._drift(frame, cols, pool.rows, stage)  # first: a model reranker's top N is read after the penalties
        with stage("rerank overlap"):
            self._rerank_pool(frame, cfg, self._rerank_rows_of(frame, cfg, pool))
        with stage("fusion"):
            # a model reranker turns the blend on only now: the weights are then recomputed
            fused = fuse(frame, cfg, k, candidates=pool if frame.rerank_ok == blend_ready else None)
        with stage("results"):
            return self._results(frame, fused, explain)

    def _results(self, frame: SignalFrame, fused: Fused, explain: bool) -> list[RecallResult]:
        out = []
        for pos, row in enumerate(fused.rows.tolist()):
            doc_id = frame.ids[row]
            mem = self._memories.get(doc_id)
            text = self._text_of(doc_id)
            source = "memory" if mem is not None else "graph" if doc_id in self._graph_docs else self.phrases.source_of(doc_id)
            out.append(RecallResult(doc_id, text, float(fused.scores[pos]), mem,
                                    explain_row(frame, fused, pos, self.superseded_by()) if explain else None, source))
        return out


def with_phrase_rows(frame: SignalFrame, hits: list[PhraseHit]) -> SignalFrame:
    """``frame`` with one row per phrase-scan hit appended (upstream-facts section 2): the
    block's lexical score ``score / 10`` in the ``bm25`` column (fuzzy 0), no vector, no
    age (recency 0.5) and no confidence (the default), kind "other", ``is_phrase`` set.
    Every row's ``order_key`` is re-ranked over the longer id list (ties by id)."""
    if not hits:
        return frame
    m = len(hits)
    ids = frame.ids + tuple(h.block.id for h in hits)
    order_key = np.empty(len(ids), dtype=np.int64)
    order_key[np.argsort(np.asarray(ids, dtype=object), kind="stable")] = np.arange(len(ids))

    def ext(a: NDArray, fill: Any) -> NDArray:
        return np.concatenate([a, np.full(m, fill, dtype=a.dtype)])

    return SignalFrame(
        ids=ids, order_key=order_key,
        bm25=np.concatenate([frame.bm25, np.array([h.lexical for h in hits])]), fuzzy=ext(frame.fuzzy, 0.0),
        cosine=ext(frame.cosine, np.nan), rerank=ext(frame.rerank, np.nan), age_days=ext(frame.age_days, np.nan),
        confidence=ext(frame.confidence, np.nan), kind=ext(frame.kind, OTHER_KIND), stale=ext(frame.stale, False),
        is_graph=ext(frame.is_graph, False), query_text=frame.query_text, vector_ok=frame.vector_ok,
        rerank_ok=frame.rerank_ok, stale_reasons=frame.stale_reasons, entities=frame.entities, notes=frame.notes,
        context=None, superseded=ext(frame.superseded, False), is_phrase=ext(frame.is_phrase, True),
    )


def explain_row(frame: SignalFrame, fused: Fused, pos: int,
                superseded_by: dict[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Every signal, weight and penalty behind one result (``recall(explain=True)``);
    ``superseded_by``: :meth:`Recaller.superseded_by`, for the supersession penalty's reason."""
    p = {name: v[pos] for name, v in fused.parts.items()}
    doc_id = frame.ids[int(fused.rows[pos])]
    w = fused.weights

    def num(x: Any) -> float | None:
        x = float(x)
        return None if np.isnan(x) else round(x, 6)

    penalties = []
    if p["stale"]:
        penalties.append({"name": "stale_anchor", "factor": float(p["stale_factor"]), "reason": frame.stale_reasons.get(doc_id, "anchor drifted")})
    if p["unverified"]:
        penalties.append({"name": "unverified_kind", "factor": float(p["unverified_factor"]), "reason": "older than its kind's expiry floor"})
    if p.get("superseded", False):  # the learned fusion has no supersession term
        by = (superseded_by or {}).get(doc_id, ())
        penalties.append({"name": "superseded", "factor": float(p["superseded_factor"]),
                          "reason": "superseded by " + ", ".join(by) if by else "superseded"})
    return {
        "signals": {
            "bm25": num(p["bm25"]), "fuzzy": num(p["fuzzy"]), "lexical": num(p["lexical"]),
            "lexical_saturated": num(p["lexical_saturated"]), "cosine": num(p["cosine"]), "rerank": num(p["rerank"]),
            "recency": num(p["recency"]), "confidence": num(p["confidence"]),
        },
        "weights": {
            "w_vec": w.w_vec, "w_lex": w.w_lex, "dynamic": w.reason, "rerank_blend": w.rerank_blend,
            "w_relevance": w.w_relevance, "w_recency": w.w_recency, "w_confidence": w.w_confidence,
        },
        "components": {
            "base_before_rerank": num(p["base_before_rerank"]), "base": num(p["base"]),
            "composite": num(p["composite"]), "penalty_factor": num(p["penalty"]), "final": float(fused.scores[pos]),
        },
        "penalties": penalties,
        "pools": {"vector": bool(p["vector_pool"]), "lexical": bool(p["lexical_pool"])},
        "query": frame.query_text,
    }


@dataclass(frozen=True)
class _CorpusColumns:
    """Per-document columns that do not depend on the query, aligned with a BM25 index."""

    ids: tuple[str, ...]
    order_key: NDArray[np.int64]
    created_ts: NDArray[np.float64]  # POSIX seconds; NaN when unknown (recency then 0.5)
    confidence: NDArray[np.float64]
    kind: NDArray[np.int64]
    is_graph: NDArray[np.bool_]
    vector_rows: NDArray[np.int64]  # row in the vector index, -1 when the document has none
    anchored: NDArray[np.bool_]  # the memory has code anchors (drift can apply)
    namespaces: tuple[str | None, ...] = ()  # None for a graph document
    texts: tuple[str, ...] = ()
    superseded: NDArray[np.bool_] | None = None  # another memory supersedes it (Recaller.superseded_by); None: none

    @cached_property
    def context(self) -> ContextColumns:
        """Session neighbours and text facts (:func:`memofs.signals.frame.context_columns`), built
        on first use: online recall needs them only for the learned fusion."""
        return context_columns(self.ids, self.namespaces, self.created_ts, self.texts, lazy_text=True)

    @cached_property
    def _vector_layout(self) -> tuple[int, int] | NDArray[np.int64]:
        """How vector rows map onto ``ids``: ``(start, m)`` when documents ``start ..
        start+m-1`` hold vector rows ``0 .. m-1`` and no other document has one (graph
        documents first, then every memory: the usual corpus), else the documents that have one."""
        has = np.flatnonzero(self.vector_rows >= 0)
        m = has.size
        if m and has[-1] - has[0] == m - 1 and np.array_equal(self.vector_rows[has], np.arange(m)):
            return int(has[0]), m
        return has

    def cosines(self, row_scores: NDArray[np.float32]) -> NDArray[np.float64]:
        """Vector-index scores (row order) as a column aligned with ``ids``; NaN without a vector."""
        out = np.full(len(self.ids), np.nan)
        lay = self._vector_layout
        if isinstance(lay, tuple):  # a block copy instead of a gather
            start, m = lay
            out[start:start + m] = row_scores[:m]
        else:
            out[lay] = row_scores[self.vector_rows[lay]]
        return out

    @classmethod
    def build(cls, idx: BM25Index, memories: MemoryMap, vectors: VectorIndex | None,
              superseded: Iterable[str] = ()) -> _CorpusColumns:
        ids = idx.ids
        n = len(ids)
        # gathered column-wise (MemoryMap.columns): the first recall of a start builds this
        # for every memory, and a rehydrated store's records are never built for it
        c = memories.columns(ids)
        is_graph = ~c.is_record
        kind = np.fromiter(map(KIND_CODES.get, c.kinds, repeat(OTHER_KIND)), dtype=np.int64, count=n)
        kind[is_graph] = KIND_CODES.get("graph", OTHER_KIND)
        rows = vectors.rows_of(ids) if vectors is not None else np.full(n, -1, dtype=np.int64)
        old = set(superseded)
        sup = np.fromiter(map(old.__contains__, ids), dtype=bool, count=n)
        return cls(ids, idx.score([]).order_key, c.created_ts, c.confidence, kind, is_graph, rows, c.anchored,
                   tuple(c.namespaces), tuple(c.texts), sup)
