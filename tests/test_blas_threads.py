"""OpenBLAS's idle policy is set before numpy loads (memofs/signals/blas_threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memofs.signals import blas_threads


def test_apply_sets_the_floor_only_where_unset_and_numpy_not_loaded() -> None:
    env: dict[str, str] = {}
    assert blas_threads.apply(env, loaded=False) is True
    assert env == {"OPENBLAS_THREAD_TIMEOUT": "4"}
    mine = {"OPENBLAS_THREAD_TIMEOUT": "12"}
    assert blas_threads.apply(mine, loaded=False) is False
    assert mine == {"OPENBLAS_THREAD_TIMEOUT": "12"}
    late: dict[str, str] = {}
    assert blas_threads.apply(late, loaded=True) is False  # OpenBLAS already read its environment
    assert late == {}


def _child(code: str, **extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"} | extra
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


PRINT = "import os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"


@pytest.mark.parametrize("entry", ["memofs.surfaces.cli", "memofs.surfaces.mcp_server", "memofs_eval.bench.recall"])
def test_entry_points_import_memofs_before_numpy(entry: str) -> None:
    assert _child(f"import {entry}; {PRINT}") == "4"


def test_a_user_value_wins_and_a_late_import_leaves_openblas_alone() -> None:
    assert _child(f"import memofs.surfaces.cli; {PRINT}", OPENBLAS_THREAD_TIMEOUT="20") == "20"
    assert _child(f"import numpy, memofs; {PRINT}") == "None"
