"""numpy's load-time environment is set before numpy loads (memofs/signals/numpy_environment.py):
OpenBLAS's idle policy and numpy's huge-page advice, each only where the user set none."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memofs.signals import numpy_environment

NAMES = ("OPENBLAS_THREAD_TIMEOUT", "NUMPY_MADVISE_HUGEPAGE")


def test_apply_sets_each_value_only_where_unset_and_numpy_not_loaded() -> None:
    env: dict[str, str] = {}
    assert numpy_environment.apply(env, loaded=False) == list(NAMES)
    assert env == {"OPENBLAS_THREAD_TIMEOUT": "4", "NUMPY_MADVISE_HUGEPAGE": "0"}
    mine = {"OPENBLAS_THREAD_TIMEOUT": "12"}
    assert numpy_environment.apply(mine, loaded=False) == ["NUMPY_MADVISE_HUGEPAGE"]
    assert mine == {"OPENBLAS_THREAD_TIMEOUT": "12", "NUMPY_MADVISE_HUGEPAGE": "0"}
    late: dict[str, str] = {}
    assert numpy_environment.apply(late, loaded=True) == []  # numpy already read its environment
    assert late == {}


def _child(code: str, **extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in NAMES} | extra
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


# what the process's numpy really does: its own record of the huge-page advice
PRINT = ("import os; from numpy._core import multiarray as m; "
         "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), os.environ.get('NUMPY_MADVISE_HUGEPAGE'), m._get_madvise_hugepage())")


@pytest.mark.parametrize("entry", ["memofs.surfaces.cli", "memofs.surfaces.mcp_server", "memofs_eval.bench.recall"])
def test_entry_points_import_memofs_before_numpy(entry: str) -> None:
    assert _child(f"import {entry}; {PRINT}") == "4 0 False"


def test_the_library_leaves_the_callers_environment_alone() -> None:
    """A program that imports memofs (not one of its entry points) keeps numpy's defaults."""
    assert _child(f"import memofs; from memofs import Recaller, Store; {PRINT}") == "None None True"


def test_a_user_value_wins_and_a_late_import_leaves_numpy_alone() -> None:
    assert _child(f"import memofs.surfaces.cli; {PRINT}", OPENBLAS_THREAD_TIMEOUT="20", NUMPY_MADVISE_HUGEPAGE="1") == "20 1 True"
    assert _child(f"import numpy, memofs.surfaces.cli; {PRINT}") == "None None True"
