"""Benchmarks run end to end at tiny sizes (timings are not asserted)."""

import pytest

from memofs_eval.provenance.stamp import recorded, stale


def test_vector_bench_quick_without_encoders(tmp_path):
    """The search and rehydration sections at smoke sizes, without loading an embedder (the
    inner loop's share of the next test); the table is written with a current provenance."""
    from memofs_eval.bench.vector import main

    out = tmp_path / "bench-vector.md"
    table = main(["--quick", "--skip-encode", "--out", str(out)])
    written = out.read_text(encoding="utf-8")
    assert written.startswith(table) and stale(recorded(written)) == []
    assert "Encode throughput" not in table and "MiniLM" not in table
    for heading in ("Top-10 search latency", "Rehydration"):
        assert heading in table
    assert "| 200 |" in table and "| 1,000 |" in table and "| 500 |" in table


@pytest.mark.slow
def test_vector_bench_quick(tmp_path):
    """The vector benchmark runs end to end at smoke sizes and writes its table (slow: it loads
    MiniLM through torch and the static embedder)."""
    from memofs_eval.bench.vector import main

    out = tmp_path / "bench-vector.md"
    table = main(["--quick", "--out", str(out)])
    written = out.read_text(encoding="utf-8")
    assert written.startswith(table) and stale(recorded(written)) == []
    for heading in ("Encode throughput", "Top-10 search latency", "Rehydration"):
        assert heading in table
    assert "MiniLM" in table and "LSA" in table and "| 1,000 |" in table


def test_lexical_bench_quick(tmp_path):
    """The lexical benchmark runs end to end at smoke size and writes its table."""
    from memofs_eval.bench.lexical import main

    out = tmp_path / "bench-lexical.md"
    table = main(["--quick", "--out", str(out)])
    assert table in out.read_text(encoding="utf-8")
    assert "| 200 |" in table and "bm25s" in table and "rank_bm25" in table


# --- performance suite (eval/bench/{recall,store,harness,all,readme,plots}.py) -------------
import re
from collections import Counter

import numpy as np

from support import HashEmbedder


def test_loglog_slope_hand_values():
    """Slopes of exact power laws, the zero-value rule and the superlinear flag."""
    from memofs_eval.bench.plots import Growth, loglog_slope

    assert loglog_slope([10, 100, 1000], [1.0, 100.0, 10000.0])[0] == pytest.approx(2.0)
    assert loglog_slope([10, 100, 1000], [3.0, 30.0, 300.0])[0] == pytest.approx(1.0)
    # y = 5 sqrt(n): slope 1/2
    assert loglog_slope([4, 16, 64], [10.0, 20.0, 40.0])[0] == pytest.approx(0.5)
    # a zero cost is left out of the fit; one positive point cannot be fitted
    assert loglog_slope([10, 100, 1000], [0.0, 10.0, 100.0]) == (pytest.approx(1.0), 2)
    assert loglog_slope([10, 100], [0.0, 5.0]) == (None, 1)
    assert Growth("x", "ms", 1.2, 3, False).superlinear and not Growth("x", "ms", 1.05, 3, False).superlinear


def test_corpus_copies_follow_base_order():
    """doc_vectors relies on corpus(): text L + i is a perturbed copy of base text i
    (same words once the copy-number suffixes are stripped)."""
    from memofs_eval.bench.corpus import base_texts, corpus

    base, _ = base_texts()
    docs = corpus(len(base) + 5)
    strip = lambda t: Counter(re.sub(r"\d+$", "", w) for w in t.split())  # noqa: E731
    for i in range(5):
        assert strip(docs[len(base) + i]) == strip(base[i])


def test_doc_vectors_reuse_base_vectors(tmp_path):
    """Rows below E are the embedder's vectors; row j >= E is unit-norm and close to row j mod E."""
    from memofs.signals.embedding_cache import EmbeddingCache
    from memofs_eval.bench.recall import doc_vectors

    texts = [f"text number {i} about the harbor deploy" for i in range(10)]
    emb = HashEmbedder(dim=16, unit=True)  # unit vectors, as MiniLM's
    vecs, e = doc_vectors(texts, cap=4, noise=0.02, seed=3, cache=EmbeddingCache(tmp_path), embedder=emb)
    assert e == 4 and vecs.shape == (10, 16)
    np.testing.assert_allclose(vecs[:4], emb.encode(texts[:4]), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    for j in range(4, 10):
        # expected cosine ~ 1 / sqrt(1 + 16 * 0.02^2) ~ 0.997
        assert float(vecs[j] @ vecs[j % 4]) > 0.95
        assert float(vecs[j] @ vecs[(j + 1) % 4]) < 0.9
    again, _ = doc_vectors(texts, cap=4, noise=0.02, seed=3, cache=EmbeddingCache(tmp_path), embedder=emb)
    np.testing.assert_array_equal(vecs, again)


def test_staged_replay_matches_recall(tmp_path):
    """The stage profile replays Recaller.recall exactly (ids and scores), with every stage timed."""
    from memofs_eval.bench.recall import (
        NOW, STAGES, FrozenQueryEmbedder, RecallBenchConfig, build, staged_recall, workload,
    )
    from memofs.signals.embedding_cache import EmbeddingCache

    cfg = RecallBenchConfig(sizes=(120,), queries=5, encode_cap=30)
    emb = HashEmbedder(dim=16, unit=True)  # unit vectors, as MiniLM's
    w = workload(120, cfg, tmp_path, EmbeddingCache(tmp_path / "cache"), emb)
    rec = build(w)
    rec.embedder.inner = emb
    assert any(m.anchors for m in w.memories) and len(rec.graph) > 0
    for q in w.queries:
        got, t = staged_recall(rec, q, NOW, 10)
        assert got == [(r.id, r.score) for r in rec.recall(q, 10, now=NOW)]
        assert set(t) == set(STAGES) and all(v >= 0 for v in t.values())
        assert t["query embedding"] > 0 and t["vector cosine"] > 0
    frozen = FrozenQueryEmbedder("x", {})
    with pytest.raises(KeyError):
        frozen.encode(["not in the table"])
    assert frozen.misses == 1


def test_readme_block_and_markers(tmp_path):
    """The README block is the headline table of performance.md; markers are checked."""
    from memofs_eval.reporting.readme_blocks import MarkerError, main, readme_block, update

    perf = ("# Performance\n\nRun: 2026-01-01 00:00 UTC, default sizes\n\n<!-- headline:start -->\n"
            "| measure | memofs |\n|---|---:|\n| recall | 1 ms |\n<!-- headline:end -->\n")
    block = readme_block(perf)
    assert block.startswith("| measure | memofs |\n|---|---:|\n| recall | 1 ms |")
    assert "2026-01-01 00:00 UTC" in block and "make bench" in block
    readme = "# memofs\n\nintro\n<!-- bench:start -->\nold table\n<!-- bench:end -->\ntail\n"
    new = update(readme, block)
    assert new == "# memofs\n\nintro\n<!-- bench:start -->\n" + block + "\n<!-- bench:end -->\ntail\n"
    assert update(new, block) == new  # idempotent
    assert update("# no markers\n", block) is None
    with pytest.raises(MarkerError, match=r"README.md:2: <!-- bench:end --> comes before"):
        update("x\n<!-- bench:end -->\n<!-- bench:start -->\n", block)
    with pytest.raises(MarkerError, match="without"):
        update("<!-- bench:start -->\n", block)
    # end to end on files; a README without markers is left alone
    (tmp_path / "performance.md").write_text(perf)
    (tmp_path / "README.md").write_text(readme)
    main(["--perf", str(tmp_path / "performance.md"), "--readme", str(tmp_path / "README.md")])
    assert "| recall | 1 ms |" in (tmp_path / "README.md").read_text()
    (tmp_path / "R2.md").write_text("plain\n")
    printed = main(["--perf", str(tmp_path / "performance.md"), "--readme", str(tmp_path / "R2.md")])
    assert printed == readme_block(perf, str(tmp_path / "performance.md"))
    assert (tmp_path / "R2.md").read_text() == "plain\n"


def test_report_growth_and_figures(tmp_path):
    """The report flags a hand-made quadratic cost, draws PNGs and carries the headline markers."""
    from memofs_eval.bench.all import report
    from memofs_eval.reporting.readme_blocks import readme_block
    from memofs_eval.bench.recall import Section, Series

    sizes = [1000, 10000, 100000]
    sec = Section("Synthetic", "body", [
        Series("quadratic cost", "ms", sizes, [n * n / 1e6 for n in sizes], figure="latency"),
        Series("linear peer", "ms", sizes, [n / 1e3 for n in sizes], peer=True, figure="latency"),
        Series("flat memory", "MiB", sizes, [5.0, 5.0, 5.0], figure="memory"),
    ], [("thing at 100,000", "2 ms", "1 ms", "2.00x")])
    text = report([sec], {}, quick=True, wall_s=1.0, out_dir=tmp_path)
    assert "**quadratic cost** (slope 2.00)" in text and "linear peer" not in text.split("Superlinear costs")[1]
    assert "| quadratic cost (ms) | 3 | 2.00 | **superlinear** |" in text
    assert "| flat memory (MiB) | 3 | 0.00 | sublinear |" in text
    for name in ("recall-latency.png", "recall-memory.png"):
        assert (tmp_path / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| thing at 100,000 | 2 ms | 1 ms | 2.00x |" in readme_block(text)
    assert "CPU:" in text and "threadpoolctl" in text


@pytest.mark.slow
def test_recall_bench_quick(tmp_path):
    """The end-to-end recall benchmark runs at smoke sizes (MiniLM, RSS subprocesses, briefing)."""
    from memofs_eval.bench.recall import main

    out = tmp_path / "bench-recall.md"
    text = main(["--quick", "--out", str(out)])
    assert out.read_text(encoding="utf-8") == text
    assert "| 300 |" in text and "| 1,000 |" in text and "peak MiB" in text and "anchor check" in text
    assert "bare encode p50 ms" in text and "limit: encode + 1.5 x peer" in text


@pytest.mark.slow
def test_store_bench_quick(tmp_path):
    """The store benchmark runs at smoke sizes (or reports that memofs.store.project is absent)."""
    from memofs_eval.bench.store import main

    text = main(["--quick", "--out", str(tmp_path / "s.md")])
    assert "Rehydration" in text or "Skipped" in text
    if "Rehydration" in text:  # the CLI start table: a process on the largest store and on an empty one, both embedders
        assert "added by the store s" in text and "| 300 | none |" in text and "| 300 | MiniLM |" in text
        # the kernels table: numba's processes import it, numpy's (the CLI's) never do
        assert "| numba | yes |" in text and "| numpy | no |" in text


def test_harness_bench_quick(tmp_path):
    """The harness benchmark runs on the tiny dataset."""
    from memofs_eval.bench.harness import main

    text = main(["--quick", "--out", str(tmp_path / "h.md")])
    assert "configs/s (warm)" in text and "`tiny`" in text


def test_random_configs_vary_fusion_only():
    """Sweep configs share one signal group and keep the weight sum at most 1."""
    from memofs.ranking.config import RecallConfig
    from memofs_eval.bench.harness import random_configs

    cs = random_configs(50, seed=1)
    assert len({c.config_hash() for c in cs}) == 50
    assert {c.signal_key() for c in cs} == {RecallConfig().signal_key()}
    assert all(c.w_relevance + c.w_recency + c.w_confidence <= 1.0 + 1e-9 for c in cs)


def test_make_eval_command_reads_recipe(tmp_path):
    """`make eval` is timed through its recipe (never its install step); errors name the file."""
    import sys

    from memofs_eval.bench.harness import make_eval_command

    mk = tmp_path / "Makefile"
    mk.write_text("PY := x\ninstall:\n\tpip install .\n\neval: install\n\t$(PY) -m memofs_eval.cli run eval/specs/default.toml --quiet\n")
    assert make_eval_command(mk) == [sys.executable, "-m", "memofs_eval.cli", "run", "eval/specs/default.toml", "--quiet"]
    mk.write_text("eval: install\n\nother:\n\techo\n")
    with pytest.raises(ValueError, match=r"Makefile:2: target 'eval' has no recipe"):
        make_eval_command(mk)
    mk.write_text("test:\n\tpytest\n")
    with pytest.raises(ValueError, match="no 'eval:' target"):
        make_eval_command(mk)


@pytest.mark.slow
def test_processes_bench_quick(tmp_path):
    """Issue 38's rows: every command on both stores, MiniLM (ONNX) next to lexical-only, and
    the two runtime environments' sizes."""
    from memofs_eval.bench.processes import COMMANDS, main

    text = main(["--quick", "--out", str(tmp_path / "p.md")])
    for command in COMMANDS:
        assert f"| {command} | 0 |" in text and f"| {command} | 300 |" in text
    assert "through ONNX Runtime" in text and "torch + sentence-transformers" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| recall | 300 |")).split("|")
    cpu = float(row[6])  # MiniLM's CPU seconds (user + system), from the launcher's rusage
    assert 0 < cpu and "load average" in text


def test_install_sizes_sum_the_record_files():
    """A distribution's size is the sum of the sizes its RECORD lists (read here with csv);
    the ONNX environment holds onnxruntime and no torch, the other torch and no onnxruntime."""
    import csv
    from importlib import metadata

    from memofs_eval.bench.processes import _closure, install_sizes

    dist = metadata.distribution("filelock")
    record = [row for row in csv.reader(dist.read_text("RECORD").splitlines()) if row]
    assert _closure(["filelock"], set()) == {"filelock": sum(int(r[2]) for r in record if len(r) > 2 and r[2])}
    onnx_env, torch_env = install_sizes()
    assert onnx_env[1] < torch_env[1]
    assert "torch" in torch_env[2][0] and not any(p.startswith("torch ") for p in onnx_env[2])


@pytest.mark.slow
def test_rerank_bench_quick(tmp_path):
    """The reranker benchmark runs end to end at smoke sizes on a given model directory: every
    engine has its row, the torch peer's ratio is 1.00x by definition, and the cross-encoder's
    recall row names the top N it scored."""
    from memofs_eval.bench.rerank import main, seeded_cross_encoder

    model = seeded_cross_encoder(tmp_path / "ce")
    out = tmp_path / "bench-rerank.md"
    text = main(["--quick", "--model", str(model), "--out", str(out)])
    assert out.read_text(encoding="utf-8") == text
    for row in ("cross-encoder, ONNX Runtime (memofs)", "deterministic token overlap (spec)",
                "cross-encoder, top 4", "deterministic (reference)"):
        assert row in text
    assert "| 4 | cross-encoder, sentence-transformers (torch peer) |" in text and "| 1.00x |" in text
