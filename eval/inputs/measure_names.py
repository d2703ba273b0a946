"""Measure names: the harness's own measures beside ranx's metrics, parsed once.

A name is ``base`` or ``base@param``: a byte budget B for the briefing measures (default
8192, at least 512), a cutoff k for the field's and the temporal top-k measures (default 10),
no parameter for the others. What each measure computes is :mod:`memofs_eval.scoring.measures`;
a spec checks its metric names here before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_BUDGET = 8192
DEFAULT_TOP_K = 10
CURVE_BUDGETS: tuple[int, ...] = (2048, 4096, 8192, 16384)
BRIEFING = ("briefing_recall", "briefing_hit", "bytes_to_first_relevant")
TEMPORAL = ("superseded_above_current", "stale_in_top_k", "current_first")
FIELD = ("recall_any", "recall_all", "ndcg_any")
SESSION = tuple(f"session_{b}" for b in FIELD)
PAPER = ("locomo_recall",)
MEASURES: tuple[str, ...] = BRIEFING + TEMPORAL + FIELD + SESSION + PAPER
LOWER_IS_BETTER = frozenset({"bytes_to_first_relevant", "superseded_above_current", "stale_in_top_k"})
MIN_BUDGET = 512  # the directive alone takes ~420 bytes; pack refuses budgets below it
_NAME = re.compile(r"^([a-z_]+?)(?:@(\d+))?$")




@dataclass(frozen=True)
class Measure:
    """A parsed measure name: ``base`` plus its parameter (budget B or cutoff k)."""

    base: str
    param: int | None

    @property
    def name(self) -> str:
        return self.base if self.param is None else f"{self.base}@{self.param}"

    @property
    def lower_is_better(self) -> bool:
        return self.base in LOWER_IS_BETTER


def parse(name: str) -> Measure | None:
    """The measure named ``name``, None when it is not one of :data:`MEASURES` (a ranx name);
    ``ValueError`` for a measure with a bad parameter."""
    m = _NAME.match(name.strip().lower())
    if m is None or m.group(1) not in MEASURES:
        return None
    base, raw = m.group(1), m.group(2)
    param = int(raw) if raw is not None else None
    if base in BRIEFING:
        budget = DEFAULT_BUDGET if param is None else param
        if budget < MIN_BUDGET:
            raise ValueError(f"{name}: budget must be >= {MIN_BUDGET} bytes (the directive alone needs ~420)")
        return Measure(base, budget)
    if base == "stale_in_top_k" or base in FIELD or base in SESSION or base in PAPER:
        k = DEFAULT_TOP_K if param is None else param
        if k < 1:
            raise ValueError(f"{name}: k must be >= 1")
        return Measure(base, k)
    if param is not None:
        raise ValueError(f"{name}: {base} takes no @ parameter")
    return Measure(base, None)


def is_measure(name: str) -> bool:
    try:
        return parse(name) is not None
    except ValueError:
        return True


def lower_is_better(name: str) -> bool:
    """True for measures where a smaller value is better (ranx metrics: higher is better)."""
    try:
        m = parse(name)
    except ValueError:
        return False
    return m is not None and m.lower_is_better
