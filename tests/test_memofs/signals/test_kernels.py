"""The two kernels (memofs.signals.kernels): numba's compiled loops and numpy's give the
same floats and the same rankings, the process's choice follows its rules, and a one-shot
CLI command never loads numba."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memofs_datasets.format import bundled_datasets, load_dataset
from memofs.ranking.recall import Recaller
from memofs.signals import kernels
from memofs.signals.bm25 import BM25Index
from memofs.signals.embedders import LSAEmbedder
from memofs.signals.term_counts import TermCounts
from support import REPO_ROOT

REPO = REPO_ROOT


@pytest.fixture
def preferred(monkeypatch):
    """Leave the process's preference as it was."""
    monkeypatch.setattr(kernels, "_preferred", kernels._preferred)
    monkeypatch.delenv(kernels.ENV, raising=False)


def test_the_variable_wins_over_the_preference(preferred, monkeypatch):
    assert kernels.backend() == "numba" and kernels.compiled()  # the library's default
    kernels.prefer("numpy")
    assert kernels.backend() == "numpy" and not kernels.compiled()
    monkeypatch.setenv(kernels.ENV, " NUMBA ")
    assert kernels.backend() == "numba"
    monkeypatch.setenv(kernels.ENV, "")  # empty: unset
    assert kernels.backend() == "numpy"
    monkeypatch.setenv(kernels.ENV, "fortran")
    with pytest.raises(ValueError, match="MEMOFS_KERNELS must be one of numba, numpy; got 'fortran'"):
        kernels.backend()
    with pytest.raises(ValueError, match="backend must be one of"):
        kernels.prefer("cuda")


def _corpus(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
    words = ["auth", "authentication", "oauth", "token", "tok", "db", "d1", "cache", "ca", "deploy", "deployment", "x"]
    return [(f"d{i:03d}", " ".join(rng.choice(words, size=int(rng.integers(0, 8))))) for i in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_fuzzy_bm25_and_search_are_the_same_floats_on_both(seed, monkeypatch):
    """A sidecar-adopted base, documents added beside it, removals and a replacement, then
    every query scored under each kernel: the columns' bytes and the search lists agree."""
    rng = np.random.default_rng(seed)
    docs = _corpus(rng, int(rng.integers(1, 60)))
    idx = BM25Index(tokenizer=str.split, fuzzy_partial=float(rng.choice([0.25, 0.4])))
    base = docs[: len(docs) // 2]
    if base:
        idx.add_counts(TermCounts.build([d for d, _ in base], [t for _, t in base], str.split))
    idx.add_many(docs[len(docs) // 2:])
    idx.remove(d for d, _ in docs[:: 5])
    idx.add("d000", "oauth token cache")
    queries = ["auth token", "db d1 d1", "deploy cache ca", "zz", "", "oauth oauth authentication"]
    for q in queries:
        got = {}
        for backend in kernels.BACKENDS:
            monkeypatch.setenv(kernels.ENV, backend)
            s = idx.score(q)
            got[backend] = (s.bm25.tobytes(), s.fuzzy.tobytes(), s.raw.tobytes(), idx.search(q, 7), idx.search(q, 7, fuzzy=False))
        assert got["numba"] == got["numpy"], q


def test_recall_on_agent_memory_is_the_same_on_both(monkeypatch):
    """The whole pipeline (both pools, the vector path on, every bundled query) ranks and
    scores the bundled agent-memory dataset the same under either kernel."""
    ds = load_dataset(bundled_datasets()["agent-memory"])
    emb = LSAEmbedder(dim=16, seed=0).fit([m.text for m in ds.memories])
    out = {}
    for backend in kernels.BACKENDS:
        monkeypatch.setenv(kernels.ENV, backend)
        r = Recaller(embedder=emb)
        r.add(ds.memories)
        out[backend] = [[(x.id, x.score) for x in r.recall(q.text, 10, task_type=q.task_type, now=ds.as_of)] for q in ds.queries]
    assert out["numba"] == out["numpy"]
    assert sum(map(len, out["numpy"])) > 0


def _cli(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``memofs`` as its console script runs it, reporting whether numba was ever imported."""
    code = ("import sys\nfrom memofs.surfaces.cli import main\ntry:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "else:\n    code = 0\nprint('numba loaded' if 'numba' in sys.modules else 'numba not loaded', file=sys.stderr)\n"
            "sys.exit(code)\n")
    full = {k: v for k, v in os.environ.items() if k != kernels.ENV}
    full.update({"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1", **(env or {})})
    return subprocess.run([sys.executable, "-c", code, "--root", str(root), *args], capture_output=True, text=True,
                          env=full, cwd=REPO, timeout=120)


def test_a_cli_recall_runs_numpy_and_never_loads_numba(tmp_path):
    assert _cli(tmp_path, "init").returncode == 0
    for text in ("The deploy window is Tuesday after the database backup.", "Auth tokens expire after 24 hours."):
        assert _cli(tmp_path, "remember", text).returncode == 0
    res = _cli(tmp_path, "recall", "-q", "deploy window database", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["text"].startswith("The deploy window")
    assert res.stderr.strip().splitlines()[-1] == "numba not loaded"
    forced = _cli(tmp_path, "recall", "-q", "deploy window database", "--json", env={kernels.ENV: "numba"})
    assert forced.returncode == 0 and forced.stderr.strip().splitlines()[-1] == "numba loaded"
    assert json.loads(forced.stdout) == json.loads(res.stdout)


def test_a_bad_kernels_value_is_one_line(tmp_path):
    res = _cli(tmp_path, "status", env={kernels.ENV: "gpu"})
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and lines[0] == "memofs: error: MEMOFS_KERNELS must be one of numba, numpy; got 'gpu'"
    assert "Traceback" not in res.stderr


def test_memofs_mcp_serves_with_the_compiled_kernels(tmp_path, preferred, monkeypatch):
    import memofs.surfaces.mcp_server as server
    from memofs.surfaces.cli import app

    CliRunner().invoke(app, ["--root", str(tmp_path), "init"], env={"MEMOFS_EMBEDDER": "none"})
    seen = []
    monkeypatch.setattr(server, "serve", lambda *a, **kw: seen.append(kernels.backend()))
    kernels.prefer("numpy")  # as main() leaves it
    res = CliRunner().invoke(app, ["--root", str(tmp_path), "mcp"], env={"MEMOFS_EMBEDDER": "none"})
    assert res.exit_code == 0, res.output
    assert seen == ["numba"]


def test_without_numba_every_process_runs_numpy(monkeypatch, preferred):
    """numba is an extra: where it is missing, the preference falls back to numpy, and asking
    for it by name is a one-line error, not an ImportError deep in a recall."""
    monkeypatch.setattr(kernels, "numba_installed", lambda: False)
    monkeypatch.delenv(kernels.ENV, raising=False)
    kernels.prefer("numba")
    assert kernels.backend() == "numpy" and not kernels.compiled()
    monkeypatch.setenv(kernels.ENV, "numba")
    with pytest.raises(ValueError, match=r"^MEMOFS_KERNELS=numba but numba is not installed"):
        kernels.backend()
    monkeypatch.setattr(kernels, "numba_installed", lambda: True)
    assert kernels.backend() == "numba"


def test_numba_installed_looks_it_up_without_importing_it():
    code = ("import sys\nfrom memofs.signals import kernels\n"
            "print(kernels.numba_installed(), 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]
