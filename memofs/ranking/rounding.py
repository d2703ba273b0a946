"""The final score's rounding (spec "Final score"; facts sheet, "Final score"), shared by
both fusions (:mod:`memofs.ranking.fusion`, :mod:`memofs.ranking.learned`):

    round_half_up(x, d) = floor(x * 10**d + 0.5) / 10**d

upstream's ``Math.round(x * 1e4) / 1e4`` (halves go up), not numpy's round-half-even.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def round_half_up(x: NDArray[np.float64], decimals: int) -> NDArray[np.float64]:
    """``floor(x * 10**d + 0.5) / 10**d`` as float64."""
    scale = 10.0**decimals
    return np.floor(np.asarray(x, dtype=np.float64) * scale + 0.5) / scale
