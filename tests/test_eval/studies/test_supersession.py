"""Supersession ranks (issue 20): a superseded memory is demoted by ``superseded_penalty``,
through the CLI, the fusion arithmetic, the memory- and graph-level rules, the briefing's
"currently: ...; supersedes ..." line and the sweep's selection rule."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from memofs.files.records import GraphEdge, GraphNode, Memory
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.config import RecallConfig
from memofs.ranking.fusion import fuse
from memofs.ranking.recall import Recaller
from memofs.signals.frame import SignalFrame, kind_code
from memofs.store.briefing import render_recall, supersession_line
from memofs.surfaces.cli import app

from memofs_eval.studies.supersession_sweep import choose

ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
runner = CliRunner()


def cli(root: Path, *args: str) -> dict:
    res = runner.invoke(app, ["--root", str(root), *args, "--json"], env=ENV)
    assert res.exit_code == 0, (args, res.output, res.exception)
    return json.loads(res.stdout)


def ssh_store(root: Path) -> tuple[str, str]:
    runner.invoke(app, ["--root", str(root), "init"], env=ENV)
    old = cli(root, "remember", "SSH port is 22")["id"]
    new = cli(root, "remember", "SSH port is now 49222", "--supersedes", old)["id"]
    return old, new


def test_issue_case_replacement_ranks_first_through_the_cli(tmp_path: Path) -> None:
    old, new = ssh_store(tmp_path)
    out = cli(tmp_path, "recall", "-q", "ssh port", "--explain")["results"]
    assert [r["id"] for r in out] == [new, old]
    pen = out[1]["explain"]["penalties"]
    assert pen == [{"name": "superseded", "factor": RecallConfig().superseded_penalty, "reason": f"superseded by {new}"}]
    # the penalty is exactly the factor on the old memory's composite (penalty-free) score
    comp = out[1]["explain"]["components"]
    assert out[1]["score"] == pytest.approx(round(comp["composite"] * RecallConfig().superseded_penalty, 4), abs=1e-12)
    assert out[0]["explain"]["penalties"] == []


def test_switched_off_the_old_memory_outranks_again(tmp_path: Path) -> None:
    """The case the issue filed: without supersession the shorter old text wins (so the
    test above measures the penalty, not a lucky tie)."""
    old, new = ssh_store(tmp_path)
    cfg_path = tmp_path / ".memofs" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["recall"] = {"use_supersession": False}
    cfg_path.write_text(json.dumps(cfg))
    out = cli(tmp_path, "recall", "-q", "ssh port")["results"]
    assert [r["id"] for r in out] == [old, new]


def test_briefing_shows_currently_and_supersedes_for_memories(tmp_path: Path) -> None:
    ssh_store(tmp_path)
    res = runner.invoke(app, ["--root", str(tmp_path), "context", "-q", "ssh port"], env=ENV)
    assert res.exit_code == 0, res.output
    assert "1. SSH port is now 49222\n score: " in res.stdout
    assert " ↳ currently: SSH port is now 49222; supersedes SSH port is 22" in res.stdout
    assert " ↳ superseded; currently: SSH port is now 49222" in res.stdout


def test_supersession_line_wording() -> None:
    texts = {"a": "Use JWT", "b": "Use OAuth", "c": "Use OAuth 2.1 with PKCE"}
    assert supersession_line("b", "Use OAuth", ("a",), (), texts.get) == "currently: Use OAuth; supersedes Use JWT"
    assert supersession_line("a", "Use JWT", (), ("b", "c"), texts.get) == \
        "superseded; currently: Use OAuth; currently: Use OAuth 2.1 with PKCE"
    assert supersession_line("b", "Use OAuth", ("gone",), (), texts.get) is None  # unknown ids left out
    assert supersession_line("x", "x", (), (), texts.get) is None
    # without the supersession inputs the rendering is the one the harness measures
    class R:
        id, text, score, explain, memory = "a", "Use JWT", 0.5, None, Memory("a", "Use JWT")
    assert render_recall([R()]) == ["1. Use JWT\n score: 0.5000"]


def frame(superseded: list[bool]) -> SignalFrame:
    n = len(superseded)
    ids = tuple(f"m{i}" for i in range(n))
    return SignalFrame(
        ids=ids, order_key=np.arange(n), bm25=np.full(n, 1.0), fuzzy=np.zeros(n), cosine=np.full(n, 0.5),
        rerank=np.full(n, np.nan), age_days=np.full(n, np.nan), confidence=np.full(n, np.nan),
        kind=np.full(n, kind_code("note")), stale=np.zeros(n, bool), is_graph=np.zeros(n, bool),
        vector_ok=True, superseded=np.array(superseded),
    )


def test_fusion_multiplies_superseded_rows_by_the_penalty() -> None:
    # by hand: base = 0.6 * 0.5 + 0.4 * 1 / (1 + 2) = 0.43333...; final = 0.7 base + 0.2 * 0.5 + 0.1 * 0.5
    composite = 0.7 * (0.6 * 0.5 + 0.4 / 3) + 0.2 * 0.5 + 0.1 * 0.5
    cfg = RecallConfig(use_reranker=False, round_decimals=12, superseded_penalty=0.6)
    out = fuse(frame([True, False]), cfg)
    got = dict(zip(out.ids(frame([True, False])), out.scores.tolist()))
    assert got["m1"] == pytest.approx(composite, abs=1e-12)
    assert got["m0"] == pytest.approx(0.6 * composite, abs=1e-12)
    assert out.ids(frame([True, False])) == ["m1", "m0"]  # without it m0 wins the tie by id
    # the switch and the neutral penalty are the same ablation (as every toggle and its zero weight)
    off = fuse(frame([True, False]), cfg.replace(use_supersession=False))
    neutral = fuse(frame([True, False]), cfg.replace(superseded_penalty=1.0))
    assert off.ids(frame([True, False])) == neutral.ids(frame([True, False])) == ["m0", "m1"]
    assert off.scores.tolist() == neutral.scores.tolist() == [pytest.approx(composite, abs=1e-12)] * 2


def test_penalty_is_validated() -> None:
    with pytest.raises(ValueError, match="superseded_penalty"):
        RecallConfig(superseded_penalty=1.5)
    with pytest.raises(ValueError, match="use_supersession"):
        RecallConfig(use_supersession=1)


def mem(i: str, text: str, supersedes=(), entities=()) -> Memory:
    return Memory(i, text, created_at=NOW, supersedes=tuple(supersedes),
                  metadata={"entities": list(entities)} if entities else {})


def test_superseded_by_memory_and_graph_rules() -> None:
    g = EntityGraph(
        [GraphNode("jwt", "JWT"), GraphNode("oauth", "OAuth"), GraphNode("kv", "KV"), GraphNode("do", "Durable Objects")],
        [GraphEdge("oauth", "jwt", "supersedes"), GraphEdge("do", "kv", "supersedes", status="retired")],
    )
    rec = Recaller(graph=g)
    rec.add([
        mem("m1", "SSH port is 22"),
        mem("m2", "SSH port is now 49222", supersedes=["m1", "m9-unknown"]),
        mem("m3", "Self reference", supersedes=["m3"]),
        mem("m4", "Tokens are JWTs", entities=["jwt"]),  # linked to the superseded entity
        mem("m5", "We moved from JWT to OAuth", entities=["jwt", "oauth"]),  # states the change itself
        mem("m6", "Rate limits in KV", entities=["kv"]),  # its supersedes edge is retired
    ])
    assert rec.superseded_by() == {"m1": ("m2",), "m4": ("graph:oauth",)}
    frame = rec.signals("ssh port tokens", now=NOW)
    assert {frame.ids[i] for i in np.flatnonzero(frame.superseded)} == {"m1", "m4"}
    rec.remove(["m2"])  # the corpus changed: m1 is current again
    assert rec.superseded_by() == {"m4": ("graph:oauth",)}


def test_online_recall_and_harness_frame_agree_with_supersession() -> None:
    rec = Recaller()
    rec.add([mem("a", "SSH port is 22"), mem("b", "SSH port is now 49222", supersedes=["a"]), mem("c", "ssh keys rotate")])
    cfg = RecallConfig()
    online = [(r.id, r.score) for r in rec.recall("ssh port", 3, now=NOW)]
    fr = rec.signals("ssh port", now=NOW)
    f = fuse(fr, cfg, 3)
    assert online == list(zip(f.ids(fr), f.scores.tolist()))
    assert online[0][0] == "b"


def test_sweep_choice_rule() -> None:
    """Lowest superseded_above_current on the tune split's temporal queries, then the best
    nDCG@10, then the mildest penalty; the held-out split never counts."""
    rows = []
    for p, sac, nd, held in ((1.0, 0.2, 0.50, 0.9), (0.8, 0.0, 0.40, 0.1), (0.6, 0.0, 0.45, 0.1), (0.4, 0.0, 0.45, 0.9)):
        rows += [{"penalty": p, "split": "tune", "subset": "temporal", "metric": "superseded_above_current", "mean": sac, "n": 5},
                 {"penalty": p, "split": "tune", "subset": "temporal", "metric": "ndcg@10", "mean": nd, "n": 5},
                 {"penalty": p, "split": "heldout", "subset": "temporal", "metric": "ndcg@10", "mean": held, "n": 5}]
    assert choose(pd.DataFrame(rows)) == 0.6


def test_sweep_cli_refuses_a_bad_count_in_one_line(tmp_path: Path, capsys) -> None:
    from memofs_eval.studies.supersession_sweep import main

    assert main(["--out", str(tmp_path), "--count", "locomo-without-loader"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "memofs-eval: error: --count 'locomo-without-loader': expected NAME=PATH:LOADER"
    assert main(["--out", str(tmp_path), "--dataset", "nope"]) == 1
    assert "no dataset 'nope'" in capsys.readouterr().err
