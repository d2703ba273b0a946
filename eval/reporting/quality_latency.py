"""Quality against latency for the systems study: nDCG@10 (95% CI) over recall p50, one panel per dataset.

Reads what ``python -m memofs_eval.studies.systems`` writes into a report folder
(``results.csv``, ``efficiency.csv``, ``report.md``) and nothing else; notebook 06 calls it.
A panel whose report is missing, or whose entry is not scored under the ``memofs``
protocol, is left out and named in the returned notes (and in the figure's footnote).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from memofs_eval.reporting.readme_tables import sample_note

METRIC = "ndcg@10"
PROTOCOL = "memofs"


@dataclass(frozen=True)
class Panel:
    """One dataset: its label, its report folder under the systems root, its entry in that report."""

    label: str
    folder: str  # "" is the root itself (agent-memory)
    dataset: str


# the entries the README's systems table reads under protocol memofs (LongMemEval: the turn corpus)
PANELS = (Panel("agent-memory", "", "agent-memory"), Panel("LoCoMo", "locomo", "locomo"),
          Panel("LongMemEval dev", "longmemeval", "longmemeval-turn"))

_PROTOCOL_LINE = re.compile(
    r"corpus `(?P<corpus>[^`]+)` \((?P<memories>[\d,]+) memories in (?P<scopes>\d+) scopes.*?questions: "
    r"(?P<questions>\d+) of the headline subset `(?P<subset>[^`]+)` under protocol `(?P<protocol>[^`]+)`")


def protocol(report_md: Path, dataset: str) -> dict[str, str] | None:
    """The ``*Protocol:*`` caption of ``dataset``'s section in a systems ``report.md``, parsed
    (corpus, memories, scopes, questions, subset, protocol, and ``metric``: the metric's
    definition); None when the file, the section or the caption is absent."""
    if not report_md.is_file():
        return None
    text = report_md.read_text(encoding="utf-8")
    section = re.search(rf"^## {re.escape(dataset)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    line = next((ln for ln in section.group(1).splitlines() if ln.startswith("*Protocol:*")), None) if section else None
    hit = _PROTOCOL_LINE.search(line) if line else None
    if hit is None:
        return None
    out = hit.groupdict()
    k = METRIC.split("@")[1]
    metric = re.search(rf"`{re.escape(METRIC)}`: (.*?), k = {k}", line)
    out["metric"] = metric.group(1) if metric else METRIC
    return out


def points(folder: Path, dataset: str, metric: str = METRIC) -> pd.DataFrame | None:
    """One row per system of ``dataset``: ``system, mean, lo, hi, recall_p50_ms, scopes``
    (the subset is the report's headline one: its results rows hold no other); None when
    ``results.csv`` or ``efficiency.csv`` is missing or holds no row for it."""
    res_p, eff_p = folder / "results.csv", folder / "efficiency.csv"
    if not (res_p.is_file() and eff_p.is_file()):
        return None
    res = pd.read_csv(res_p)
    res = res[(res.dataset == dataset) & (res.metric == metric)][["system", "mean", "lo", "hi", "scopes"]]
    eff = pd.read_csv(eff_p)
    eff = eff[eff.dataset == dataset][["system", "recall_p50_ms"]]
    # a system without a latency (or a score) has no place on these axes
    out = res.merge(eff, on="system", how="inner").dropna(subset=["mean", "recall_p50_ms"])
    return out.reset_index(drop=True) if len(out) else None


def title(panel: Panel, proto: dict[str, str] | None, n_systems: int) -> str:
    """The panel's title: dataset, corpus, question set, protocol and metric, as the report states them."""
    if proto is None:
        return f"{panel.label} ({panel.dataset}): {METRIC}; no protocol caption in report.md"
    return (f"{panel.label}: corpus {proto['corpus']} ({proto['memories']} memories, {proto['scopes']} scopes)\n"
            f"{proto['questions']} questions (subset {proto['subset']}), protocol {proto['protocol']}; "
            f"{METRIC}: {proto['metric']}\n{n_systems} systems")


def _place(xy: list[tuple[float, float]], widths: list[float], height: float = 0.04) -> list[float]:
    """Label heights (axes fraction) for labels starting just right of their points: each takes
    the nearest height, stepping up and down, whose box meets no placed label and no point."""
    boxes = [(x - 0.012, x + 0.012, y - 0.015, y + 0.015) for x, y in xy]  # the markers
    out = [0.0] * len(xy)
    for i in sorted(range(len(xy)), key=lambda j: -xy[j][1]):
        x, y = xy[i]
        x0, x1 = x + 0.025, x + 0.025 + widths[i]
        for step in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6):
            yl = y + step * height * 0.6
            box = (x0, x1, yl - height / 2, yl + height / 2)
            if not any(box[0] < b[1] and b[0] < box[1] and box[2] < b[3] and b[2] < box[3] for b in boxes):
                break
        else:
            yl = y  # crowded everywhere: at its point
        out[i] = yl
        boxes.append((x0, x1, yl - height / 2, yl + height / 2))
    return out


def _colour(system: str) -> str:
    return "#1f77b4" if system.startswith("memofs") else "#7f7f7f" if system.startswith("harness") else "#d62728"


def draw(ax, pts: pd.DataFrame) -> None:
    """Points with vertical 95% CI bars on a log latency axis, each labelled with its system."""
    for _, r in pts.iterrows():
        ax.errorbar(r.recall_p50_ms, r["mean"], yerr=[[r["mean"] - r.lo], [r.hi - r["mean"]]], fmt="o", ms=5,
                    capsize=3, lw=1, color=_colour(r.system))
    ax.set_xscale("log")
    lo, hi = pts.recall_p50_ms.min(), pts.recall_p50_ms.max()
    ax.set_xlim(lo / 3, hi * 8)  # room on the right for the labels
    ax.set_ylim(min(0.0, pts.lo.min()) - 0.02, max(1.0, pts.hi.max()) + 0.02)
    # labels sit right of their point; close ones are spread vertically and joined by a leader
    fwd = ax.transAxes.inverted()
    xy = [fwd.transform(ax.transData.transform((x, y))) for x, y in zip(pts.recall_p50_ms, pts["mean"], strict=True)]
    labels = [f"{r.system}{sample_note(r.scopes)}" for _, r in pts.iterrows()]
    heights = _place([(float(a[0]), float(a[1])) for a in xy], [0.0115 * len(t) for t in labels])
    for (_, r), text, (xa, ya), yl in zip(pts.iterrows(), labels, xy, heights, strict=True):
        moved = abs(yl - ya) > 1e-6
        ax.annotate(text, (r.recall_p50_ms, r["mean"]), xytext=(xa + 0.025, yl),
                    textcoords="axes fraction", fontsize=7, va="center", color=_colour(r.system),
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "#999"} if moved else None)
    ax.set_xlabel("recall p50 latency per call (ms, log scale)")
    ax.set_ylabel(f"{METRIC} (mean, bootstrap 95% CI)")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)


def figure(root: Path, panels: tuple[Panel, ...] = PANELS) -> tuple[Figure | None, list[str]]:
    """The figure over every panel whose report is under ``root`` (the systems report folder),
    and a note per panel left out; the figure is None when none is left."""
    shown, notes = [], []
    for p in panels:
        folder = root / p.folder if p.folder else root
        proto = protocol(folder / "report.md", p.dataset)
        pts = points(folder, p.dataset)
        if pts is None:
            notes.append(f"{p.label}: no {METRIC} rows with a recall p50 for {p.dataset} in {folder} "
                         "(results.csv, efficiency.csv); panel skipped")
        elif proto is not None and proto["protocol"] != PROTOCOL:
            notes.append(f"{p.label}: {p.dataset} is scored under protocol {proto['protocol']}, not {PROTOCOL}; panel skipped")
        else:
            shown.append((p, proto, pts))
    if not shown:
        return None, notes
    fig, axes = plt.subplots(1, len(shown), figsize=(6.2 * len(shown), 5.4), squeeze=False)
    for ax, (p, proto, pts) in zip(axes[0], shown, strict=True):
        ax.set_title(title(p, proto, len(pts)), fontsize=8)
        draw(ax, pts)
    caption = ("Blue: memofs (library profiles, MCP); red: other memory systems; grey: the harness's run file. "
               "(n/N): ran on a seeded sample of n of the N scopes. Latency: the systems report's efficiency.csv.")
    if notes:
        caption += "\nNot shown: " + "; ".join(notes)
    fig.text(0.01, 0.005, caption, fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.06 if notes else 0.04, 1, 1))
    return fig, notes
