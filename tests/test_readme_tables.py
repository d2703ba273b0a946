"""The README's evaluation tables are generated from report files, never typed by hand."""

import json

import pandas as pd
import pytest

from memofs_eval.reporting.readme_blocks import MarkerError
from memofs_eval.reporting.readme_tables import fill, headline_table, learned_table


def _results(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["dataset", "method", "subset", "category", "metric", "score"]).to_csv(path, index=False)


def test_headline_reads_heldout_ndcg_and_learned_cv(tmp_path):
    _results(tmp_path / "reports/latest/results.csv", [
        ("agent-memory", "default", "heldout", "all", "ndcg@10", 0.40571),
        ("agent-memory", "default", "all", "all", "ndcg@10", 0.99),  # not the headline subset
        ("agent-memory", "default", "heldout", "all", "mrr@10", 0.5),
        ("agent-memory", "baseline:rrf@raw", "heldout", "paraphrase", "ndcg@10", 0.1),  # a category row
        ("agent-memory", "baseline:rrf@raw", "heldout", "all", "ndcg@10", 0.7553),
    ])
    _results(tmp_path / "reports/locomo/latest/results.csv", [("locomo", "default", "all", "all", "ndcg@10", 0.19585)])
    (tmp_path / "reports/learned").mkdir(parents=True)
    (tmp_path / "reports/learned/summary.json").write_text(json.dumps({"cv": {
        "agent_memory_leave_one_project_out_heldout": {"learned": 0.656},
        "locomo_leave_one_conversation_out": {"learned": 0.5048},
        "transfer": {"trained on LoCoMo": {"agent-memory heldout": 0.63, "LoCoMo (all)": 0.508}}}}))
    table = headline_table(tmp_path)
    assert "| reference pipeline (spec defaults) | 0.406 | 0.196 |" in table
    assert "| ranx RRF (raw query) | 0.755 |  |" in table
    assert table.splitlines()[-1].endswith("| 0.656 | 0.505 |")
    assert "| trained on LoCoMo | 0.630 | 0.508 |" in learned_table(tmp_path)


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
