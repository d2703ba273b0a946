"""The Dask executor (issue 21): same bytes as the local executor, survives a dead worker,
and stays out of the default path.

The quick spec runs with the LSA embedder (fitted per dataset, no torch in the workers) so
the test is fast; every run gets a fresh cache, so extraction really runs on the workers.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("dask.distributed")

import cloudpickle  # noqa: E402
from dask.distributed import Client, LocalCluster, WorkerPlugin  # noqa: E402

from memofs_eval.cli import main as cli_main  # noqa: E402
from memofs_eval.experiments.experiment import run_experiment  # noqa: E402
from memofs_eval.reporting.report import write_report  # noqa: E402
from memofs_eval.inputs.spec import load_spec  # noqa: E402
from support import REPO_ROOT

REPO = REPO_ROOT
QUICK = REPO / "eval" / "specs" / "quick.toml"
COMPARED = ("results.csv", "significance.csv", "confidence_intervals.csv")


def _lsa_spec(tmp: Path) -> Path:
    text = QUICK.read_text(encoding="utf-8")
    assert 'embedder = "minilm"' in text and 'embedders = ["lsa", "none"]' in text
    text = text.replace('embedder = "minilm"', 'embedder = "lsa"').replace('embedders = ["lsa", "none"]', 'embedders = ["none"]')
    path = tmp / "quick-lsa.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _files(report: Path) -> dict[str, bytes]:
    """Every run file plus the result tables (the report's numbers; timings excluded)."""
    out = {p.relative_to(report).as_posix(): p.read_bytes() for p in sorted((report / "runs").rglob("*.trec"))}
    out.update({name: (report / name).read_bytes() for name in COMPARED})
    return out


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory) -> Path:
    return _lsa_spec(tmp_path_factory.mktemp("spec"))


@pytest.fixture(scope="module")
def local(spec_path, tmp_path_factory):
    """The local executor's experiment and report (fresh cache)."""
    tmp = tmp_path_factory.mktemp("local")
    exp = run_experiment(load_spec(spec_path), progress=False, cache_root=tmp / "cache")
    assert exp.cache_stats["signal_cache_misses"] > 0
    return exp, _files(write_report(exp, tmp / "report", run_id="local"))


def _same_per_query(a, b) -> None:
    for da, db in zip(a.datasets, b.datasets, strict=True):
        assert list(da.per_query) == list(db.per_query)
        for method, pa in da.per_query.items():
            pb = db.per_query[method]
            pd.testing.assert_frame_equal(pa, pb, check_exact=True)
            assert pa.to_numpy().tobytes() == pb.to_numpy().tobytes(), method
        assert da.runs == db.runs


@pytest.mark.slow  # a LocalCluster of 2 worker processes and two runs of the quick spec
def test_local_cluster_is_byte_identical_to_local(local, spec_path, tmp_path):
    """``executor = "dask"`` without a scheduler: a LocalCluster of 2 worker processes."""
    exp_local, files_local = local
    spec = dataclasses.replace(load_spec(spec_path), executor="dask", workers=2)
    exp = run_experiment(spec, progress=False, cache_root=tmp_path / "cache")
    assert exp.cache_stats["signal_cache_misses"] == exp_local.cache_stats["signal_cache_misses"] > 0
    _same_per_query(exp_local, exp)
    files = _files(write_report(exp, tmp_path / "report", run_id="dask"))
    assert files.keys() == files_local.keys() and len(files) > 10
    for name, data in files_local.items():
        assert files[name] == data, name


class DieOnce(WorkerPlugin):
    """Kills its worker process the first time a task of each named kind starts executing,
    leaving a marker file so the rerun (on the restarted or the other worker) survives."""

    def __init__(self, marker_dir: str, prefixes: tuple[str, ...]) -> None:
        self.marker_dir, self.prefixes = marker_dir, prefixes

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing":
            return
        name = key if isinstance(key, str) else str(key)
        for prefix in self.prefixes:
            marker = Path(self.marker_dir) / prefix
            if name.startswith(prefix):
                try:
                    marker.touch(exist_ok=False)  # exactly one death per kind, across workers
                except FileExistsError:
                    return
                os._exit(17)


@pytest.mark.slow  # a LocalCluster whose workers die and restart
def test_dead_worker_is_retried_and_report_is_the_same(local, spec_path, tmp_path):
    """A worker dies mid-extraction and again mid-recombination; the CLI run on the
    cluster's scheduler address still writes the local executor's report."""
    _, files_local = local
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    markers = tmp_path / "markers"
    markers.mkdir()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.register_plugin(DieOnce(str(markers), ("scope_frames-", "fuse_configs-")))
        rc = cli_main(["run", str(spec_path), "--scheduler", cluster.scheduler_address, "--cache", str(tmp_path / "cache"),
                       "--out", str(tmp_path / "reports"), "--no-gate", "--quiet"])
        assert rc == 0
    assert sorted(p.name for p in markers.iterdir()) == ["fuse_configs-", "scope_frames-"]  # both workers died once
    files = _files(tmp_path / "reports" / "latest")
    assert files == files_local


def test_rerun_on_shared_cache_extracts_nothing(spec_path, tmp_path):
    """A second run on the same cache folder reads every signal group from it."""
    spec = dataclasses.replace(load_spec(spec_path), baselines=(), tune=None, toggles=("rewrite",), sweeps={}, embedders=())
    first = run_experiment(spec, progress=False, cache_root=tmp_path)
    again = run_experiment(spec, progress=False, cache_root=tmp_path)
    assert first.cache_stats["signal_cache_misses"] > 0
    assert again.cache_stats == {"signal_cache_hits": first.cache_stats["signal_cache_misses"], "signal_cache_misses": 0}


@pytest.mark.slow  # a second interpreter runs the harness end to end
def test_default_path_never_imports_dask(tmp_path):
    """The local executor runs a spec end to end without importing dask or distributed."""
    spec = tmp_path / "s.toml"
    spec.write_text('name = "nodask"\nk = 10\nembedder = "none"\n[[datasets]]\nname = "tiny"\n'
                    '[ablations]\ntoggles = ["recency"]\n', encoding="utf-8")
    code = ("import sys\nfrom memofs_eval.cli import main\n"
            f"rc = main(['run', {str(spec)!r}, '--out', {str(tmp_path / 'r')!r}, '--cache', {str(tmp_path / 'c')!r}, '--no-gate', '--quiet'])\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
            "print('RC', rc, 'DASK', bad)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RC 0 DASK []" in proc.stdout, proc.stdout[-2000:]


def test_spec_and_cli_name_the_executor(tmp_path, capsys):
    from memofs_eval.inputs.spec import SpecError

    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nexecutor = "spark"\n[[datasets]]\nname = "tiny"\n', encoding="utf-8")
    with pytest.raises(SpecError, match=r"bad.toml:2: executor: unknown executor 'spark'"):
        load_spec(bad)
    ok = tmp_path / "ok.toml"
    ok.write_text('name = "x"\nexecutor = "dask"\nscheduler = "tcp://10.0.0.1:8786"\n[[datasets]]\nname = "tiny"\n', encoding="utf-8")
    s = load_spec(ok)
    assert (s.executor, s.scheduler) == ("dask", "tcp://10.0.0.1:8786")
    with pytest.raises(SystemExit):
        cli_main(["run", str(ok), "--executor", "spark"])
    assert "invalid choice: 'spark'" in capsys.readouterr().err


def test_scaling_model_arithmetic():
    """Hand-computed: 51,200 texts = 100 batches of 512 at 10 ms a text (5.12 s a batch);
    8 workers take ceil(100 / 8) = 13 rounds of 5.12 + 0.01 s = 66.69 s; 10 scopes of 5,120
    memories at 100 us a cell = 0.512 s each, 2 rounds = 1.044 s; one worker: 100 x 5.12 +
    10 x 0.512 = 517.12 s = 0.14 h."""
    from memofs_eval.bench.executor import Corpus, scaling_model

    md = scaling_model(0.01, 1e-4, 0.01, Corpus("x", 51_200, 10, "test"), 8)
    assert "| embedding tasks (batches of CHUNK texts) | 100 |" in md
    assert "| embedding wall on 8 workers (s) | 67 |" in md
    assert "| seconds per scope task | 0.51 |" in md
    assert "| scope wall on 8 workers (s) | 1 |" in md
    assert "| extraction wall on 8 workers (h) | 0.02 |" in md  # (66.69 + 1.044) / 3600
    assert "| extraction on one worker (h) | 0.1 |" in md


@pytest.mark.slow  # starts LocalClusters
def test_executor_bench_smoke():
    """The --quick bench: a row per executor, the model block, headline rows against local."""
    from memofs_eval.bench.executor import MODEL_END, MODEL_START, quick_config, run

    sec = run(quick_config(), quick=True)
    assert "| local |" in sec.markdown and "| LocalCluster, 1 worker |" in sec.markdown
    assert MODEL_START in sec.markdown and MODEL_END in sec.markdown
    assert [h[2].endswith("(local)") for h in sec.headline] == [True, True]
