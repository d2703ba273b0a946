"""The context briefing: recall packed into a hard byte budget (spec "The context
briefing"; upstream-facts.md section 9).

Layout: sections ``"## <title>\\n\\n<body>"`` joined by ``"\\n\\n"``; every size is UTF-8
bytes and every cut lands on a character boundary.

1. Non-negotiable, first: the Directive (fixed text), then Core Memory (trimmed core.md).
   *Deviation from upstream*, which packs both in full even past the budget: the cap is
   hard here. When core.md does not fit in ``max_bytes - directive - footer reserve``,
   its body is cut at a character boundary and ends with the notice
   ``[Core memory truncated to <a> of <b> bytes to fit the <cap>-byte briefing]``; the
   negotiable sections then get nothing (their cursors still let the agent expand them).
2. ``remaining = max(0, max_bytes - used - reserve)``. For each non-empty negotiable
   section in the order entities (weight 2), recall (3), recent (1), notes (1):
   stop when ``remaining <= 0``; ``share = floor(remaining * weight / W)`` with ``W`` the
   weight sum of all non-empty negotiable sections (fixed while ``remaining`` shrinks);
   ``body budget = share - heading bytes - separator bytes``; pack the body whole if it
   fits, else compressed (:func:`compress`); ``remaining -= actual cost``.
3. Compact mode renders at most 3 recall items, 3 recent events and 3 notes (all
   entities); the untruncated lists go to the :class:`~memofs.store.cursor.ContextCache`.
   A footer line per section with hidden items carries its cursor:
   ``↳ expand (<n> more): memofs.context(section="<s>", expand="<cursor>")``. The footer
   is reserved before packing (second pass, only when something is hidden), so the cap
   holds with it.
4. :func:`expand_context` returns the Directive plus one section, titled
   ``<title> (expanded)``, from the cache only (no re-query), under 64,000 bytes.

Items are structured (one string per memory / event / entity) instead of re-split from
text on blank lines or newlines as upstream does, so multi-line memories stay whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from memofs.files import secrets
from memofs.store.cursor import SECTIONS, ContextCache, CursorError, cache_key
from memofs.graph.entity_graph import EntityGraph
from memofs.files.records import MEMORY_EXTRA_FIELDS, InvalidInputError
from memofs.files.timestamps import iso

HARD_CAP = 8192
EXPAND_BUDGET = 64_000
MIN_BUDGET = 1024
MAX_BUDGET = 262_144
SEPARATOR = "\n\n"

DIRECTIVE_TITLE = "How to use MemoFS context"
DIRECTIVE = (
    "1. Treat this memory as the project's source of truth; prefer it over guesses.\n"
    "2. Recall before answering: search memory with specific terms (memofs.recall).\n"
    "3. Persist decisions and discoveries with memofs.remember, giving a kind and a confidence.\n"
    "4. Never store secrets (keys, tokens, passwords); such writes are refused."
)
CORE_TITLE = "Core Memory"
TITLES: dict[str, str] = {
    "entities": "Entities",
    "recall": "Relevant Recall",
    "recent": "Recent Memory Events",
    "notes": "Notes Memory",
}
WEIGHTS: dict[str, int] = {"entities": 2, "recall": 3, "recent": 1, "notes": 1}
COMPACT_SHOWN: dict[str, int | None] = {"entities": None, "recall": 3, "recent": 3, "notes": 3}
ITEM_SEP: dict[str, str] = {"entities": "\n", "recall": "\n\n", "recent": "\n", "notes": "\n"}
HINTS: dict[str, str] = {
    "entities": "entity detail",
    "recall": "recall fragment(s)",
    "recent": "recent event(s)",
    "notes": "note(s)",
}
OUTLINE_PREVIEWS = 5
PREVIEW_CHARS = 80


# ---------------------------------------------------------------------- bytes
def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` with at most ``max_bytes`` UTF-8 bytes (whole characters)."""
    if max_bytes <= 0:
        return ""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    # a cut inside a multi-byte sequence leaves an incomplete tail, which "ignore" drops
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def section_text(title: str, body: str) -> str:
    return f"## {title}\n\n{body}"


# ---------------------------------------------------------------------- compression
_NUMBER = re.compile(r"^\s*\d+\.\s*")


def preview(item: str) -> str:
    """First line, leading ``N.`` and ``- `` stripped, at most 80 characters (77 + ``...``)."""
    first = item.strip().split("\n", 1)[0]
    first = _NUMBER.sub("", first)
    if first.startswith("- "):
        first = first[2:]
    first = first.strip()
    return first if len(first) <= PREVIEW_CHARS else first[: PREVIEW_CHARS - 3] + "..."


def outline(omitted: Sequence[str], count: int | None = None) -> str:
    """The omitted-items outline (spec "The context briefing"). ``count`` is how many items
    are omitted when ``omitted`` holds only the first of them (default: all of it)."""
    count = len(omitted) if count is None else count
    lines = [f' ↳ "{preview(it)}"' for it in omitted[:OUTLINE_PREVIEWS]]
    if count > OUTLINE_PREVIEWS:
        lines.append(f" ↳ and {count - OUTLINE_PREVIEWS} more items...")
    return (
        f"[Omitted {count} items to fit context budget:\n"
        + "\n".join(lines)
        + "\nTo view these, run recall with specific search terms]"
    )


def _short_notice(omitted: Sequence[str], count: int | None = None) -> str:
    return f"[Omitted {len(omitted) if count is None else count} items due to context budget limits]"


def _with_tail(head: str, tail: str) -> str:
    return f"{head}{SEPARATOR}{tail}" if head else tail


@dataclass(frozen=True)
class Compressed:
    body: str
    shown: int  # items shown whole
    omitted: int
    mode: str  # "full" | "outline" | "notice" | "truncated" | "empty"


def compress(items: Sequence[str], sep: str, budget: int, total: int | None = None) -> Compressed:
    """Fit ``items`` (rank order) into ``budget`` bytes.

    Whole items are taken greedily while ``included + outline(rest)`` fits; the last
    item needs to fit alone. If no outline fits, the same greedy pass with the notice
    ``[Omitted <M> items due to context budget limits]`` (upstream uses the notice
    without items); if that does not fit either,
    the joined text cut to ``budget - notice`` bytes plus
    ``[Section truncated to <budget> bytes]``; if even the notice is too long, nothing.

    ``total`` (default ``len(items)``) is the length of the whole list when ``items`` is
    only its head: the result is the same as for the whole list as long as the head holds
    more than ``budget`` bytes plus the outline's previews (:func:`render_head`). Sizes are
    summed item by item, so the cost is linear in the items looked at, never in the list."""
    kept = [it for it in items if it.strip()]
    total = len(kept) if total is None else total - (len(items) - len(kept))
    items = kept
    sizes = [nbytes(it) for it in items]
    gap = nbytes(sep)
    if total == len(items) and sum(sizes) + gap * max(0, len(items) - 1) <= budget:
        return Compressed(sep.join(items), len(items), 0, "full")
    for tail, mode in ((outline, "outline"), (_short_notice, "notice")):
        included, head = 0, 0
        for i, size in enumerate(sizes):
            grown = size if i == 0 else head + gap + size
            left = total - i - 1
            cost = grown + (len(SEPARATOR) + nbytes(tail(items[i + 1:i + 1 + OUTLINE_PREVIEWS], left)) if left else 0)
            if cost > budget:
                break
            included, head = i + 1, grown
        body = _with_tail(sep.join(items[:included]), tail(items[included:included + OUTLINE_PREVIEWS], total - included))
        if nbytes(body) <= budget:
            return Compressed(body, included, total - included, mode)
    notice = f"{SEPARATOR}[Section truncated to {budget} bytes]"
    room = budget - nbytes(notice)
    if room <= 0:
        return Compressed("", 0, total, "empty")
    upto, acc = 0, -gap  # the items whose join reaches ``room`` bytes: the cut needs no more
    while upto < len(items) and acc < room:
        acc += gap + sizes[upto]
        upto += 1
    cut = truncate_utf8(sep.join(items[:upto]), room).rstrip()
    return Compressed(cut + notice, 0, total, "truncated")


# ---------------------------------------------------------------------- packing
@dataclass
class SectionInfo:
    name: str
    title: str
    bytes: int  # cost including the separator before it
    total: int  # items available (cached list)
    shown: int  # items shown whole
    omitted: int  # items in the outline / notice
    mode: str


@dataclass
class Packed:
    text: str
    sections: list[SectionInfo]


@dataclass(frozen=True)
class Negotiable:
    name: str
    items: list[str]  # what compact mode renders, rank order
    total: int  # length of the untruncated list


def _cost(first: bool, text: str) -> int:
    return nbytes(text) + (0 if first else len(SEPARATOR))


def pack(core: str, negotiable: Sequence[Negotiable], max_bytes: int, reserve: int = 0) -> Packed:
    """Pack directive, core and the negotiable sections into ``max_bytes - reserve``."""
    parts: list[str] = []
    infos: list[SectionInfo] = []
    directive = section_text(DIRECTIVE_TITLE, DIRECTIVE)
    used = _cost(True, directive)
    parts.append(directive)
    infos.append(SectionInfo("directive", DIRECTIVE_TITLE, used, 1, 1, 0, "full"))
    if used + reserve > max_bytes:
        raise InvalidInputError(f"budget {max_bytes} bytes cannot hold the directive ({used} bytes)")
    core = core.strip()
    if core:
        room = max_bytes - reserve - used - len(SEPARATOR) - nbytes(section_text(CORE_TITLE, ""))
        body, mode = core, "full"
        if nbytes(core) > room:
            notice = f"{SEPARATOR}[Core memory truncated to {{a}} of {nbytes(core)} bytes to fit the {max_bytes}-byte briefing]"
            keep = room - nbytes(notice.format(a=room))
            cut = truncate_utf8(core, keep).rstrip() if keep > 0 else ""
            body = cut + notice.format(a=nbytes(cut)) if keep > 0 else ""
            mode = "truncated"
        if body and nbytes(body) <= room:
            text = section_text(CORE_TITLE, body)
            cost = _cost(False, text)
            parts.append(text)
            used += cost
            infos.append(SectionInfo("core", CORE_TITLE, cost, 1, int(mode == "full"), 0, mode))
    remaining = max(0, max_bytes - used - reserve)
    live = [s for s in negotiable if s.items]
    total_weight = sum(WEIGHTS[s.name] for s in live)
    for s in live:
        title = TITLES[s.name]
        if remaining <= 0:
            infos.append(SectionInfo(s.name, title, 0, s.total, 0, 0, "dropped"))
            continue
        share = remaining * WEIGHTS[s.name] // total_weight
        body_budget = max(0, share - nbytes(section_text(title, "")) - len(SEPARATOR))
        comp = compress(s.items, ITEM_SEP[s.name], body_budget)
        if not comp.body:
            infos.append(SectionInfo(s.name, title, 0, s.total, 0, 0, "dropped"))
            continue
        text = section_text(title, comp.body)
        cost = _cost(False, text)
        parts.append(text)
        remaining -= cost
        infos.append(SectionInfo(s.name, title, cost, s.total, comp.shown, comp.omitted, comp.mode))
    return Packed(SEPARATOR.join(parts), infos)


# ---------------------------------------------------------------------- results
@dataclass
class Briefing:
    """A packed briefing: ``text`` never exceeds ``budget`` UTF-8 bytes."""

    text: str
    budget: int
    sections: list[SectionInfo]
    items: list[dict[str, Any]] = field(default_factory=list)
    expandable: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    query: str = ""

    @property
    def bytes(self) -> int:
        return nbytes(self.text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text, "bytes": self.bytes, "budget": self.budget, "query": self.query,
            "sections": [asdict(s) for s in self.sections], "items": self.items,
            "expandable": self.expandable, "warnings": self.warnings,
        }


def footer_line(section: str, more: int | None, cursor: str) -> str:
    count = f" ({more} more)" if more else ""
    return f'↳ expand{count}: memofs.context(section="{section}", expand="{cursor}")'


def _one_line(text: str) -> str:
    return " ".join(text.split())


def supersession_line(doc_id: str, text: str, supersedes: Sequence[str], superseded_by: Sequence[str],
                      text_of: Callable[[str], str | None]) -> str | None:
    """A memory's temporal state, worded as an entity's (spec "Entity-boost": "currently:
    uses OAuth; supersedes JWT"): ``"currently: <this>; supersedes <old>; ..."`` for a memory
    that supersedes others, ``"superseded; currently: <newer>; ..."`` for one superseded.
    Texts are :func:`preview`-shortened; ids ``text_of`` does not know are left out."""
    old = [preview(t) for t in map(text_of, supersedes) if t]
    new = [preview(t) for t in map(text_of, superseded_by) if t]
    if new:
        return "superseded; " + "; ".join(f"currently: {t}" for t in new)
    if old:
        return f"currently: {preview(text)}; " + "; ".join(f"supersedes {t}" for t in old)
    return None


def render_recall(results: Sequence[Any], superseded_by: Mapping[str, Sequence[str]] | None = None,
                  text_of: Callable[[str], str | None] | None = None) -> list[str]:
    """``"<n>. <text>\\n score: <score>"``; a drifted anchor adds ``(stale: <reason>)``.
    With ``superseded_by`` (:meth:`memofs.ranking.recall.Recaller.superseded_by`) and
    ``text_of`` (id -> text), a memory in a supersedes relation gets a third line
    ``" ↳ <supersession_line>"``."""
    items = []
    for i, r in enumerate(results, start=1):
        line = f"{i}. {r.text.strip()}\n score: {r.score:.4f}"
        pen = (r.explain or {}).get("penalties", [])
        stale = [p["reason"] for p in pen if p.get("name") == "stale_anchor"]
        if stale:
            line += f" (stale: {stale[0]})"
        if superseded_by is not None and text_of is not None and r.memory is not None:
            state = supersession_line(r.id, r.text, r.memory.supersedes, superseded_by.get(r.id, ()), text_of)
            if state:
                line += f"\n ↳ {state}"
        items.append(line)
    return items


def render_events(events: Sequence[dict[str, Any]]) -> list[str]:
    """``"- <timestamp|unknown> <type|memory>: <summary>"``."""
    return [
        f"- {e.get('timestamp') or 'unknown'} {e.get('type') or 'memory'}: {_one_line(str(e.get('summary') or ''))}"
        for e in events
    ]


def newest_notes(memories: Sequence[Any]) -> list[Any]:
    """Note-kind memories, newest first (undated last; ties keep store order). A store state
    computes this once (:attr:`memofs.store.project.Rehydrated.notes`), not every briefing."""
    notes = [m for m in memories if m.kind == "note"]
    notes.sort(key=lambda m: (m.created_at is not None, m.created_at), reverse=True)
    return notes


def render_notes(notes: Sequence[Any], max_bytes: int | None = None) -> list[str]:
    """``"- <date> <text on one line>"`` for ``notes`` (newest first, :func:`newest_notes`).

    With ``max_bytes``, only the head that any section of at most ``max_bytes`` bytes can
    show: items until their ``"\n"``-joined size passes ``max_bytes``, plus the outline's
    previews (:func:`compress` with ``total=len(notes)`` gives the same text as for the
    whole list). A briefing formats a few hundred notes, not the whole store."""
    out: list[str] = []
    size, extra = -1, None
    for m in notes:
        item = f"- {m.created_at.date().isoformat() if m.created_at else 'undated'} {_one_line(m.text)}"
        out.append(item)
        if extra is not None:
            extra -= 1
            if extra <= 0:
                break
            continue
        size += 1 + nbytes(item)
        if max_bytes is not None and size > max_bytes:
            extra = OUTLINE_PREVIEWS
    return out


@dataclass(frozen=True)
class NotesHead:
    """The notes list a briefing caches: the head :func:`render_notes` gives for the largest
    expansion (``MAX_BUDGET``) and how many notes there are. It depends on the store state
    only, never on the query, so a state renders it once (:func:`notes_head`)."""

    items: list[str]
    total: int


def notes_head(memories: Sequence[Any]) -> NotesHead:
    notes = newest_notes(memories)
    return NotesHead(render_notes(notes, MAX_BUDGET), len(notes))


def _check_budget(max_bytes: int) -> int:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or not MIN_BUDGET <= max_bytes <= MAX_BUDGET:
        raise InvalidInputError(f"budget must be an integer in [{MIN_BUDGET}, {MAX_BUDGET}] bytes; got {max_bytes!r}")
    return max_bytes


DETAILS: tuple[str, ...] = ("compact", "full")


@dataclass(frozen=True)
class ContextOptions:
    """What a briefing holds (MCP ``memofs.context`` detail/include* inputs, facts section 9).

    * ``detail="compact"`` (default): at most 8192 bytes, top 3 recall results, 3 recent
      events, 3 notes, expansion cursors for the rest.
    * ``detail="full"`` (upstream's full mode; the CLI's ``--max-chars``): ``max_bytes``
      up to 262144 (default 64000), every recall result fetched (``limit``, default 10),
      ``min(limit or 5, 20)`` recent events, no cache and no cursors; the notes section only
      when ``include_notes`` is true, as upstream.
    * ``include_core=False`` drops Core Memory; ``include_recent=False`` drops Recent
      Memory Events; ``include_notes=False`` drops Notes Memory (compact shows it unless
      false); ``include_graph=False`` drops the Entities section (recall's entity boost is
      the RecallConfig switch ``use_entity_boost``, unchanged here).
    """

    detail: str = "compact"
    include_core: bool = True
    include_notes: bool | None = None
    include_recent: bool = True
    include_graph: bool = True

    def __post_init__(self) -> None:
        if self.detail not in DETAILS:
            raise InvalidInputError(f"detail must be one of {', '.join(DETAILS)}; got {self.detail!r}")
        for name in ("include_core", "include_recent", "include_graph"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInputError(f"{name} must be a boolean")
        if self.include_notes is not None and not isinstance(self.include_notes, bool):
            raise InvalidInputError("include_notes must be a boolean")

    @property
    def full(self) -> bool:
        return self.detail == "full"

    def default_budget(self) -> int:
        return EXPAND_BUDGET if self.full else HARD_CAP


def build_context(
    recaller: Any,
    *,
    query: str,
    core: str,
    events: Sequence[dict[str, Any]],
    memories: Sequence[Any],
    cache: ContextCache,
    now: datetime,
    task_type: str | None = None,
    max_bytes: int = HARD_CAP,
    limit: int | None = None,
    state_key: object = None,
    notes: NotesHead | None = None,
    options: ContextOptions = ContextOptions(),
) -> Briefing:
    """A compact briefing for ``query`` capped at ``min(max_bytes, 8192)`` bytes (or the
    full one, and the sections :class:`ContextOptions` asks for).

    ``events`` are the recent memory events, newest first; ``memories`` the store's
    memories (notes come from them, or from ``notes``: :func:`notes_head` of the same
    memories, kept by the caller across briefings); ``state_key``
    identifies the store state in the cache key. The untruncated lists are cached under a
    16-hex key; the notes list only as far as the largest expansion can show
    (``meta["totals"]`` keeps its length)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query is required")
    full = options.full
    budget = _check_budget(max_bytes) if full else min(_check_budget(max_bytes), HARD_CAP)
    warnings: list[str] = []
    rq, resolved = recaller.query_text(query, task_type)
    entities = EntityGraph.render(resolved).split("\n") if resolved and options.include_graph else []
    fetch = (limit or 10) if full else max(limit or 20, 3)
    n_recent = min(limit or 5, 20) if full else max(6, limit or 5)
    head = notes_head(memories) if notes is None else notes
    show_notes = options.include_notes is True if full else options.include_notes is not False
    if not options.include_core:
        core = ""
    try:
        results = recaller.recall(query, fetch, task_type=task_type, now=now, explain=True)
    except ValueError:
        raise
    except Exception as exc:  # the briefing degrades, it does not fail (upstream warning)
        warnings.append(f"Recall failed: {exc}")
        results = []
    if core.strip():  # core.md is its own section: its phrase-scan blocks would repeat it
        results = [r for r in results if getattr(r, "source", "memory") != "core"]
    lists = {
        "entities": entities,
        "recall": _render_recall_of(recaller, results),
        "recent": render_events(list(events)[:n_recent]) if options.include_recent else [],
        "notes": head.items if show_notes else [],
    }
    totals = {name: len(items) for name, items in lists.items()}
    totals["notes"] = head.total if show_notes else 0
    key = cache_key(query, task_type, rq.expanded_terms, state_key)
    shown = {name: None for name in SECTIONS} if full else COMPACT_SHOWN  # full: every item, no cursors
    negotiable = [
        Negotiable(name, lists[name][: shown[name]] if shown[name] else lists[name], totals[name])
        for name in SECTIONS
    ]
    packed = pack(core, negotiable, budget)
    hidden = _hidden(packed, totals)
    footer: list[str] = []
    cursors: dict[str, str] = {}
    if hidden and not full:
        # a query the secret gate would refuse is cached redacted (the cache put), and its
        # terms are not cached at all: they are pieces of the secret
        terms = [] if secrets.scan(query) else list(rq.expanded_terms)
        cache.put(key, lists, {"query": query, "task_type": task_type, "expanded_terms": terms, "totals": totals})
        cursors = {name: cache.cursor(key, name) for name in SECTIONS if lists[name]}
        reserve_lines = [footer_line(n, totals[n], c) for n, c in cursors.items()]
        reserve = nbytes(SEPARATOR + "\n".join(reserve_lines))
        if reserve + nbytes(section_text(DIRECTIVE_TITLE, DIRECTIVE)) > budget:
            reserve = 0  # no room for cursors at all: the briefing still holds the cap
            cursors = {}
        packed = pack(core, negotiable, budget, reserve)
        hidden = _hidden(packed, totals)
        footer = [footer_line(n, hidden[n], cursors[n]) for n in SECTIONS if n in hidden and n in cursors]
    text = packed.text + (SEPARATOR + "\n".join(footer) if footer else "")
    if nbytes(text) > budget:  # unreachable by construction; the cap is a hard invariant
        text = truncate_utf8(text, budget)
    expandable = [
        {"section": n, "available": hidden[n], "hint": f"{hidden[n]} more {HINTS[n]}", "cursor": cursors[n]}
        for n in SECTIONS if footer and n in hidden and n in cursors
    ]
    items = [
        {"id": r.id, "text": r.text, "score": r.score}
        for r in (results if full else results[: COMPACT_SHOWN["recall"]])
    ]
    return Briefing(text, budget, packed.sections, items, expandable, warnings, query)


def _render_recall_of(recaller: Any, results: Sequence[Any]) -> list[str]:
    """:func:`render_recall` with the supersession lines when the recaller tracks them
    (a :class:`~memofs.ranking.recall.Recaller`; a stand-in without them renders plainly)."""
    sup = getattr(recaller, "superseded_by", None)
    return render_recall(results, sup(), _text_of(recaller)) if sup is not None else render_recall(results)


def _text_of(recaller: Any) -> Callable[[str], str | None]:
    """Id -> text over the recaller's memories; ``graph:<id>`` -> the node's label."""
    def text_of(doc_id: str) -> str | None:
        m = recaller.memories.get(doc_id)
        if m is not None:
            return m.text
        if doc_id.startswith("graph:") and doc_id[6:] in recaller.graph:
            return recaller.graph.node(doc_id[6:]).label
        return None
    return text_of


def _hidden(packed: Packed, totals: dict[str, int]) -> dict[str, int]:
    """Per section, how many items of the untruncated list (``totals``: lengths) are not shown whole."""
    shown = {s.name: s.shown for s in packed.sections}
    out = {}
    for name in SECTIONS:
        more = totals[name] - shown.get(name, 0)
        if more > 0:
            out[name] = more
    return out


def expand_context(cache: ContextCache, cursor: str, section: str | None = None,
                   max_bytes: int = EXPAND_BUDGET) -> Briefing:
    """Directive + the full cached ``section`` (default: the cursor's), under ``max_bytes``.

    Never re-queries. Malformed, tampered, expired or unknown cursors raise
    :class:`~memofs.store.cursor.CursorError`."""
    budget = _check_budget(max_bytes)
    entry, cursor_section = cache.resolve(cursor)
    name = section or cursor_section
    if name not in SECTIONS:
        raise CursorError(f"section must be one of {', '.join(SECTIONS)}; got {name!r}")
    items = entry.lists.get(name, [])
    totals = entry.meta.get("totals")
    total = totals.get(name) if isinstance(totals, dict) else None
    total = total if isinstance(total, int) and not isinstance(total, bool) and total >= len(items) else len(items)
    directive = section_text(DIRECTIVE_TITLE, DIRECTIVE)
    title = f"{TITLES[name]} (expanded)"
    parts = [directive]
    infos = [SectionInfo("directive", DIRECTIVE_TITLE, nbytes(directive), 1, 1, 0, "full")]
    if items:
        room = budget - nbytes(directive) - len(SEPARATOR) - nbytes(section_text(title, ""))
        comp = compress(items, ITEM_SEP[name], room, total)
        if comp.body:
            text = section_text(title, comp.body)
            parts.append(text)
            infos.append(SectionInfo(name, title, _cost(False, text), total, comp.shown, comp.omitted, comp.mode))
    else:
        text = section_text(title, "(nothing cached for this section)")
        parts.append(text)
        infos.append(SectionInfo(name, title, _cost(False, text), 0, 0, 0, "full"))
    return Briefing(SEPARATOR.join(parts), budget, infos, [], [], [], str(entry.meta.get("query", "")))


# ---------------------------------------------------------------------- store glue
def result_dict(r: Any, explain: bool = False) -> dict[str, Any]:
    """A recall result as JSON (CLI ``--json`` and the MCP tool)."""
    m = r.memory
    out: dict[str, Any] = {"id": r.id, "text": r.text, "score": r.score}
    if m is not None:
        out.update(kind=m.kind, created_at=iso(m.created_at) if m.created_at else None,
                   confidence=m.confidence, tags=list(m.tags),
                   anchors=[{"path": a.path, "sha256": a.sha256} for a in m.anchors])
        out.update({k: m.metadata[k] for k in MEMORY_EXTRA_FIELDS if k in m.metadata})  # upstream's fields
    elif getattr(r, "source", "memory") != "memory":  # a graph document or a core.md / notes.md block
        out["kind"] = r.source
    pen = (r.explain or {}).get("penalties", [])
    out["stale"] = any(p.get("name") == "stale_anchor" for p in pen)
    if explain:
        out["explain"] = r.explain
    return out


def briefing_for(live: Any, cache: ContextCache, *, query: str, now: datetime, task_type: str | None = None,
                 max_bytes: int | None = None, limit: int | None = None,
                 options: ContextOptions = ContextOptions()) -> Briefing:
    """:func:`build_context` over a :class:`memofs.store.project.LiveStore` (core, events, memories)."""
    state = live.state()
    store = live.store
    events, event_warnings = store.recent_events(20)
    b = build_context(state.recaller, query=query, core=store.read_core(), events=events,
                      memories=state.memories, cache=cache, now=now, task_type=task_type,
                      max_bytes=options.default_budget() if max_bytes is None else max_bytes, limit=limit,
                      state_key=store.signature(), notes=state.notes_head, options=options)
    b.warnings = [*state.warnings, *event_warnings, *b.warnings]
    return b
