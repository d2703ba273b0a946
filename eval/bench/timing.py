"""The benchmarks' one timer: wall seconds of a call, and the median over repeats after a warm-up.

Light on purpose (standard library only): timed subprocesses import benchmark modules.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()``'s result and its wall seconds (``time.perf_counter``)."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``fn`` over ``repeats`` runs after one warm-up run."""
    fn()
    return statistics.median(timed(fn)[1] for _ in range(repeats))
