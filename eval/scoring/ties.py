"""Tie rate: how much of a ranking the id tie-break decided (issue 22).

Rankings order by score, then by id ascending (:func:`memofs_eval.runs.runner.rank_scores`, the
pipeline's rule). A top-k position is *tie-decided* when its score equals that of the
position just above or just below it (the one below may lie past k): its place among them
came from the ids alone. The tie rate of a run is tie-decided positions / ranked positions,
over the top ``k`` (default 10) of every query, so a reader sees when ties matter; loaders
give label-free ids (datasets/), so a tie can cost or win only by chance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TOP = 10


def tie_positions(scores: Sequence[float], k: int = TOP) -> int:
    """Positions among the first ``k`` whose score equals a neighbour's (scores best first)."""
    n = len(scores)
    return sum(1 for i in range(min(k, n))
               if (i > 0 and scores[i] == scores[i - 1]) or (i + 1 < n and scores[i] == scores[i + 1]))


def tie_rate(scored: Mapping[str, Sequence[tuple[str, float]]], k: int = TOP) -> float:
    """Share of the top-``k`` positions of all queries that the id tie-break ordered; NaN when
    no query ranks anything."""
    tied = total = 0
    for ranked in scored.values():
        scores = [s for _, s in ranked]
        tied += tie_positions(scores, k)
        total += min(k, len(scores))
    return tied / total if total else float("nan")


def peer_tie_rates(tops: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]]) -> dict[str, float]:
    """Each peer's top-10 tie rate (:func:`tie_rate`), from its scored run."""
    return {label: tie_rate(top) for label, top in tops.items()}
