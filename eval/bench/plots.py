"""Growth fits and log-log scaling figures for the performance report.

Growth: for a cost ``y`` measured at sizes ``n``, the least-squares slope of
``log y = a + s log n``; ``s`` ~ 1 is linear, ``s`` > 1.1 is flagged superlinear. Costs
that are ~0 at some size (log undefined) are fitted on the positive points only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memofs_eval.bench.recall import Series
from memofs_eval.reporting.markdown import table

SUPERLINEAR = 1.1
FIGURES: dict[str, tuple[str, str]] = {
    "latency": ("Recall latency vs number of memories", "latency per query (ms)"),
    "memory": ("Index memory vs number of memories", "peak RSS growth (MiB)"),
    "store": ("Rehydration vs re-embedding", "time (s)"),
}


@dataclass(frozen=True)
class Growth:
    name: str
    unit: str
    slope: float | None  # None when fewer than two positive points
    points: int
    peer: bool

    @property
    def superlinear(self) -> bool:
        return self.slope is not None and self.slope > SUPERLINEAR


def loglog_slope(sizes: list[int], values: list[float]) -> tuple[float | None, int]:
    """Least-squares slope of log(value) on log(size) over points with both > 0."""
    pts = [(math.log(n), math.log(v)) for n, v in zip(sizes, values, strict=True) if n > 0 and v > 0]
    if len({x for x, _ in pts}) < 2:
        return None, len(pts)
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0]), len(pts)


def growth(series: list[Series]) -> list[Growth]:
    return [Growth(s.name, s.unit, *loglog_slope(s.sizes, s.values), s.peer) for s in series]


def growth_table(rows: list[Growth]) -> str:
    cells = []
    for g in rows:
        if g.slope is None:
            verdict, slope = "n/a (fewer than two positive sizes)", "-"
        else:
            slope = f"{g.slope:.2f}"
            verdict = ("**superlinear**" if g.superlinear else "linear" if g.slope >= 0.9 else "sublinear")
            if g.peer:
                verdict += " (peer)"
        cells.append((f"{g.name} ({g.unit})", g.points, slope, verdict))
    return table(("cost", "sizes fitted", "log-log slope", "growth"), cells, "lrrl")


def scaling_figure(series: list[Series], figure: str, path: Path, subtitle: str = "") -> Path | None:
    """One log-log PNG of every series tagged ``figure``; peers dashed. None when empty."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [s for s in series if s.figure == figure and any(v > 0 for v in s.values)]
    if not chosen:
        return None
    title, ylabel = FIGURES[figure]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    peers = [s for s in chosen if s.peer]
    for s in chosen:
        pts = [(n, v) for n, v in zip(s.sizes, s.values, strict=True) if v > 0]
        slope, _ = loglog_slope(s.sizes, s.values)
        label = s.name + (f" (slope {slope:.2f}" if slope is not None else " (")
        if len(peers) == 1 and not s.peer and peers[0].sizes == s.sizes and peers[0].values[-1] > 0:
            label += f"; {s.values[-1] / peers[0].values[-1]:.1f}x peer at {s.sizes[-1]:,}"
        label = label + ")" if not label.endswith("(") else label[:-2]
        ax.plot(*zip(*pts), marker="o", linestyle="--" if s.peer else "-", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of memories")
    ax.set_ylabel(ylabel)
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
