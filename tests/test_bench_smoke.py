"""Benchmarks run end to end at tiny sizes (timings are not asserted)."""


def test_vector_bench_quick(tmp_path):
    """The vector benchmark runs end to end at smoke sizes and writes its table."""
    from memofs_eval.bench.vector import main

    out = tmp_path / "bench-vector.md"
    table = main(["--quick", "--out", str(out)])
    assert out.read_text(encoding="utf-8") == table
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
