"""The quality-latency figure (notebook 06) plots exactly the systems reports' rows: checked
against the CSVs read back with pandas, on synthetic reports and on the committed ones."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from memofs_eval.reporting import quality_latency as ql  # noqa: E402
from support import REPO_ROOT  # noqa: E402

RES_COLS = ["dataset", "system", "subset", "metric", "mean", "lo", "hi", "n_queries", "n_failed", "scopes", "reference"]


def _report(folder: Path, dataset: str, rows: list[tuple], protocol: str = "memofs") -> None:
    """A systems report folder: rows are (system, ndcg mean, lo, hi, p50 ms, scopes)."""
    folder.mkdir(parents=True, exist_ok=True)
    res = []
    for system, mean, lo, hi, _, scopes in rows:
        res.append((dataset, system, "all", "ndcg@10", mean, lo, hi, 40, 0, scopes, rows[0][0]))
        res.append((dataset, system, "all", "mrr@10", 0.99, 0.98, 1.0, 40, 0, scopes, rows[0][0]))  # another metric
    pd.DataFrame(res, columns=RES_COLS).to_csv(folder / "results.csv", index=False)
    pd.DataFrame([(s, dataset, p50) for s, *_, p50, _ in rows], columns=["system", "dataset", "recall_p50_ms"]).to_csv(
        folder / "efficiency.csv", index=False)
    (folder / "report.md").write_text(
        f"# Memory systems\n\n## {dataset}\n\n*Protocol:* corpus `{dataset}-corpus` (1,234 memories in 7 scopes; each "
        f"question ...); questions: 40 of the headline subset `all` under protocol `{protocol}` (x); metrics: "
        "`ndcg@10`: nDCG with the dataset's graded labels (ranx), k = 10; `mrr@10`: reciprocal rank, k = 10.\n\n## other\n",
        encoding="utf-8")


def _plotted(ax) -> pd.DataFrame:
    """(x, y, lo, hi) of every errorbar point on ``ax``, from the artists themselves."""
    rows = []
    for c in ax.containers:
        (x, y), = c.lines[0].get_xydata()
        (_, lo), (_, hi) = c.lines[2][0].get_segments()[0]
        rows.append((x, y, lo, hi))
    return pd.DataFrame(rows, columns=["x", "y", "lo", "hi"])


def _truth(folder: Path, dataset: str) -> pd.DataFrame:
    res = pd.read_csv(folder / "results.csv")
    res = res[(res.dataset == dataset) & (res.metric == "ndcg@10")]
    eff = pd.read_csv(folder / "efficiency.csv")
    eff = eff[eff.dataset == dataset].set_index("system").recall_p50_ms
    return pd.DataFrame({"x": res.system.map(eff).to_numpy(), "y": res["mean"].to_numpy(), "lo": res.lo.to_numpy(),
                         "hi": res.hi.to_numpy(), "system": res.system.to_numpy()})


def test_points_equal_the_csvs_and_a_missing_dataset_is_skipped(tmp_path):
    _report(tmp_path, "agent-memory", [("memofs-reference", 0.41, 0.36, 0.45, 2.75, "all"),
                                        ("chroma", 0.73, 0.69, 0.77, 1.37, "all"),
                                        ("mem0", 0.28, 0.25, 0.32, 4.8, "3 of 10 scopes (seed 42)")])
    _report(tmp_path / "locomo", "locomo", [("memofs-reference", 0.2, 0.18, 0.21, 1.05, "all"),
                                             ("lancedb-fts", 0.47, 0.45, 0.49, 2.4, "all")])
    fig, notes = ql.figure(tmp_path)  # no longmemeval folder
    assert len(notes) == 1 and notes[0].startswith("LongMemEval dev:") and "skipped" in notes[0]
    axes = fig.axes
    assert len(axes) == 2
    for ax, (folder, dataset) in zip(axes, ((tmp_path, "agent-memory"), (tmp_path / "locomo", "locomo")), strict=True):
        assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
        truth = _truth(folder, dataset)
        np.testing.assert_allclose(_plotted(ax)[["x", "y", "lo", "hi"]].to_numpy(), truth[["x", "y", "lo", "hi"]].to_numpy())
        labels = [t.get_text() for t in ax.texts]
        assert labels == [s + (" (3/10)" if s == "mem0" else "") for s in truth.system]
        assert f"corpus {dataset}-corpus (1,234 memories, 7 scopes)" in ax.get_title()
        assert "40 questions (subset all), protocol memofs" in ax.get_title() and "ndcg@10: nDCG with the dataset's graded labels" in ax.get_title()
    assert "Not shown: LongMemEval dev" in fig.texts[0].get_text()
    plt.close(fig)


def test_a_non_memofs_protocol_is_skipped_and_nothing_gives_no_figure(tmp_path):
    _report(tmp_path, "agent-memory", [("a", 0.5, 0.4, 0.6, 1.0, "all")], protocol="locomo-paper")
    fig, notes = ql.figure(tmp_path, ql.PANELS[:1])
    assert fig is None and "protocol locomo-paper, not memofs" in notes[0]
    fig, notes = ql.figure(tmp_path / "nothing")
    assert fig is None and len(notes) == len(ql.PANELS)


@pytest.mark.skipif(not (REPO_ROOT / "reports" / "systems" / "results.csv").is_file(), reason="no systems report")
def test_the_committed_reports_are_plotted_as_written():
    root = REPO_ROOT / "reports" / "systems"
    fig, notes = ql.figure(root)
    shown = [p for p in ql.PANELS if (root / p.folder / "results.csv").is_file()]
    assert len(fig.axes) == len(shown) and len(notes) == len(ql.PANELS) - len(shown)
    for ax, p in zip(fig.axes, shown, strict=True):
        truth = _truth(root / p.folder, p.dataset).dropna(subset=["x"])
        np.testing.assert_allclose(_plotted(ax)[["x", "y", "lo", "hi"]].to_numpy(), truth[["x", "y", "lo", "hi"]].to_numpy())
        assert ax.get_xscale() == "log" and "protocol memofs" in ax.get_title()
    plt.close(fig)


def test_label_placement_keeps_labels_apart():
    xy = [(0.5, 0.5), (0.51, 0.5), (0.52, 0.505), (0.9, 0.1)]
    ys = ql._place(xy, [0.1] * 4, height=0.04)
    assert ys[3] == 0.1  # alone: beside its point
    near = sorted(ys[:3])
    assert all(b - a >= 0.04 - 1e-9 for a, b in zip(near, near[1:]))  # their boxes overlap in x: never in y
