"""The context briefing: byte cap, packing shares, compression outline, core overflow,
LRU + cursors, expansion without re-querying, hypothesis property on the cap."""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memofs.store import briefing as B
from memofs.store.cursor import ContextCache, CursorError, FileContextCache, b64url, b64url_decode
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.recall import Recaller
from memofs.files.records import GraphEdge, GraphNode, Memory

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
D = "## How to use MemoFS context\n\n" + B.DIRECTIVE  # the directive section, by hand


def nb(s: str) -> int:
    return len(s.encode("utf-8"))


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def mem(i: int, text: str, kind: str = "decision", days: float = 1.0) -> Memory:
    return Memory(id=f"m{i:03d}", text=text, kind=kind, created_at=NOW - timedelta(days=days), confidence=0.8)


def recaller(memories: list[Memory], graph: EntityGraph | None = None) -> Recaller:
    r = Recaller(graph=graph, clock=lambda: NOW)
    if memories:
        r.add(memories)
    return r


class SpyRecaller:
    """Counts recall calls (expansion must not re-query)."""

    def __init__(self, inner: Recaller) -> None:
        self.inner = inner
        self.calls = 0

    def query_text(self, *a, **k):
        return self.inner.query_text(*a, **k)

    def recall(self, *a, **k):
        self.calls += 1
        return self.inner.recall(*a, **k)


def brief(r, query: str = "database", core: str = "", events=(), memories=(), cache=None, **kw) -> B.Briefing:
    return B.build_context(r, query=query, core=core, events=list(events), memories=list(memories),
                           cache=cache if cache is not None else ContextCache(clock=Clock()), now=NOW, **kw)


# ---------------------------------------------------------------------- bytes
def test_truncate_utf8_never_splits_a_character() -> None:
    text = "aé€😀" * 5  # 1-, 2-, 3- and 4-byte characters
    for n in range(0, nb(text) + 2):
        cut = B.truncate_utf8(text, n)
        assert text.startswith(cut) and nb(cut) <= n
        # maximal: the next character would not fit
        if cut != text:
            assert nb(text[: len(cut) + 1]) > n


# ---------------------------------------------------------------------- compression
def test_preview_rules() -> None:
    assert B.preview("12. Auth token validation\n score: 0.5") == "Auth token validation"
    assert B.preview("- 2026-01-01 memory.created: x") == "2026-01-01 memory.created: x"
    long = "y" * 100
    assert B.preview(long) == "y" * 77 + "..."
    assert B.preview("z" * 80) == "z" * 80


def test_outline_exact() -> None:
    items = [f"{i}. item number {i}\n score: 0.1" for i in range(1, 8)]
    want = (
        "[Omitted 7 items to fit context budget:\n"
        ' ↳ "item number 1"\n ↳ "item number 2"\n ↳ "item number 3"\n ↳ "item number 4"\n ↳ "item number 5"\n'
        " ↳ and 2 more items...\n"
        "To view these, run recall with specific search terms]"
    )
    assert B.outline(items) == want


def test_compress_modes_by_hand() -> None:
    detail = "\n score: 0.5000 " + "detail " * 30
    items = ["1. alpha one" + detail, "2. beta two" + detail, "3. gamma three" + detail]
    full = "\n\n".join(items)
    assert B.compress(items, "\n\n", nb(full)) == B.Compressed(full, 3, 0, "full")
    out1 = items[0] + '\n\n[Omitted 2 items to fit context budget:\n ↳ "beta two"\n ↳ "gamma three"\nTo view these, run recall with specific search terms]'
    assert nb(out1) < nb(full)
    assert B.compress(items, "\n\n", nb(out1)) == B.Compressed(out1, 1, 2, "outline")
    # one byte less: the first item no longer fits beside the outline of the other two
    out0 = '[Omitted 3 items to fit context budget:\n ↳ "alpha one"\n ↳ "beta two"\n ↳ "gamma three"\nTo view these, run recall with specific search terms]'
    assert B.compress(items, "\n\n", nb(out1) - 1) == B.Compressed(out0, 0, 3, "outline")
    # below the outline's size: the short notice, with as many whole items as fit
    # no outline fits: the short notice, after as many whole items as fit beside it
    lines = [c * 80 for c in "abc"]  # one-line items: each outline line is longer than its item
    notice = lines[0] + "\n\n[Omitted 2 items due to context budget limits]"
    assert B.compress(lines, "\n", nb(notice)) == B.Compressed(notice, 1, 2, "notice")
    assert B.compress(lines, "\n", 60) == B.Compressed("[Omitted 3 items due to context budget limits]", 0, 3, "notice")
    # the notice (46 bytes) does not fit in 45: hard truncation at a character boundary
    assert nb("[Omitted 1 items due to context budget limits]") == 46
    trunc = B.compress(["é" * 100], "\n", 45)
    tail = "\n\n[Section truncated to 45 bytes]"
    assert trunc == B.Compressed("é" * ((45 - nb(tail)) // 2) + tail, 0, 1, "truncated")
    assert B.compress(["x" * 100], "\n", 10) == B.Compressed("", 0, 1, "empty")


# ---------------------------------------------------------------------- packing
def test_pack_all_fit_exact_text() -> None:
    secs = [B.Negotiable("entities", ["1. api (concept)"], 1), B.Negotiable("recall", ["1. use D1\n score: 0.5000"], 1),
            B.Negotiable("recent", [], 0), B.Negotiable("notes", ["- 2026-01-01 a note"], 1)]
    p = B.pack("# Core\nfacts", secs, 8192)
    want = "\n\n".join([D, "## Core Memory\n\n# Core\nfacts", "## Entities\n\n1. api (concept)",
                        "## Relevant Recall\n\n1. use D1\n score: 0.5000", "## Notes Memory\n\n- 2026-01-01 a note"])
    assert p.text == want


def test_pack_shares_follow_the_formula() -> None:
    """Every section costs at most floor(remaining * weight / W) with W fixed over the
    non-empty sections and remaining shrinking by each section's actual cost; and each
    outlined section is maximal (one more whole item would not fit)."""
    items = {n: [f"- {n} item {i} " + "w" * (10 + 7 * i) for i in range(12)] for n in ("entities", "recall", "recent", "notes")}
    secs = [B.Negotiable(n, v, len(v)) for n, v in items.items()]
    for budget in (1024, 1500, 2300, 4096, 8192):
        p = B.pack("", secs, budget)
        assert nb(p.text) <= budget
        remaining = budget - nb(D)
        weights = {"entities": 2, "recall": 3, "recent": 1, "notes": 1}
        for info in p.sections[1:]:
            share = remaining * weights[info.name] // 7
            assert info.bytes <= share, (budget, info)
            body_budget = share - nb(f"## {info.title}\n\n") - 2
            if info.mode == "outline":
                sep = B.ITEM_SEP[info.name]
                more = sep.join(items[info.name][: info.shown + 1])
                rest = items[info.name][info.shown + 1:]
                assert nb(more + "\n\n" + B.outline(rest) if rest else more) > body_budget
            remaining -= info.bytes
        # hand check of the first share at 2300 bytes
        if budget == 2300:
            assert p.sections[1].bytes <= (2300 - nb(D)) * 2 // 7


def test_core_alone_exceeds_the_cap() -> None:
    core = "é" * 10_000  # 20,000 bytes
    r = recaller([mem(1, "database driver is D1"), mem(2, "database pool size 50")])
    cache = ContextCache(clock=Clock())
    b = brief(r, "database", core=core, cache=cache)
    assert b.bytes <= 8192
    assert b.text.startswith(D + "\n\n## Core Memory\n\n")
    body = b.text[len(D + "\n\n## Core Memory\n\n"):].split("\n\n[Core memory truncated to ")[0]
    assert set(body) == {"é"} and core.startswith(body)
    assert f"[Core memory truncated to {nb(body)} of 20000 bytes to fit the 8192-byte briefing]" in b.text
    assert "## Relevant Recall" not in b.text  # nothing left for negotiable sections
    cur = {e["section"]: e["cursor"] for e in b.expandable}
    assert set(cur) == {"recall"}  # ... but the recall list can still be expanded
    ex = B.expand_context(cache, cur["recall"])
    assert "database driver is D1" in ex.text and "database pool size 50" in ex.text


def test_budget_bounds() -> None:
    r = recaller([mem(1, "x y z")])
    for bad in (1023, 262_145, "8192", True):
        with pytest.raises(ValueError, match="budget"):
            brief(r, "x", max_bytes=bad)
    assert brief(r, "x", max_bytes=20_000).budget == 8192  # compact caps at 8192


# ---------------------------------------------------------------------- property
alphabet = st.characters(blacklist_categories=("Cs",), min_codepoint=1, max_codepoint=0x1F64F)


@settings(max_examples=int(os.environ.get("MEMOFS_HYPOTHESIS_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.text(alphabet, min_size=1, max_size=400).filter(str.strip), max_size=25),
    core=st.text(alphabet, max_size=12_000),
    query=st.text(alphabet, min_size=1, max_size=60).filter(str.strip),
    budget=st.integers(1024, 9000),
    facts=st.booleans(),
)
def test_no_briefing_exceeds_the_cap(texts, core, query, budget, facts) -> None:
    memories = [mem(i, t, kind="note" if i % 3 == 0 else "decision", days=i) for i, t in enumerate(texts)]
    graph = None
    if facts and texts:
        graph = EntityGraph([GraphNode("concept:a", texts[0][:100].strip() or "a"), GraphNode("concept:b", "b")],
                            [GraphEdge("concept:a", "concept:b", "uses")])
    events = [{"timestamp": "2026-01-01T00:00:00Z", "type": "memory.created", "summary": t[:160]} for t in texts]
    cache = ContextCache(clock=Clock())
    b = brief(recaller(memories, graph), query, core=core, events=events, memories=memories, cache=cache, max_bytes=budget)
    cap = min(budget, 8192)
    assert nb(b.text) <= cap
    assert b.text.startswith(D)
    for e in b.expandable:
        ex = B.expand_context(cache, e["cursor"])
        assert nb(ex.text) <= B.EXPAND_BUDGET


# ---------------------------------------------------------------------- LRU + cursors
def test_lru_capacity_and_recency() -> None:
    c = ContextCache(clock=Clock())
    for i in range(8):
        c.put(f"{i:016x}", {"recall": [str(i)]}, {})
    assert c.get(f"{0:016x}") is not None  # touch 0: now most recent
    c.put(f"{8:016x}", {}, {})
    assert f"{1:016x}" not in c.keys() and f"{0:016x}" in c.keys() and len(c) == 8
    c.put(f"{9:016x}", {}, {})
    assert f"{2:016x}" not in c.keys()


def test_ttl_counts_from_creation_not_access() -> None:
    clock = Clock(0.0)
    c = ContextCache(clock=clock)
    c.put("00" * 8, {"recall": ["a"]}, {})
    clock.t = 599.9
    assert c.get("00" * 8) is not None
    clock.t = 600.0
    assert c.get("00" * 8) is None and len(c) == 0


def _entry_cursor(c: ContextCache, key: str = "ab" * 8, section: str = "recall") -> str:
    c.put(key, {"recall": ["1. one"], "entities": [], "recent": [], "notes": []}, {"query": "q"})
    return c.cursor(key, section)


def test_cursor_is_short_opaque_base64url() -> None:
    c = ContextCache(clock=Clock())
    cur = _entry_cursor(c)
    assert len(cur) == 30 and set(cur) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert "q" not in b64url_decode(cur).decode("latin-1").split("\x00")  # the query is not inside
    assert c.decode(cur) == ("ab" * 8, "recall")


@pytest.mark.parametrize("mangle, match", [
    (lambda s: "", "empty"),
    (lambda s: "!!!not-base64!!!", "malformed"),
    (lambda s: s[:-4], "malformed"),
    (lambda s: "A" * 600, "malformed"),
    (lambda s: b64url(bytes([2]) + b64url_decode(s)[1:]), "malformed"),
    (lambda s: b64url(b64url_decode(s)[:-1] + bytes([b64url_decode(s)[-1] ^ 1])), "tampered"),
    (lambda s: b64url(b64url_decode(s)[:3] + bytes([b64url_decode(s)[3] ^ 1]) + b64url_decode(s)[4:]), "tampered"),
    (lambda s: b64url(b64url_decode(s)[:9] + bytes([0]) + b64url_decode(s)[10:]), "tampered"),
    (lambda s: 12345, "empty"),
])
def test_bad_cursors_give_clear_errors(mangle, match) -> None:
    c = ContextCache(clock=Clock())
    cur = _entry_cursor(c)
    with pytest.raises(CursorError, match=match):
        B.expand_context(c, mangle(cur))


def test_cursor_from_another_process_is_refused() -> None:
    a, b = ContextCache(clock=Clock()), ContextCache(clock=Clock())
    cur = _entry_cursor(a)
    _entry_cursor(b)  # b even holds an entry under the same key
    with pytest.raises(CursorError, match="not issued by this memofs process"):
        B.expand_context(b, cur)


def test_expired_and_evicted_cursors() -> None:
    clock = Clock(0.0)
    c = ContextCache(clock=clock)
    cur = _entry_cursor(c)
    clock.t = 601
    with pytest.raises(CursorError, match="expired or is unknown"):
        B.expand_context(c, cur)
    clock.t = 1000
    cur = _entry_cursor(c)
    for i in range(8):
        c.put(f"{i:016x}", {}, {})
    with pytest.raises(CursorError, match="expired or is unknown"):
        B.expand_context(c, cur)


def test_each_cursor_returns_its_own_query() -> None:
    mems = [mem(i, f"{w} memory {i}") for i, w in enumerate(["postgres pool"] * 6 + ["oauth login"] * 6)]
    r = recaller(mems)
    cache = ContextCache(clock=Clock())
    a = brief(r, "postgres pool", memories=mems, cache=cache)
    b = brief(r, "oauth login", memories=mems, cache=cache)
    ca = next(e["cursor"] for e in a.expandable if e["section"] == "recall")
    cb = next(e["cursor"] for e in b.expandable if e["section"] == "recall")
    ea, eb = B.expand_context(cache, ca), B.expand_context(cache, cb)
    assert ea.query == "postgres pool" and eb.query == "oauth login"
    assert ea.text.split("## Relevant Recall (expanded)\n\n")[1].startswith("1. postgres pool")
    assert eb.text.split("## Relevant Recall (expanded)\n\n")[1].startswith("1. oauth login")


def test_expand_returns_full_cached_list_without_requerying() -> None:
    mems = [mem(i, f"database note {i}: pool size {i * 10}") for i in range(9)]
    spy = SpyRecaller(recaller(mems))
    cache = ContextCache(clock=Clock())
    b = brief(spy, "database pool", memories=mems, cache=cache)
    assert spy.calls == 1
    rec = next(e for e in b.expandable if e["section"] == "recall")
    assert rec["available"] == 9 - 3 and f"expand (6 more): memofs.context(section=\"recall\", expand=\"{rec['cursor']}\")" in b.text
    ex = B.expand_context(cache, rec["cursor"])
    assert spy.calls == 1  # no re-query
    want = [f"{i}. {r.text}\n score: {r.score:.4f}" for i, r in
            enumerate(spy.inner.recall("database pool", 20, now=NOW), start=1)]
    assert ex.text == D + "\n\n## Relevant Recall (expanded)\n\n" + "\n\n".join(want)
    # the request's section decides, from the same cached entry
    notes = B.expand_context(cache, rec["cursor"], section="notes")
    assert "## Notes Memory (expanded)" in notes.text


def test_expand_is_capped_at_64000_bytes() -> None:
    c = ContextCache(clock=Clock())
    items = [f"{i}. " + "é" * 1000 + f"\n score: 0.1" for i in range(1, 200)]  # ~400 KB
    c.put("cd" * 8, {"recall": items, "entities": [], "recent": [], "notes": []}, {"query": "q"})
    ex = B.expand_context(c, c.cursor("cd" * 8, "recall"))
    assert nb(ex.text) <= 64_000 and "[Omitted " in ex.text
    assert ex.sections[1].shown + ex.sections[1].omitted == 199


def test_file_cache_survives_processes_and_keeps_ttl(tmp_path: Path) -> None:
    clock = Clock(0.0)
    a = FileContextCache(tmp_path, clock=clock)
    cur = _entry_cursor(a)
    b = FileContextCache(tmp_path, clock=clock)  # "another CLI process", same store
    assert B.expand_context(b, cur).sections[1].name == "recall"
    assert (tmp_path / "cursor.key").stat().st_mode & 0o777 == 0o600
    clock.t = 600
    with pytest.raises(CursorError, match="expired"):
        B.expand_context(FileContextCache(tmp_path, clock=clock), cur)
    other = FileContextCache(tmp_path / "other", clock=clock)
    with pytest.raises(CursorError, match="not issued"):
        B.expand_context(other, cur)


# ---------------------------------------------------------------------- sections
def test_sections_rendered_from_store_data() -> None:
    graph = EntityGraph([GraphNode("concept:api", "api"), GraphNode("concept:postgres", "postgres")],
                        [GraphEdge("concept:api", "concept:postgres", "uses")])
    mems = [mem(1, "api talks to postgres through pgbouncer"), mem(2, "remember to vacuum", kind="note", days=2),
            mem(3, "newer note", kind="note", days=1)]
    events = [{"timestamp": "2026-02-28T00:00:00Z", "type": "memory.created", "summary": "newer note"},
              {"timestamp": None, "type": None, "summary": "x\ny"}]
    b = brief(recaller(mems, graph), "api", events=events, memories=mems)
    assert "## Entities\n\n1. api (concept) — currently: uses postgres" in b.text
    assert "## Recent Memory Events\n\n- 2026-02-28T00:00:00Z memory.created: newer note\n- unknown memory: x y" in b.text
    assert "## Notes Memory\n\n- 2026-02-28 newer note\n- 2026-02-27 remember to vacuum" in b.text
    assert b.items and b.items[0]["id"] == "m001"


# ---------------------------------------------------------------------- scale (issue 18)
def _naive_compress(items: list[str], sep: str, budget: int) -> B.Compressed:
    """The whole-list reference: join everything, re-join and re-slice for every candidate
    (the definition, quadratic; the old implementation)."""
    items = [it for it in items if it.strip()]
    full = sep.join(items)
    if nb(full) <= budget:
        return B.Compressed(full, len(items), 0, "full")
    for tail, mode in ((B.outline, "outline"), (lambda r: f"[Omitted {len(r)} items due to context budget limits]", "notice")):
        included: list[str] = []
        for i, item in enumerate(items):
            rest = items[i + 1:]
            head = sep.join([*included, item])
            if nb(f"{head}\n\n{tail(rest)}" if rest else head) > budget:
                break
            included.append(item)
        rest = items[len(included):]
        body = f"{sep.join(included)}\n\n{tail(rest)}" if included else tail(rest)
        if nb(body) <= budget:
            return B.Compressed(body, len(included), len(rest), mode)
    notice = f"\n\n[Section truncated to {budget} bytes]"
    room = budget - nb(notice)
    if room <= 0:
        return B.Compressed("", 0, len(items), "empty")
    return B.Compressed(B.truncate_utf8(full, room).rstrip() + notice, 0, len(items), "truncated")


@settings(max_examples=int(os.environ.get("MEMOFS_HYPOTHESIS_EXAMPLES", "60")), deadline=None)
@given(items=st.lists(st.text(alphabet, max_size=120), max_size=40), sep=st.sampled_from(["\n", "\n\n"]),
       budget=st.integers(0, 3000))
def test_compress_matches_the_whole_list_reference(items, sep, budget) -> None:
    assert B.compress(items, sep, budget) == _naive_compress(items, sep, budget)


@settings(max_examples=int(os.environ.get("MEMOFS_HYPOTHESIS_EXAMPLES", "60")), deadline=None)
@given(texts=st.lists(st.text(alphabet, min_size=1, max_size=90).filter(str.strip), min_size=1, max_size=60),
       budget=st.integers(1, 2500))
def test_a_rendered_head_compresses_like_the_whole_list(texts, budget) -> None:
    notes = [mem(i, t, kind="note", days=i) for i, t in enumerate(texts)]
    whole = B.render_notes(notes)
    head = B.render_notes(notes, budget)
    assert head == whole[:len(head)]
    assert B.compress(head, "\n", budget, total=len(whole)) == _naive_compress(whole, "\n", budget)


def test_briefing_renders_only_the_head_of_many_notes_and_expands_like_the_whole() -> None:
    notes = [mem(i, f"note {i} about the deploy window and the {i % 7} rollback runbook", kind="note",
                 days=i / 100) for i in range(5000)]
    cache = ContextCache(clock=Clock())
    b = brief(recaller(notes[:50]), "deploy window", memories=notes, cache=cache)
    entry = cache.get(cache.keys()[-1])
    shown = len(entry.lists["notes"])
    assert shown < 5000 and entry.meta["totals"]["notes"] == 5000  # a head, with the true length
    cur = next(e for e in b.expandable if e["section"] == "notes")
    assert cur["available"] == 5000 - 3 and "expand (4997 more)" in b.text  # counts from the whole list
    full = B.render_notes(B.newest_notes(notes))
    ex = B.expand_context(cache, cur["cursor"])
    room = B.EXPAND_BUDGET - nb(D) - 2 - nb("## Notes Memory (expanded)\n\n")
    assert ex.text == D + "\n\n## Notes Memory (expanded)\n\n" + _naive_compress(full, "\n", room).body
    # the caller's rendered notes (a store state keeps them) give the same briefing
    again = brief(recaller(notes[:50]), "deploy window", memories=notes, cache=ContextCache(clock=Clock()),
                  notes=B.notes_head(notes))
    def uncursored(text: str) -> str:
        return re.sub(r'expand="[^"]+"', 'expand=""', text)

    assert uncursored(again.text) == uncursored(b.text) and again.sections == b.sections


def test_cache_redacts_the_request_not_the_stored_lists(monkeypatch) -> None:
    from memofs.files import secrets

    seen: list[str] = []
    real = secrets.redact
    monkeypatch.setattr(secrets, "redact", lambda s: seen.append(s) or real(s))
    c = ContextCache(clock=Clock())
    query = "tenant database " + "password" + " = " + "correcthorsebattery"
    e = c.put("ab" * 8, {"notes": [f"- 2026-01-01 stored note {i}" for i in range(1000)]}, {"query": query, "terms": ["a", "b"]})
    assert seen == [query, "a", "b"]  # the meta strings only, however long the lists
    assert e.meta["query"] == "tenant database [REDACTED]" and len(e.lists["notes"]) == 1000
