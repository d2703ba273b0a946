"""Upstream's phrase scan of core.md and notes.md (upstream-facts section 2) as recall's
extra lexical candidates (issue 20): block splitting, hand-computed block scores, ids,
fusion of a block's score, the CLI case and the off switch."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memofs.files.records import Memory
from memofs.ranking.config import RecallConfig
from memofs.ranking.recall import Recaller
from memofs.signals.phrase_scan import PhraseScanner, block_score, blocks_of, fnv1a64, split_blocks
from memofs.surfaces.cli import app

ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
runner = CliRunner()

CORE = "# Core Memory\r\n\r\n## Stable Facts\n\n- The primary database is Postgres 16 on Neon.\n\n## Postgres\n\npostgres pooling: pgBouncer; Postgres replicas\n\n### not a section\n"


def test_fnv1a64_published_vectors() -> None:
    # the FNV-1a 64-bit test vectors of the reference (draft-eastlake-fnv, isthe.com/chongo/tech/comp/fnv)
    assert fnv1a64("") == "cbf29ce484222325"
    assert fnv1a64("a") == "af63dc4c8601ec8c"
    assert fnv1a64("foobar") == "85944171f73967e8"


def test_section_mode_blocks() -> None:
    assert split_blocks(CORE) == [
        "# Core Memory",
        "## Stable Facts\n\n- The primary database is Postgres 16 on Neon.",
        "## Postgres\n\npostgres pooling: pgBouncer; Postgres replicas\n\n### not a section",
    ]


def test_line_mode_without_a_section_heading() -> None:
    # "### x" and "##x" are not "## " + whitespace at a line start: line mode
    assert split_blocks("### x\n  first  \n\n##x second\r\nthird") == ["### x", "first", "##x second", "third"]


def test_block_scores_by_hand() -> None:
    b0, b1, b2 = split_blocks(CORE)
    assert block_score(b0, "postgres") == 0
    assert block_score(b1, "postgres") == 1  # one occurrence, not at the start, no "## postgres"
    # "## postgres\n\npostgres pooling: pgbouncer; postgres replicas...": 3 occurrences,
    # +2 it starts with the phrase? no ("## " first), +3 it holds "## postgres"
    assert block_score(b2, "postgres") == 3 + 3
    assert block_score("postgres first, postgrespostgres", "postgres") == 3 + 2  # non-overlapping count, +2 start
    assert block_score("aaaa", "aa") == 2 + 2  # "aa" twice without overlap, and at the start
    assert block_score(b2, "") == 0


def test_scan_orders_cuts_and_names_blocks() -> None:
    sc = PhraseScanner({"core": CORE, "notes": "Postgres notes\nnothing here"})
    hits = sc.scan("  PostGres ", 2)  # trimmed and lowercased, matched as a phrase
    got = [(h.block.id, h.score, h.lexical) for h in hits]
    b = blocks_of("core", CORE)
    assert got == [
        (f"core_2_{fnv1a64(b[2].text)[:12]}", 6, 0.6),
        (f"core_1_{fnv1a64(b[1].text)[:12]}", 1, 0.1),
        (f"notes_0_{fnv1a64('Postgres notes')[:12]}", 3, 0.3),  # 1 + 2 (starts with it)
    ]
    assert [h.block.id for h in sc.scan("postgres", 1)] == [got[0][0], got[2][0]]  # top `limit` per file
    assert sc.scan("   ", 5) == []  # upstream: a blank query is refused, the error swallowed
    assert sc.scan("postgres 16 on neon", 5)[0].score == 1  # a phrase, not tokens
    assert sc.scan("neon postgres", 5) == []


def test_block_score_enters_fusion_clamped_not_saturated() -> None:
    rec = Recaller(RecallConfig(use_reranker=False, round_decimals=12))
    rec.add([Memory("m1", "Tabs in Makefiles", created_at=NOW)])
    rec.set_phrase_sources({"core": CORE})
    out = rec.recall("postgres", 10, now=NOW, explain=True)
    assert [(r.source, r.id[:7]) for r in out] == [("core", "core_2_"), ("core", "core_1_")]
    # lexical only (no embedder): base = clamp01(0.6) = 0.6; final = 0.7 * 0.6 + 0.2 * 0.5 + 0.1 * 0.5
    assert out[0].score == pytest.approx(0.7 * 0.6 + 0.2 * 0.5 + 0.1 * 0.5, abs=1e-12)
    assert out[1].score == pytest.approx(0.7 * 0.1 + 0.15, abs=1e-12)
    assert out[0].explain["signals"]["lexical_saturated"] == 0.6
    assert out[0].text.startswith("## Postgres")
    # the harness's frame path gives the same ranking and scores
    from memofs.ranking.fusion import fuse

    cfg = rec.config
    fr = rec.signals("postgres", now=NOW)
    f = fuse(fr, cfg, 10)
    assert list(zip(f.ids(fr), f.scores.tolist())) == [(r.id, r.score) for r in out]
    # switched off: the blocks are gone, memories rank as before
    assert rec.recall("postgres", 10, now=NOW, config=cfg.replace(use_phrase_scan=False)) == []
    assert [r.id for r in rec.recall("tabs", 10, now=NOW, config=cfg.replace(use_phrase_scan=False))] == ["m1"]


def test_blocks_join_the_pool_beside_bm25() -> None:
    """Blocks are candidates of their own (upstream unions BM25's top K*2 with each file's
    top K*2 blocks): they never push a BM25 candidate out of its pool."""
    rec = Recaller(RecallConfig(top_k=1))  # the frame's scan is sized by top_k
    rec.add([Memory(f"m{i}", f"postgres fact {i}", created_at=NOW) for i in range(3)])
    rec.set_phrase_sources({"core": "postgres a\npostgres b\npostgres c"})
    out = rec.recall("postgres", 1, now=NOW)  # K = 1: BM25 pool 2, each file's blocks 2
    from memofs.ranking.pools import pools

    frame = rec.signals("postgres", now=NOW)
    p = pools(frame, rec.config, 1)
    ids = [frame.ids[i] for i in p.rows.tolist()]
    assert sum(i.startswith("m") for i in ids) == 2 and sum(i.startswith("core_") for i in ids) == 2
    assert len(out) == 1


def cli(root: Path, *args: str) -> dict:
    res = runner.invoke(app, ["--root", str(root), *args, "--json"], env=ENV)
    assert res.exit_code == 0, (args, res.output, res.exception)
    return json.loads(res.stdout)


def test_cli_recall_finds_core_md(tmp_path: Path) -> None:
    runner.invoke(app, ["--root", str(tmp_path), "init"], env=ENV)
    assert cli(tmp_path, "recall", "-q", "postgres")["results"] == []
    core = tmp_path / ".memofs" / "memory" / "core.md"
    core.write_text("# Core Memory\n\n## Stable Facts\n\n- The primary database is Postgres 16 on Neon.\n")
    (tmp_path / ".memofs" / "memory" / "notes.md").write_text("# Notes\n\n## 2026-01-01T00:00:00Z\n\nPostgres backups run nightly.\n")
    out = cli(tmp_path, "recall", "-q", "postgres")["results"]
    assert [(r["kind"], r["text"]) for r in out] == [
        ("core", "## Stable Facts\n\n- The primary database is Postgres 16 on Neon."),
        ("notes", "## 2026-01-01T00:00:00Z\n\nPostgres backups run nightly."),
    ]
    human = runner.invoke(app, ["--root", str(tmp_path), "recall", "-q", "postgres"], env=ENV).stdout
    assert human.startswith("1. [core]") and "Postgres 16 on Neon" in human
    cfg_path = tmp_path / ".memofs" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["recall"] = {"use_phrase_scan": False}
    cfg_path.write_text(json.dumps(cfg))
    assert cli(tmp_path, "recall", "-q", "postgres")["results"] == []


def test_live_store_follows_core_and_notes_edits(tmp_path: Path) -> None:
    """A long-lived view (the MCP server) re-reads core.md / notes.md when they change,
    without a full reload of the memories."""
    import os

    from memofs.store.project import LiveStore, Store

    Store.init(tmp_path, now=NOW)
    store = Store.open(tmp_path, clock=lambda: NOW)
    store.remember("Tabs in Makefiles")
    live = LiveStore(store)
    assert [r.source for r in live.state().recaller.recall("postgres", 5, now=NOW)] == []
    loads = live.full_loads
    core = tmp_path / ".memofs" / "memory" / "core.md"
    core.write_text("## Stable Facts\n\n- Postgres 16.\n")
    os.utime(core, ns=(1, 1))  # a different mtime even on a coarse clock
    assert [r.source for r in live.state().recaller.recall("postgres", 5, now=NOW)] == ["core"]
    notes = tmp_path / ".memofs" / "memory" / "notes.md"
    notes.write_text("Postgres backups nightly\n")
    # the notes line starts with the phrase: 1 + 2 against the core block's 1
    assert [r.source for r in live.state().recaller.recall("postgres", 5, now=NOW)] == ["notes", "core"]
    assert live.full_loads == loads



def test_context_does_not_repeat_core_blocks(tmp_path):
    """The briefing shows core.md in its own section, so a phrase-scan hit on core.md is not
    listed again under recall; with the core section off, the block is recalled."""
    from memofs.store.cursor import ContextCache
    from memofs.store.project import LiveStore, Store
    from memofs.surfaces.mcp_server import MemofsTools

    from datetime import datetime, timezone

    now = datetime(2026, 3, 1, tzinfo=timezone.utc)
    store = Store.init(tmp_path, clock=lambda: now)
    store.write_core("# Core Memory\n\n- We run Postgres 16 in production.\n")
    store.remember("Frontend uses React Query for server state", kind="note")
    tools = MemofsTools(LiveStore(store), ContextCache(clock=lambda: 0.0), lambda: now)
    with_core = tools.call("memofs.context", {"query": "postgres"})
    assert with_core["text"].count("Postgres 16") == 1
    without = tools.call("memofs.context", {"query": "postgres", "includeCore": False})
    assert without["text"].count("Postgres 16") == 1  # now only as a recalled core.md block
