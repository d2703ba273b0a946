"""The README's evaluation tables are generated from report files, never typed by hand."""

import json

import pandas as pd
import pytest

from memofs_eval.reporting.readme_blocks import MarkerError
from memofs_eval.reporting.readme_tables import fill, headline_table


def _results(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["dataset", "method", "subset", "category", "metric", "score"]).to_csv(path, index=False)


def test_headline_reads_heldout_ndcg_and_learned_grouped_cv(tmp_path):
    _results(tmp_path / "reports/latest/results.csv", [
        ("agent-memory", "default", "heldout", "all", "ndcg@10", 0.40571),
        ("agent-memory", "default", "all", "all", "ndcg@10", 0.99),  # not the headline subset
        ("agent-memory", "default", "heldout", "all", "mrr@10", 0.5),
        ("agent-memory", "baseline:rrf@raw", "heldout", "paraphrase", "ndcg@10", 0.1),  # a category row
        ("agent-memory", "baseline:rrf@raw", "heldout", "all", "ndcg@10", 0.7553),
    ])
    _results(tmp_path / "reports/locomo/latest/results.csv", [("locomo", "default", "all", "all", "ndcg@10", 0.19585)])
    assert "learned fusion" not in headline_table(tmp_path)  # no learned study report: no learned row
    (tmp_path / "reports/learned/lodo").mkdir(parents=True)
    (tmp_path / "reports/learned/lodo/summary.json").write_text(json.dumps({"lodo": {
        "agent-memory": {"learned": 0.7, "grouped_nested": 0.656},
        "locomo": {"learned": 0.4, "grouped_nested": 0.5048},
        "longmemeval": {"learned": 0.5, "grouped_nested": 0.9}}}))  # not a column of this table
    table = headline_table(tmp_path)
    assert "| reference pipeline (spec defaults) | 0.406 | 0.196 |" in table
    assert "| ranx RRF (raw query) | 0.755 |  |" in table
    assert table.splitlines()[-1].startswith("| learned fusion (grouped CV, nested selection")
    assert table.splitlines()[-1].endswith("| 0.656 | 0.505 |")


def test_fill_replaces_only_between_markers():
    text = "a\n<!-- x:start -->\nold\n<!-- x:end -->\nb"
    assert fill(text, "<!-- x:start -->", "<!-- x:end -->", "new", "R") == "a\n<!-- x:start -->\nnew\n<!-- x:end -->\nb"
    with pytest.raises(MarkerError):
        fill("no markers", "<!-- x:start -->", "<!-- x:end -->", "new", "R")


def test_sweep_line_reads_manifest_timings(tmp_path):
    from memofs_eval.reporting.readme_tables import sweep_line

    assert "run make eval" in sweep_line(tmp_path)
    m = tmp_path / "reports/locomo/latest/manifest.json"
    m.parent.mkdir(parents=True)
    m.write_text(json.dumps({"spec": {"text": "workers = 3\n"}, "datasets": {"locomo": {
        "queries_evaluated": 1536, "timings": {"signals_s": 6.0, "recombine_and_metrics_s": 40.0, "n_distinct_configs": 200}}}}))
    line = sweep_line(tmp_path)
    assert "locomo (1536 queries): 200 distinct configs" in line and "in 40.0 s on 3 workers (5.0 configs/s" in line


def test_committed_readme_tables_match_the_committed_reports():
    """Every generated block of the README is what its generator makes of the committed reports."""
    from memofs_eval._env import REPO
    from memofs_eval.reporting.readme_blocks import readme_block, update
    from memofs_eval.reporting.readme_tables import render

    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert render(text) == text, "README tables drifted: run `python -m memofs_eval.reporting.readme_tables`"
    perf = REPO / "reports" / "performance.md"
    block = readme_block(perf.read_text(encoding="utf-8"), "reports/performance.md")
    assert update(text, block) == text, "README performance table drifted: run `python -m memofs_eval.reporting.readme_blocks`"


def test_systems_table_reads_each_systems_report(tmp_path):
    """The systems block: mean [CI] per (report, dataset entry, metric), `*` only where the
    Student test against the report's reference is significant after Holm, `(n/N)` for a system
    run on a sample of scopes, agent-memory's ingest / p50 as the cost column."""
    from memofs_eval.reporting.readme_tables import systems_table

    assert "run `python -m memofs_eval.studies.systems" in systems_table(tmp_path)
    cols = ["dataset", "system", "subset", "metric", "mean", "lo", "hi", "n_queries", "n_failed", "scopes", "reference"]
    base = tmp_path / "reports/systems"
    (base / "locomo").mkdir(parents=True)
    pd.DataFrame([("agent-memory", "ref", "heldout", "ndcg@10", 0.40561, 0.357, 0.455, 151, 0, "all", "ref"),
                  ("agent-memory", "lance", "heldout", "ndcg@10", 0.781, 0.7444, 0.8163, 151, 0, "all", "ref"),
                  ("agent-memory", "lance", "heldout", "mrr@10", 0.9, 0.8, 0.95, 151, 0, "all", "ref")],
                 columns=cols).to_csv(base / "results.csv", index=False)
    pd.DataFrame([("agent-memory", "ref", "lance", "ndcg@10", "student", 1e-9, 0.375, 151, 3e-9, True),
                  ("agent-memory", "ref", "lance", "ndcg@10", "fisher", 1e-4, 0.375, 151, 3e-4, True)],
                 columns=["dataset", "a", "b", "metric", "test", "p", "delta", "n_paired", "p_holm", "significant"]
                 ).to_csv(base / "significance.csv", index=False)
    pd.DataFrame([("lance", "agent-memory", 0.364, 22.61), ("ref", "agent-memory", 0.005, 2.7)],
                 columns=["system", "dataset", "ingest_s", "recall_p50_ms"]).to_csv(base / "efficiency.csv", index=False)
    pd.DataFrame([("locomo-paper", "ref", "all", "locomo_recall@10", 0.34, 0.31, 0.37, 1986, 0, "all", "ref"),
                  ("locomo-paper", "mem0", "all", "locomo_recall@10", 0.5, 0.4, 0.6, 600, 0, "3 of 10 scopes (seed 42)", "ref")],
                 columns=cols).to_csv(base / "locomo/results.csv", index=False)
    pd.DataFrame([("locomo-paper", "ref", "mem0", "locomo_recall@10", "student", 0.2, 0.1, 600, 0.4, False)],
                 columns=["dataset", "a", "b", "metric", "test", "p", "delta", "n_paired", "p_holm", "significant"]
                 ).to_csv(base / "locomo/significance.csv", index=False)
    table = systems_table(tmp_path).splitlines()
    assert table[0] == ("| system | agent-memory nDCG@10 (held-out, memofs) | LoCoMo R@10 (locomo-paper, all categories) "
                        "| ingest s / recall p50 ms (agent-memory) |")
    assert table[2] == "| ref | 0.406 [0.357, 0.455] | 0.340 [0.310, 0.370] | 0.01 / 2.7 |"
    assert table[3] == "| lance | 0.781 [0.744, 0.816]* |  | 0.36 / 22.6 |"
    assert table[4] == "| mem0 |  | 0.500 [0.400, 0.600] (3/10) |  |"
    filled = fill("x\n<!-- systems:start -->\nold\n<!-- systems:end -->\n", "<!-- systems:start -->",
                  "<!-- systems:end -->", systems_table(tmp_path), "R")
    assert "\n".join(table) in filled and "old" not in filled


def test_protocols_table_shows_the_columns_with_figures(tmp_path):
    """The field-protocols block: a column per protocol figure its report holds (a dataset entry
    without that metric gives no column), blank cells for methods without the figure."""
    from memofs_eval.reporting.readme_tables import protocols_table

    assert "run make eval-longmemeval" in protocols_table(tmp_path)
    _results(tmp_path / "reports/longmemeval/latest/results.csv", [
        ("longmemeval-session-official", "default", "all", "all", "recall_any@5", 0.91234),
        ("longmemeval-session-official", "baseline:bm25s@raw", "all", "all", "recall_any@5", 0.8),
        ("longmemeval-session-official", "default", "heldout", "all", "recall_any@5", 0.1),  # not the `all` subset
        ("longmemeval-turn-official", "default", "all", "all", "recall_any@1", 0.5),  # not a column's metric
    ])
    _results(tmp_path / "reports/locomo/latest/results.csv", [("locomo-paper", "profile:robust", "all", "all", "locomo_recall@10", 0.4442)])
    assert protocols_table(tmp_path).splitlines()[:9] == [
        "| method | LME session run R_any@5, official 470 | LoCoMo R@10, locomo-paper (all categories) |",
        "|---|---:|---:|",
        "| reference pipeline | 0.912 |  |",
        "| `robust` profile |  | 0.444 |",
        "| rank_bm25 BM25Okapi (the field's BM25) |  |  |",
        "| bm25s | 0.800 |  |",
        "| dense (MiniLM) |  |  |",
        "| ranx RRF |  |  |",
        "| ranx weighted sum, tuned |  |  |",
    ]
