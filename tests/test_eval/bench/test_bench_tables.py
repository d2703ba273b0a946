"""Benchmark tables and the benchmarks' timer, against values written out by hand."""

import itertools

from memofs_eval.bench import timing


def test_lexical_table_from_given_figures():
    """The lexical report's table for figures chosen by hand: thousands separators, ratios, right alignment."""
    from memofs_eval.bench.lexical import render

    rows = [(1000, 0.123, 0.456, 20000.0, 5000.0, 16000.0, 250.0), (100000, 12.5, 30.25, 1500.4, 800.0, 2000.0, 4.0)]
    got = render(rows, "LoCoMo turns", 200, 5, 20)
    assert got == (
        "Corpus: LoCoMo turns, replicated with perturbation. 200 three-term queries; medians of 5 runs after a warm-up; "
        "rank_bm25 on 20 queries.\n\n"
        "| docs | build memofs (s) | build bm25s (s) | memofs BM25 q/s | bm25s q/s (best path) | ratio BM25/bm25s (target >= 0.8) "
        "| memofs BM25+fuzzy q/s | rank_bm25 q/s | ratio full/rank_bm25 (target >= 20) |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        "| 1,000 | 0.12 | 0.46 | 20,000 | 16,000 | 1.25x | 5,000 | 250.0 | 20x |\n"
        "| 100,000 | 12.50 | 30.25 | 1,500 | 2,000 | 0.75x | 800 | 4.0 | 200x |")


def test_growth_table_from_hand_slopes():
    """Growth rows: an exact n^2 cost is superlinear, a flat peer sublinear, one positive size unfitted."""
    from memofs_eval.bench.plots import growth, growth_table
    from memofs_eval.bench.recall import Series

    rows = growth([Series("recall", "ms", [10, 100, 1000], [1.0, 100.0, 10000.0]),
                   Series("peer", "ms", [10, 100], [2.0, 2.0], peer=True),
                   Series("build", "s", [0, 10], [0.0, 1.0])])
    assert growth_table(rows) == ("| cost | sizes fitted | log-log slope | growth |\n"
                                  "|---|---:|---:|---|\n"
                                  "| recall (ms) | 3 | 2.00 | **superlinear** |\n"
                                  "| peer (ms) | 2 | 0.00 | sublinear (peer) |\n"
                                  "| build (s) | 1 | - | n/a (fewer than two positive sizes) |")


def test_timer_reads_the_clock_around_the_call(monkeypatch):
    """``timed`` returns the call's value and the clock's difference; ``median_time`` warms up once,
    then takes the median of ``repeats`` differences (a fake clock makes them exact)."""
    ticks = itertools.chain([0.0, 2.5], [10.0, 13.0, 20.0, 21.0, 30.0, 38.0])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(ticks))
    assert timing.timed(lambda: "out") == ("out", 2.5)
    calls = []
    assert timing.median_time(lambda: calls.append(1), 3) == 3.0  # durations 3, 1, 8
    assert len(calls) == 4  # the warm-up plus three timed runs
