"""The memofs evaluation harness (installed as ``memofs_eval`` from ``eval/``)."""

import memofs  # noqa: F401  (first: it sets OpenBLAS's idle policy before numpy loads, so the harness measures the library as the CLI runs it)
