"""CI's standalone pass (``.ci/run``): the tests that used shared data are logged against their
ids, in this process and in subprocesses, and exactly those ids run again with it off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memofs_datasets import shared
from support import REPO_ROOT

REPO = REPO_ROOT


def test_every_resolution_of_shared_data_names_the_running_test(tmp_path, monkeypatch, request):
    log = tmp_path / "audit.txt"
    monkeypatch.setenv("MEMOFS_SHARED_AUDIT", str(log))
    monkeypatch.setenv("MEMOFS_SHARED", str(tmp_path))
    assert shared.shared_root() == tmp_path.resolve()
    # a subprocess inherits the test's id, so a use made there is traced to it too
    subprocess.run([sys.executable, "-c", "from memofs_datasets.shared import locomo_path; locomo_path()"],
                   check=True, env=os.environ.copy(), timeout=60)
    assert log.read_text().splitlines() == [request.node.nodeid] * 2
    monkeypatch.setenv("MEMOFS_SHARED", "off")  # switched off: nothing is resolved, nothing logged
    assert shared.shared_root() is None
    assert log.read_text().splitlines() == [request.node.nodeid] * 2


def test_without_the_audit_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMOFS_SHARED_AUDIT", raising=False)
    monkeypatch.setenv("MEMOFS_SHARED", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    shared.shared_root()
    assert list(tmp_path.iterdir()) == []


def _pytest(only: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMOFS_ONLY_TESTS": str(only)}
    env.pop("MEMOFS_SHARED_AUDIT", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_only_the_listed_ids_run_and_an_unknown_id_is_an_error(tmp_path):
    only = tmp_path / "ids.txt"
    only.write_text("tests/test_eval/scoring/test_ties.py::test_tie_positions_by_hand\n")
    res = _pytest(only, "tests/test_eval/scoring/test_ties.py")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 passed" in res.stdout and "deselected" in res.stdout
    only.write_text("tests/test_eval/scoring/test_ties.py::test_that_does_not_exist\n")
    res = _pytest(only, "tests/test_eval/scoring/test_ties.py")
    assert res.returncode != 0
    assert "not collected" in res.stdout + res.stderr


def test_a_module_id_selects_every_test_of_that_module(tmp_path):
    """A use of shared data while a module is imported (collection) is logged under the
    module's id; in the standalone pass that id runs the whole module."""
    only = tmp_path / "ids.txt"
    only.write_text("tests/test_eval/scoring/test_ties.py\n")
    res = _pytest(only, "tests/test_eval/scoring/test_ties.py", "tests/test_layout.py")
    assert res.returncode == 0, res.stdout + res.stderr
    n = int(res.stdout.split(" passed")[0].split()[-1])
    assert n >= 2 and "deselected" in res.stdout
