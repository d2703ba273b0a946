"""Per-query, per-candidate signals: the *extraction* half of the pipeline.

A :class:`SignalFrame` holds one row per document of a corpus for one query: raw BM25,
fuzzy overlap, cosine, rerank overlap, age, confidence, kind, drift and graph flags. It is
produced once per (query, signal settings) by :meth:`memofs.ranking.recall.Recaller.signals` and
combined by :func:`memofs.ranking.fusion.fuse`, online and in the harness alike.

It also carries query-independent *context* columns (:class:`ContextColumns`, from
:func:`context_columns`): each memory's neighbours in its session, and facts about its text.
Only the learned fusion reads them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from memofs.files.records import MEMORY_KINDS
from memofs.text.tokenize import tokenize_simple

#: kind codes: the seven upstream kinds, then "other" (graph documents, unknown kinds)
KIND_CODES: dict[str, int] = {k: i for i, k in enumerate(MEMORY_KINDS)}
OTHER_KIND = len(MEMORY_KINDS)


def kind_code(kind: str) -> int:
    return KIND_CODES.get(kind, OTHER_KIND)


# --------------------------------------------------------------------------- context columns

_DIGITS = re.compile(r"(\d+)")
#: a memory that mentions a moment: relative expressions, weekdays, month names, years
TIME_MENTION = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|recently|weekend|"
    r"last\s+(night|week|month|year|weekend|summer|winter|spring|fall|time)|next\s+(week|month|year|weekend)|"
    r"this\s+(week|month|year|weekend|morning|evening)|(19|20)\d\d|"
    r"january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.I,
)
#: :data:`TIME_MENTION` behind a lookahead on the first characters its alternatives can
#: start with (under the same ``re.I``): the same matches, but most positions fail at one
#: character class instead of trying some thirty branches (about twice as fast per text)
_TIME_SCAN = re.compile(r"(?=[ytarwlnjfmsod12])" + TIME_MENTION.pattern, re.I)


def natural_key(doc_id: str) -> tuple[str | int, ...]:
    """``"D1:10"`` -> ``("D", 1, ":", 10, "")``: digit runs compare as numbers (``re.split`` with a
    group alternates text and digits, so any two keys compare)."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(_DIGITS.split(doc_id)))


@dataclass(frozen=True)
class ContextColumns:
    """Query-independent per-document context, aligned with a corpus.

    * ``session``: a code per (namespace, UTC calendar day of ``created_at``); a document
      without ``created_at`` (or a graph document) is a session of its own.
    * ``prev_row`` / ``next_row``: the document remembered just before / after in the same
      session, in the order ``(created_at, natural id, id)``; -1 at a session's ends.
    * ``n_words``: words of the text (:func:`memofs.text.tokenize.tokenize_simple`); ``is_question``: the text contains ``?``;
      ``has_time``: the text mentions a moment (:data:`TIME_MENTION`).
    """

    prev_row: NDArray[np.int64]
    next_row: NDArray[np.int64]
    session: NDArray[np.int64]
    n_words: NDArray[np.float64]
    is_question: NDArray[np.bool_]
    has_time: NDArray[np.bool_]

    def take(self, rows: NDArray[np.int64], n: int) -> ContextColumns:
        """Restricted to ``rows`` of an ``n``-row corpus; a neighbour left out becomes -1."""
        pos = np.full(n + 1, -1, dtype=np.int64)  # pos[-1] == -1 keeps "none" as none
        pos[rows] = np.arange(rows.size)
        n_words, has_time = self.text_facts(rows)
        return ContextColumns(pos[self.prev_row[rows]], pos[self.next_row[rows]], self.session[rows],
                              n_words, self.is_question[rows], has_time)

    def text_facts(self, rows: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """``(n_words[rows], has_time[rows])``."""
        return self.n_words[rows], self.has_time[rows]


class _LazyTextContext(ContextColumns):
    """A :class:`ContextColumns` whose ``n_words`` and ``has_time`` are computed from the texts
    only for the rows asked (:meth:`text_facts`: a recall's candidates), each row once; reading
    either column whole computes the rest. The values are those :func:`context_columns` gives."""

    def __init__(self, prev_row: NDArray[np.int64], next_row: NDArray[np.int64], session: NDArray[np.int64],
                 is_question: NDArray[np.bool_], texts: Sequence[str]) -> None:
        n = len(texts)
        for name, value in (("prev_row", prev_row), ("next_row", next_row), ("session", session),
                            ("is_question", is_question), ("_texts", texts), ("_words", np.zeros(n)),
                            ("_time", np.zeros(n, dtype=bool)), ("_known", np.zeros(n, dtype=bool))):
            object.__setattr__(self, name, value)

    def text_facts(self, rows: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        rows = np.asarray(rows, dtype=np.int64)
        new = rows[~self._known[rows]]
        if new.size:
            new = np.unique(new)
            texts = [self._texts[i] for i in new.tolist()]
            self._words[new] = [len(tokenize_simple(t)) for t in texts]
            self._time[new] = [_TIME_SCAN.search(t) is not None for t in texts]
            self._known[new] = True
        return self._words[rows], self._time[rows]

    @property  # type: ignore[override]
    def n_words(self) -> NDArray[np.float64]:
        return self.text_facts(np.arange(len(self._texts)))[0]

    @property  # type: ignore[override]
    def has_time(self) -> NDArray[np.bool_]:
        return self.text_facts(np.arange(len(self._texts)))[1]


def context_columns(ids: Sequence[str], namespaces: Sequence[str | None], created_ts: NDArray[np.float64],
                    texts: Sequence[str], *, lazy_text: bool = False) -> ContextColumns:
    """:class:`ContextColumns` of a corpus (``namespaces[i]`` None: a graph document;
    ``created_ts``: POSIX seconds, NaN when unknown). Natural id keys are computed only to
    break ties of equal ``created_at`` within a session (a store's turns saved together).
    ``lazy_text``: word counts and time mentions computed only for the rows read
    (:meth:`ContextColumns.text_facts`; online recall reads its candidates' alone)."""
    n = len(ids)
    ts = np.asarray(created_ts, dtype=np.float64)
    day = np.floor(np.nan_to_num(ts) / 86400.0)
    keys: dict[tuple, int] = {}
    session = np.fromiter(
        (keys.setdefault((None, i) if namespaces[i] is None or math.isnan(ts[i]) else (namespaces[i], day[i]), len(keys)) for i in range(n)),
        dtype=np.int64, count=n)
    id_rank = np.empty(n, dtype=np.int64)
    id_rank[np.argsort(np.asarray(ids, dtype=object), kind="stable")] = np.arange(n)
    ts0 = np.nan_to_num(ts)
    order = np.lexsort((id_rank, ts0, session))
    s_o, t_o = session[order], ts0[order]
    starts = np.flatnonzero(np.r_[True, (s_o[1:] != s_o[:-1]) | (t_o[1:] != t_o[:-1])])
    lengths = np.diff(np.r_[starts, n])
    for a, m in zip(starts[lengths > 1].tolist(), lengths[lengths > 1].tolist(), strict=True):
        order[a:a + m] = sorted(order[a:a + m].tolist(), key=lambda i: (natural_key(ids[i]), ids[i]))
    prev_row = np.full(n, -1, dtype=np.int64)
    next_row = np.full(n, -1, dtype=np.int64)
    linked = np.flatnonzero(session[order][1:] == session[order][:-1])
    prev_row[order[linked + 1]] = order[linked]
    next_row[order[linked]] = order[linked + 1]
    if lazy_text:
        return _LazyTextContext(prev_row, next_row, session, np.array(["?" in t for t in texts], dtype=bool), texts)
    return ContextColumns(
        prev_row, next_row, session,
        np.array([len(tokenize_simple(t)) for t in texts], dtype=np.float64),
        np.array(["?" in t for t in texts], dtype=bool),
        np.array([_TIME_SCAN.search(t) is not None for t in texts], dtype=bool),
    )


@dataclass
class SignalFrame:
    """Columnar signals, every array aligned with ``ids``.

    Missing values are NaN: ``cosine`` (no vector for that document, or no query vector),
    ``rerank`` (reranker unavailable, failed, or not run for that document), ``age_days``
    (no ``created_at``), ``confidence`` (not given).

    ``superseded``: another memory of the corpus supersedes this one (its ``supersedes``
    ids, or a graph ``supersedes`` edge onto one of its entities; see
    :meth:`memofs.ranking.recall.Recaller.superseded_by`). ``is_phrase``: the row is a block
    of ``core.md`` / ``notes.md`` found by the phrase scan (:mod:`memofs.signals.phrase_scan`),
    whose ``bm25`` column holds the block score / 10 (fuzzy 0). Both default to all False.
    """

    ids: tuple[str, ...]
    order_key: NDArray[np.int64]
    bm25: NDArray[np.float64]
    fuzzy: NDArray[np.float64]
    cosine: NDArray[np.float64]
    rerank: NDArray[np.float64]
    age_days: NDArray[np.float64]
    confidence: NDArray[np.float64]
    kind: NDArray[np.int64]
    stale: NDArray[np.bool_]
    is_graph: NDArray[np.bool_]
    query_text: str = ""
    vector_ok: bool = False
    rerank_ok: bool = False
    stale_reasons: dict[str, str] = field(default_factory=dict)
    entities: tuple = ()
    notes: list[str] = field(default_factory=list)
    context: ContextColumns | None = None  # None: not computed (learned context features are then 0)
    superseded: NDArray[np.bool_] | None = None  # None: no row is (filled in by __post_init__)
    is_phrase: NDArray[np.bool_] | None = None

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.superseded is None:
            self.superseded = np.zeros(n, dtype=bool)
        if self.is_phrase is None:
            self.is_phrase = np.zeros(n, dtype=bool)

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows: NDArray[np.int64]) -> SignalFrame:
        """The frame restricted to ``rows`` (e.g. a query's scoped corpus)."""
        arr = {
            name: getattr(self, name)[rows]
            for name in ("order_key", "bm25", "fuzzy", "cosine", "rerank", "age_days", "confidence", "kind", "stale", "is_graph",
                         "superseded", "is_phrase")
        }
        ids = tuple(self.ids[i] for i in rows.tolist())
        keep = set(ids)
        return SignalFrame(
            ids=ids,
            **arr,
            query_text=self.query_text,
            vector_ok=self.vector_ok,
            rerank_ok=self.rerank_ok,
            stale_reasons={k: v for k, v in self.stale_reasons.items() if k in keep},
            entities=self.entities,
            notes=list(self.notes),
            context=self.context.take(rows, len(self)) if self.context is not None else None,
        )
