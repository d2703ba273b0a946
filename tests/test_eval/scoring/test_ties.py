"""Tie rate on hand-made rankings (eval/scoring/ties.py)."""

from __future__ import annotations

import math

from memofs_eval.scoring.ties import tie_positions, tie_rate


def test_tie_positions_by_hand() -> None:
    assert tie_positions([0.9, 0.8, 0.7]) == 0
    assert tie_positions([0.9, 0.9, 0.7]) == 2  # both places of the pair came from their ids
    assert tie_positions([0.9, 0.5, 0.5, 0.5, 0.1]) == 3
    # the neighbour below the cut counts: position 2 ties with position 3, which is past k = 2
    assert tie_positions([0.9, 0.5, 0.5], k=2) == 1


def test_tie_rate_pools_positions_over_queries() -> None:
    scored = {"q1": [("a", 1.0), ("b", 1.0), ("c", 0.2)], "q2": [("d", 0.4)], "q3": []}
    assert tie_rate(scored) == 2 / 4
    assert math.isnan(tie_rate({"q": []}))
