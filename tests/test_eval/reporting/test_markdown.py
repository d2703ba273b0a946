"""The one markdown-table renderer, against tables written out by hand."""

import numpy as np
import pandas as pd
import pytest

from memofs_eval.reporting.markdown import md_table, table


def test_table_alignment_row_and_cells():
    """``l`` gives markdown's plain ``---``, ``r`` a right-aligned ``---:``; cells go through ``str``."""
    got = table(("name", "n", "ms"), [("a", 1, "0.50"), ("b", 1000, "12.25")], "lrr")
    assert got == ("| name | n | ms |\n"
                   "|---|---:|---:|\n"
                   "| a | 1 | 0.50 |\n"
                   "| b | 1000 | 12.25 |")


def test_table_default_alignment_escapes_pipes_and_allows_no_rows():
    assert table(["a", "b"], [["x|y", ""]]) == "| a | b |\n|---|---|\n| x\\|y |  |"
    assert table(["only"], []) == "| only |\n|---|"


@pytest.mark.parametrize("align", ["lr", "lrx", "LRR"])
def test_table_rejects_an_alignment_not_one_letter_per_column(align):
    with pytest.raises(ValueError):
        table(("a", "b", "c"), [], align)


def test_table_rejects_a_row_of_the_wrong_width():
    with pytest.raises(ValueError):
        table(("a", "b"), [("1", "2", "3")])


def test_md_table_formats_floats_and_blanks_missing_values():
    """Finite floats through the format, NaN and None empty, infinities and ints as ``str`` writes them."""
    df = pd.DataFrame({"method": ["x", None], "n": [3, 4], "score": [0.123456, np.nan], "big": [np.inf, 2.0]})
    assert md_table(df) == ("| method | n | score | big |\n"
                            "|---|---|---|---|\n"
                            "| x | 3 | 0.1235 | inf |\n"
                            "|  | 4 |  | 2.0000 |")
    assert md_table(df[["score"]].head(1), "{:.2f}", align="r") == "| score |\n|---:|\n| 0.12 |"
