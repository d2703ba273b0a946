"""Measures no ranked-list metric gives: what survives the byte-budgeted context briefing,
and whether outdated memories (superseded, stale anchor, expired kind) outrank current ones.

Every measure is a pure function of one query's ranked ids and its :class:`QueryFacts`;
:func:`per_query` evaluates them next to the ranx metrics, so the harness's means,
bootstrap CIs and paired tests apply unchanged. Metric names (``@`` parameter optional):

- ``briefing_recall@B`` (B bytes, default 8192): relevant memories (qrel >= 1) shown whole
  in the briefing / relevant memories; 0 when the query has none.
- ``briefing_hit@B``: 1 when at least one relevant memory is shown whole, else 0.
- ``bytes_to_first_relevant@B``: UTF-8 byte offset in the briefing where the text of the
  first whole relevant memory starts; **B when none is shown** (lower is better). B is
  worse than any real offset (every shown byte lies before B), so a system that shows
  nothing relevant is never rewarded, and every query keeps a value, which the paired
  tests and bootstrap CIs need (a NaN would drop exactly the failures from the mean).
- ``superseded_above_current``: over the pairs (old, cur) where ``cur`` is the current
  (itself unsuperseded) end of a supersedes chain through ``old``, a pair is *in play* when
  each of its two memories is in the ranked list or judged for the query; the query
  scores 1 when some in-play pair has ``rank(old) < rank(cur)`` (a memory missing from the
  list ranks after all), else 0; NaN (not counted) when no pair is in play. Its mean is
  the share of those queries where an outdated fact outranks its replacement (lower is better).
- ``stale_in_top_k@k`` (default 10): (stale-anchor or expired-kind memories among the
  top k) / k; NaN when no *fresh* relevant memory (neither stale nor expired) exists,
  since then no ranking could avoid them (lower is better).
- ``current_first``: 1 when the first relevant memory in the ranked list is *current*
  (not superseded, not stale, not expired), 0 otherwise (also when none is ranked); NaN
  when the query's relevant memories are not a mix of current and outdated ones.

Metrics of the field (LongMemEval, Wu et al., ICLR 2025; the published definitions are
``evaluate_retrieval`` and ``evaluate_retrieval_turn2session`` in ``src/retrieval/eval_utils.py``
of github.com/xiaowu0162/LongMemEval), relevance binary (qrel >= 1), default k = 10:

- ``recall_any@k``: 1 when at least one relevant memory is among the top k, else 0.
- ``recall_all@k``: 1 when every relevant memory is among the top k, else 0.
- ``ndcg_any@k``: binary nDCG with LongMemEval's gain curve, DCG = g_1 + sum_{i=2..k} g_i / log2(i)
  (rank 1 and 2 both weigh 1; ranx's ``ndcg`` uses 1/log2(i+1)), over the ideal DCG of all
  relevant memories; 0 when none is relevant.
- ``session_recall_any@k``, ``session_recall_all@k``, ``session_ndcg_any@k``: the same on the
  session ranking of a turn-level run: each session takes its best (first-ranked) turn's
  place, and a session is relevant when any of its turns is (qrels lifted to sessions). For
  recall_any/all this equals LongMemEval's turn2session (it widens k until k distinct
  sessions are in); its nDCG counts every retrieved turn of a session, ours each session
  once. A memory without session metadata is its own session.

A metric at cutoff k is *trivially* 1 (recall) when the scope holds at most k candidates
(memories, or sessions for the session metrics): :func:`trivial_queries` names them, so a
report can say so.

The briefing is built by the real packer, :func:`memofs.store.briefing.pack`, on the recall
items rendered by :func:`memofs.store.briefing.render_recall`, with ``build_context``'s second
pass (footer reserve and expansion footer) when items are hidden. Differences from a live
``memofs.context`` call, all the same for every method: no core memory, entities, recent
events or notes (the eval corpora have none, so recall gets every remaining byte); every
ranked item is offered (the live compact mode renders only 3, which would make the budget
moot) and B is not clamped at 8192 (so a 16k point is a what-if); the rendered score is
the rank-derived ``(n - rank) / n`` (6 bytes, as the pipeline's scores in [0, 1]), since
peers' scores are on other scales; no ``(stale: ...)`` suffix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING

import pandas as pd

from memofs.signals.anchors import AnchorChecker
from memofs.store.briefing import DIRECTIVE, DIRECTIVE_TITLE, SEPARATOR, TITLES, Negotiable, footer_line, nbytes, pack, render_recall, section_text
from memofs.store.cursor import ContextCache, cache_key
from memofs_datasets.protocols import PROTOCOLS

if TYPE_CHECKING:
    from memofs_datasets.format import Dataset

from memofs_eval.inputs.measure_names import (  # noqa: F401  (re-exported: callers name them through this module)
    DEFAULT_BUDGET, DEFAULT_TOP_K, CURVE_BUDGETS, BRIEFING, TEMPORAL, FIELD, SESSION, PAPER,
    MEASURES, LOWER_IS_BETTER, MIN_BUDGET, Measure, parse, is_measure, lower_is_better,
)
# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class QueryFacts:
    """What the measures know about one query: judgements, memory texts and which
    memories are outdated. Sets name memory ids; ``pairs`` are (superseded, current)."""

    qrels: Mapping[str, int]
    texts: Mapping[str, str] = field(default_factory=dict)
    superseded: frozenset[str] = frozenset()
    stale: frozenset[str] = frozenset()  # an anchored file drifted (modified or deleted)
    expired: frozenset[str] = frozenset()  # older than its kind's expiry floor at the query's "now"
    pairs: tuple[tuple[str, str], ...] = ()
    session: Mapping[str, str] = field(default_factory=dict)  # memory id -> its session (absent: itself)
    family: str = "memofs"  # the protocol's metric definitions (memofs_datasets.protocols)
    evidence: tuple[str, ...] | None = None  # LoCoMo: the question's raw evidence entries (None: not LoCoMo)
    dia: Mapping[str, str] = field(default_factory=dict)  # LoCoMo: memory id -> dia_id

    @property
    def relevant(self) -> frozenset[str]:
        return frozenset(d for d, g in self.qrels.items() if g >= 1)

    def current(self, doc: str) -> bool:
        return doc not in self.superseded and doc not in self.stale and doc not in self.expired


@dataclass(frozen=True)
class Facts:
    """Per-dataset facts: memory texts, supersedes chains, stale anchors, and the expired
    memories of each query's corpus (they depend on the query's "now")."""

    texts: Mapping[str, str]
    superseded: frozenset[str]
    current_of: Mapping[str, frozenset[str]]  # superseded id -> current ends of its chain
    stale: frozenset[str]
    expired: Mapping[str, frozenset[str]]  # query id -> expired ids
    corpus: Mapping[str, frozenset[str]]  # query id -> ids it is asked against
    session: Mapping[str, str] = field(default_factory=dict)  # memory id -> session key (see session_key)
    family: str = "memofs"
    evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # query id -> raw evidence
    dia: Mapping[str, str] = field(default_factory=dict)

    def query(self, qid: str, qrels: Mapping[str, int]) -> QueryFacts:
        corpus = self.corpus.get(qid, frozenset())
        pairs = tuple(sorted((old, cur) for old in self.superseded & corpus for cur in self.current_of[old] if cur in corpus))
        return QueryFacts(qrels, self.texts, self.superseded & corpus, self.stale & corpus,
                          self.expired.get(qid, frozenset()), pairs, self.session, self.family,
                          self.evidence.get(qid), self.dia)


def session_key(memory) -> str | None:
    """The session a memory belongs to, from the loaders' metadata: LongMemEval's
    ``session_index``, LoCoMo's ``session`` number; None when it has none (its own session)."""
    meta = memory.metadata or {}
    if "protocol_session" in meta:  # a protocol preset's own session key (LongMemEval's noans split)
        return f"{memory.namespace}:{meta['protocol_session']}"
    if "session_index" in meta:
        return f"{memory.namespace}:s{meta['session_index']}"
    if "session" in meta:
        return f"{memory.namespace}:session{meta['session']}"
    return None


def current_ends(successors: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """For each superseded id, the ids at the ends of its supersedes chains (not superseded
    themselves). Cycles (not valid data) end where they loop."""
    out: dict[str, frozenset[str]] = {}
    for start in successors:
        ends: set[str] = set()
        seen = {start}
        stack = list(successors[start])
        while stack:
            d = stack.pop()
            if d in seen:
                continue
            seen.add(d)
            nxt = [s for s in successors.get(d, ()) if s not in seen]
            if d not in successors:
                ends.add(d)
            stack.extend(nxt)
        out[start] = frozenset(ends)
    return out


def build_facts(ds: Dataset, expiry_days: Mapping[str, float], queries: Iterable[str] | None = None) -> Facts:
    """Facts of ``ds`` under the expiry floors ``expiry_days`` (days per kind; the spec's
    default ``RecallConfig.kind_expiry_days``). Stale = an anchor's file under the
    memory's own namespace tree hashes differently or is gone (:class:`AnchorChecker`);
    expired = ``age_days > floor(kind)`` at ``ds.now_for(query)``, as fusion decides it."""
    successors: dict[str, list[str]] = {}
    for m in ds.memories:
        for old in m.supersedes:
            successors.setdefault(old, []).append(m.id)
    checkers: dict[str, AnchorChecker] = {}
    stale = set()
    for m in ds.memories:
        if m.anchors:
            chk = checkers.setdefault(m.namespace, AnchorChecker(ds.anchor_root(m.namespace)))
            if chk.drift(m.anchors) is not None:
                stale.add(m.id)
    wanted = set(queries) if queries is not None else None
    expired: dict[str, frozenset[str]] = {}
    corpus: dict[str, frozenset[str]] = {}
    memo: dict[tuple[str | None, datetime], tuple[frozenset[str], frozenset[str]]] = {}
    for q in ds.queries:
        if wanted is not None and q.id not in wanted:
            continue
        key = (q.scope, ds.now_for(q))
        if key not in memo:
            now, mems = key[1], ds.corpus_for(q)
            old = frozenset(m.id for m in mems if m.created_at is not None and m.kind in expiry_days
                            and max(0.0, (now - m.created_at).total_seconds() / 86400.0) > expiry_days[m.kind])
            memo[key] = (old, frozenset(m.id for m in mems))
        expired[q.id], corpus[q.id] = memo[key]
    sessions = {m.id: k for m in ds.memories if (k := session_key(m)) is not None}
    family = PROTOCOLS[ds.stats.get("protocol", "memofs")].family
    # LoCoMo's raw evidence and dia_ids, for its paper's R@k on whatever question set was loaded
    evidence = {q.id: tuple(q.metadata["evidence"]) for q in ds.queries if "evidence" in (q.metadata or {})}
    dia = {m.id: m.metadata["dia_id"] for m in ds.memories if "dia_id" in (m.metadata or {})}
    return Facts(MappingProxyType({m.id: m.text for m in ds.memories}), frozenset(successors),
                 MappingProxyType(current_ends(successors)), frozenset(stale), expired, corpus,
                 MappingProxyType(sessions), family, evidence, MappingProxyType(dia))


# --------------------------------------------------------------------------- briefing


@dataclass(frozen=True)
class BriefingView:
    """A packed briefing and where each memory shown whole starts (UTF-8 byte offset of its text)."""

    text: str
    budget: int
    offsets: Mapping[str, int]  # id -> byte offset, only memories shown whole, rank order

    @property
    def shown(self) -> tuple[str, ...]:
        return tuple(self.offsets)


@dataclass(frozen=True)
class _Item:  # what render_recall reads from a recall result
    text: str
    score: float
    explain: dict | None = None


def briefing(ranked: Sequence[str], texts: Mapping[str, str], budget: int = DEFAULT_BUDGET) -> BriefingView:
    """Pack ``ranked`` (best first) into a ``budget``-byte briefing with the real packer.

    A memory counts as shown when the packer reports its item whole (``SectionInfo.shown``:
    items are taken greedily in rank order, so those are the first ``shown``); an item in
    the omitted outline, or in a truncated section, does not count."""
    n = len(ranked)
    rendered = render_recall([_Item(texts.get(d, ""), (n - r) / n) for r, d in enumerate(ranked)])
    section = [Negotiable("recall", rendered, n)]
    packed = pack("", section, budget)
    footer = ""
    if n and _shown(packed) < n:
        # build_context's second pass: reserve the expansion footer, repack, append it
        cursor = ContextCache(clock=lambda: 0.0, secret=bytes(32)).cursor(cache_key(list(ranked)), "recall")
        reserve = nbytes(SEPARATOR + footer_line("recall", n, cursor))
        if reserve + nbytes(section_text(DIRECTIVE_TITLE, DIRECTIVE)) <= budget:
            packed = pack("", section, budget, reserve)
            footer = SEPARATOR + footer_line("recall", n - _shown(packed), cursor)
    text = packed.text + footer
    shown = _shown(packed)
    offsets: dict[str, int] = {}
    pos = text.find(section_text(TITLES["recall"], ""))
    for r in range(shown):
        item = rendered[r]
        pos = text.find(item, pos)
        if pos < 0:  # the packer said whole: it must be there
            raise AssertionError(f"item {r + 1} reported whole but not found in the briefing")
        body = texts.get(ranked[r], "").strip()
        start = pos + (item.find(body) if body else 0)
        offsets[ranked[r]] = nbytes(text[:start])
        pos += len(item)
    return BriefingView(text, budget, offsets)


def _shown(packed) -> int:
    return next((s.shown for s in packed.sections if s.name == "recall"), 0)


def briefing_recall(view: BriefingView, facts: QueryFacts) -> float:
    rel = facts.relevant
    return len(rel & set(view.offsets)) / len(rel) if rel else 0.0


def briefing_hit(view: BriefingView, facts: QueryFacts) -> float:
    return float(bool(facts.relevant & set(view.offsets)))


def bytes_to_first_relevant(view: BriefingView, facts: QueryFacts) -> float:
    """Offset of the first relevant memory shown whole; ``view.budget`` when none is."""
    rel = facts.relevant
    hits = [off for d, off in view.offsets.items() if d in rel]
    return float(min(hits)) if hits else float(view.budget)


# --------------------------------------------------------------------------- temporal


def superseded_above_current(ranked: Sequence[str], facts: QueryFacts) -> float:
    """1 if some in-play (old, current) pair has old ranked above current, 0 if none, NaN
    when no pair is in play (each member ranked or judged)."""
    rank = {d: i for i, d in enumerate(ranked)}
    seen = set(rank) | set(facts.qrels)
    live = [(o, c) for o, c in facts.pairs if o in seen and c in seen]
    if not live:
        return math.nan
    return float(any(rank.get(o, math.inf) < rank.get(c, math.inf) for o, c in live))


def stale_in_top_k(ranked: Sequence[str], facts: QueryFacts, k: int = DEFAULT_TOP_K) -> float:
    """Share of the k top slots held by stale or expired memories; NaN without a fresh relevant one."""
    outdated = facts.stale | facts.expired
    if not facts.relevant - outdated:
        return math.nan
    return sum(d in outdated for d in ranked[:k]) / k


def current_first(ranked: Sequence[str], facts: QueryFacts) -> float:
    """1 if the first relevant ranked memory is current, else 0; NaN unless the relevant
    memories mix current and outdated ones."""
    rel = facts.relevant
    kinds = {facts.current(d) for d in rel}
    if kinds != {True, False}:
        return math.nan
    first = next((d for d in ranked if d in rel), None)
    return float(first is not None and facts.current(first))


# --------------------------------------------------------------------------- metrics of the field


def recall_any(ranked: Sequence[str], relevant: frozenset[str], k: int = DEFAULT_TOP_K) -> float:
    """LongMemEval ``recall_any@k``: 1 if some relevant id is in the top k."""
    return float(bool(relevant & set(ranked[:k])))


def recall_all(ranked: Sequence[str], relevant: frozenset[str], k: int = DEFAULT_TOP_K) -> float:
    """LongMemEval ``recall_all@k``: 1 if every relevant id is in the top k (0 without any)."""
    return float(bool(relevant) and relevant <= set(ranked[:k]))


def _gain_weight(rank: int) -> float:
    """LongMemEval's DCG weight of 1-based ``rank``: 1 at rank 1, 1/log2(rank) after."""
    return 1.0 if rank == 1 else 1.0 / math.log2(rank)


def ndcg_any(ranked: Sequence[str], relevant: frozenset[str], k: int = DEFAULT_TOP_K) -> float:
    """LongMemEval ``ndcg_any@k``: binary DCG of the top k over the ideal DCG of all relevant ids."""
    ideal = sum(_gain_weight(r) for r in range(1, min(len(relevant), k) + 1))
    if ideal == 0:
        return 0.0
    return sum(_gain_weight(r) for r, d in enumerate(ranked[:k], start=1) if d in relevant) / ideal


def to_sessions(ranked: Sequence[str], relevant: frozenset[str], session: Mapping[str, str]
                ) -> tuple[list[str], frozenset[str]]:
    """A turn ranking as a session ranking (each session at its best turn's place) and the
    relevant turns lifted to their sessions."""
    lifted = frozenset(session.get(d, d) for d in relevant)
    return list(dict.fromkeys(session.get(d, d) for d in ranked)), lifted


_FIELD_FN = {"recall_any": recall_any, "recall_all": recall_all, "ndcg_any": ndcg_any}


def official_recall_all(ranked: Sequence[str], relevant: frozenset[str], k: int = DEFAULT_TOP_K) -> float:
    """LongMemEval's ``recall_all``: ``all(...)`` over the gold, so 1 when there is none."""
    return float(relevant <= set(ranked[:k]))


def lenient_ndcg(ranked: Sequence[str], relevant: frozenset[str], k: int = DEFAULT_TOP_K) -> float:
    """Lenient nDCG: LongMemEval's gains, but the ideal is the retrieved top k re-sorted, so
    gold that was never retrieved costs nothing (labelled lenient wherever shown)."""
    hits = [d in relevant for d in ranked[:k]]
    ideal = sum(_gain_weight(r) for r in range(1, sum(hits) + 1))
    return sum(_gain_weight(r) for r, h in enumerate(hits, start=1) if h) / ideal if ideal else 0.0


def turn2session(ranked: Sequence[str], relevant: frozenset[str], session: Mapping[str, str], k: int
                 ) -> tuple[float, float, float]:
    """LongMemEval's ``evaluate_retrieval_turn2session`` on a turn ranking: k grows until k
    distinct session keys are covered (or the list ends); recall over the gold session keys;
    nDCG over turns (a turn is relevant when its session key is gold), the ideal counting every
    gold turn. Session keys are the protocol's (an answer session's other turns form a ``noans`` key)."""
    keys = [session.get(d, d) for d in ranked]
    gold = {session.get(d, d) for d in relevant}
    eff = k
    while eff <= len(keys) and len(set(keys[:eff])) < k:
        eff += 1
    top = set(keys[:eff])
    hits = [key in gold for key in keys[:eff]]
    n_rel = sum(session.get(d, d) in gold for d in relevant)
    ideal = sum(_gain_weight(r) for r in range(1, min(n_rel, eff) + 1))
    ndcg = sum(_gain_weight(r) for r, h in enumerate(hits, start=1) if h) / ideal if ideal else 0.0
    return float(bool(gold & top)), float(gold <= top), ndcg


def locomo_paper_recall(ranked: Sequence[str], facts: QueryFacts, k: int = DEFAULT_TOP_K) -> float:
    """LoCoMo's R@k (``task_eval/evaluation.py``): the share of the question's evidence entries
    found verbatim among the dia_ids of the top k; 1 when the question has no evidence; NaN
    outside LoCoMo (no evidence list at all)."""
    if facts.evidence is None:
        return math.nan
    if not facts.evidence:
        return 1.0
    context = {facts.dia.get(d) for d in ranked[:k]}
    return sum(e in context for e in facts.evidence) / len(facts.evidence)


def field_metric(m: Measure, ranked: Sequence[str], facts: QueryFacts) -> float:
    """A metric of :data:`FIELD` or :data:`SESSION` for one query, as the protocol defines it."""
    rel = facts.relevant
    base, k = m.base, m.param or DEFAULT_TOP_K
    if base == "locomo_recall":
        return locomo_paper_recall(ranked, facts, k)
    if facts.family == "official" and base in SESSION:
        any_, all_, ndcg = turn2session(ranked, rel, facts.session, k)
        return {"session_recall_any": any_, "session_recall_all": all_, "session_ndcg_any": ndcg}[base]
    if base in SESSION:
        if facts.family == "lenient" and base == "session_recall_any":
            # the sessions of the top k documents: no growth of k to k distinct sessions
            return float(bool({facts.session.get(d, d) for d in rel} & {facts.session.get(d, d) for d in ranked[:k]}))
        ranked, rel = to_sessions(ranked, rel, facts.session)
        base = base.removeprefix("session_")
    if facts.family in ("official", "lenient") and base == "recall_all":
        return official_recall_all(ranked, rel, k)
    if facts.family == "lenient" and base == "ndcg_any":
        return lenient_ndcg(ranked, rel, k)
    return _FIELD_FN[base](ranked, rel, k)


def trivial_queries(facts: Facts, name: str, qids: Iterable[str]) -> list[str]:
    """The queries whose scope holds at most k candidates (memories; sessions for the
    session metrics) for the recall-type cutoff metric ``name`` (ranx ``recall@k``,
    ``recall_any/all@k``, their session forms): there, any run listing its whole scope
    scores 1, so the figure says nothing. Empty for other names."""
    if "recall" not in name or name.startswith("briefing"):
        return []  # only a recall is forced to 1 by a cutoff that covers the scope
    m = parse(name)
    if m is None or m.param is None or m.base in BRIEFING:
        _, _, cut = name.partition("@")
        if m is not None or not cut.isdigit():
            return []
        k = int(cut)
    else:
        k = m.param
    out = []
    for q in qids:
        corpus = facts.corpus.get(q, frozenset())
        n = len({facts.session.get(d, d) for d in corpus}) if m is not None and m.base in SESSION else len(corpus)
        if n <= k:
            out.append(q)
    return out


# --------------------------------------------------------------------------- per query


def measure_values(ranked: Sequence[str], facts: QueryFacts, measures: Sequence[Measure]) -> dict[Measure, float]:
    """Every measure of one query; briefings are packed once per budget."""
    views: dict[int, BriefingView] = {}
    out: dict[Measure, float] = {}
    for m in measures:
        if m.base in BRIEFING:
            assert m.param is not None
            if m.param not in views:
                views[m.param] = briefing(ranked, facts.texts, m.param)
            fn = {"briefing_recall": briefing_recall, "briefing_hit": briefing_hit,
                  "bytes_to_first_relevant": bytes_to_first_relevant}[m.base]
            out[m] = fn(views[m.param], facts)
        elif m.base in FIELD or m.base in SESSION or m.base in PAPER:
            out[m] = field_metric(m, ranked, facts)
        elif m.base == "stale_in_top_k":
            out[m] = stale_in_top_k(ranked, facts, m.param or DEFAULT_TOP_K)
        elif m.base == "superseded_above_current":
            out[m] = superseded_above_current(ranked, facts)
        else:
            out[m] = current_first(ranked, facts)
    return out


def per_query(facts: Facts | None, judged: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]],
              metrics: Sequence[str]) -> pd.DataFrame:
    """ranx metrics and measures side by side, like :func:`memofs_eval.scoring.metrics.per_query`:
    index = the judged queries (ranx's order), one column per name in ``metrics``.
    Measures need ``facts`` (:func:`build_facts`)."""
    from memofs_eval.scoring import metrics as M

    metrics = list(dict.fromkeys(metrics))
    parsed = {name: parse(name) for name in metrics}
    ranx_names = [n for n, p in parsed.items() if p is None]
    ours = {n: p for n, p in parsed.items() if p is not None}
    if ranx_names:
        df = M.per_query(judged, ranked, ranx_names)
    else:
        order = sorted(judged)  # ranx's (sorted) key order, queries without gold included
        df = pd.DataFrame(index=pd.Index(order, name="query"))
    if ours:
        if facts is None:
            raise ValueError(f"measures {', '.join(ours)} need dataset facts (memofs_eval.scoring.measures.build_facts)")
        wanted = list(dict.fromkeys(ours.values()))
        vals = [measure_values(ranked.get(q, []), facts.query(q, judged[q]), wanted) for q in df.index]
        for name, m in ours.items():
            df[name] = [v[m] for v in vals]
    return df.reindex(columns=metrics).astype(float)


def curve(facts: Facts, judged: Mapping[str, Mapping[str, int]], runs: Mapping[str, Mapping[str, Sequence[str]]],
          qids: Sequence[str], budgets: Sequence[int] = CURVE_BUDGETS, base: str = "briefing_recall") -> pd.DataFrame:
    """Mean ``base@B`` per method (rows) and budget B (columns) over ``qids``."""
    qf = {q: facts.query(q, judged[q]) for q in qids}
    wanted = [Measure(base, b) for b in budgets]
    rows = []
    for method, ranked in runs.items():
        vals = [measure_values(ranked.get(q, []), qf[q], wanted) for q in qids]
        row: dict[str, object] = {"method": method}
        for m in wanted:
            row[str(m.param)] = sum(v[m] for v in vals) / len(vals) if vals else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=["method", *(str(b) for b in budgets)])
