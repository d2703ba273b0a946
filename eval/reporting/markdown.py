"""The project's one markdown-table renderer: report tables, README blocks and benchmark tables.

Light on purpose (numpy only, pandas just for the type hint): benchmark modules import it, and
some of them are imported by the timed subprocesses whose start-up they measure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# one alignment-row cell per column letter: "l" markdown's default (left), "r" right (numbers)
_ALIGN = {"l": "---", "r": "---:"}


def table(header: Sequence[object], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A markdown table of ``header`` and ``rows`` (cells written with ``str``; ``|`` in a cell escaped).

    ``align`` has one letter per column, ``l`` (``---``) or ``r`` (``---:``); ``None`` is all ``l``."""
    cols = [str(c) for c in header]
    align = align if align is not None else "l" * len(cols)
    if len(align) != len(cols) or set(align) - set(_ALIGN):
        raise ValueError(f"align {align!r} does not give l or r for each of {len(cols)} columns")
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(_ALIGN[a] for a in align) + "|"]
    for row in rows:
        cells = [str(c) for c in row]
        if len(cells) != len(cols):
            raise ValueError(f"a row has {len(cells)} cells for {len(cols)} columns: {cells}")
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def md_table(df: pd.DataFrame, floatfmt: str = "{:.4f}", align: str | None = None) -> str:
    """``df`` as a markdown table: finite floats through ``floatfmt``, None and NaN as empty cells."""

    def cell(v: object) -> str:
        if isinstance(v, (float, np.floating)) and np.isfinite(v):
            return floatfmt.format(v)
        return "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)

    return table(df.columns, ([cell(v) for v in row] for _, row in df.iterrows()), align)
