from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# the default MiniLM's exported ONNX file (issue 38): one temporary cache shared by test
# sessions and their subprocesses, never the user's ~/.cache (digest-checked, export locked)
os.environ.setdefault("MEMOFS_MODEL_CACHE", os.path.join(tempfile.gettempdir(), f"memofs-test-model-cache-{os.getuid()}"))
# `python -m pytest` from the repository root puts the root on sys.path, where datasets/ would
# pass for Hugging Face's `datasets` (memofs_eval._env.keep_repo_root_off_path)
from memofs_eval._env import keep_repo_root_off_path  # noqa: E402 (after the variables above)

keep_repo_root_off_path()
sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``$MEMOFS_ONLY_TESTS`` names a file of test ids (one per line, as ``$MEMOFS_SHARED_AUDIT``
    logs them): only those run. CI's standalone pass uses it; an id that no longer exists
    is an error, never a silent pass."""
    only = os.environ.get("MEMOFS_ONLY_TESTS")
    if not only:
        return
    wanted = {line.strip() for line in Path(only).read_text(encoding="utf-8").splitlines() if line.strip()}

    def chosen(nodeid: str) -> bool:  # a test id, or a module's id (a use while it was imported)
        return nodeid in wanted or nodeid.split("::")[0] in wanted

    ids = {item.nodeid for item in items} | {item.nodeid.split("::")[0] for item in items}
    missing = wanted - ids
    if missing:
        raise pytest.UsageError(f"{only}: {len(missing)} test id(s) not collected, e.g. {sorted(missing)[0]}")
    keep = [item for item in items if chosen(item.nodeid)]
    config.hook.pytest_deselected(items=[item for item in items if not chosen(item.nodeid)])
    items[:] = keep


# ``$MEMOFS_TEST_NODEID`` names what is running, for this process and its subprocesses: with
# ``$MEMOFS_SHARED_AUDIT`` set, every use of shared data is logged against it
# (:mod:`memofs_datasets.shared`), and CI's standalone pass re-runs those tests. It is set
# before any fixture of a test (session-scoped ones included) and, while modules are imported
# at collection, to the module's id.
NODEID = "MEMOFS_TEST_NODEID"


def pytest_collectstart(collector: pytest.Collector) -> None:
    if isinstance(collector, pytest.Module):
        os.environ[NODEID] = collector.nodeid


def pytest_collection_finish(session: pytest.Session) -> None:
    os.environ.pop(NODEID, None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    os.environ[NODEID] = item.nodeid


@pytest.fixture(scope="session")
def real_sentences() -> list[str]:
    """Several hundred real English sentences the project owns: the bundled datasets' memory
    and query texts (never shared data, so the parity checks always run)."""
    from memofs_datasets.texts import bundled_texts

    texts = bundled_texts()
    assert len(texts) >= 400, len(texts)
    return texts


@pytest.fixture(scope="session")
def locomo_dir() -> Path:
    """The LoCoMo release from shared data; the test is skipped when shared data is off or absent."""
    from memofs_datasets.shared import locomo_path

    path = locomo_path()
    if path is None or not (path / "locomo10.json").is_file():
        pytest.skip("LoCoMo is not in shared data ($MEMOFS_SHARED, default ../shared)")
    return path


@pytest.fixture(scope="session")
def quick_spec_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[int], list[Path]]:
    """The quick spec run twice through the CLI, with a baseline it must fail against: the exit
    codes and the two reports (test_harness checks them; the notebooks compare with one).

    Under pytest-xdist (``make test-fast``) the two files that use it may land on different
    workers: the runs are made once per session, in the directory all workers share, under a
    lock (the second worker waits for the first's reports instead of making its own); the
    reports are only read."""
    import fcntl
    import json
    import shutil

    from memofs_eval import cli

    QUICK = REPO / "eval" / "specs" / "quick.toml"
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = tmp_path_factory.getbasetemp().parent / "quick-spec-runs"  # above every worker's own base
        base.mkdir(exist_ok=True)
    else:
        base = tmp_path_factory.mktemp("quick-spec-runs")
    done = base / "codes.json"
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not done.is_file():
            for i in (0, 1):  # what a worker that failed part-way left
                shutil.rmtree(base / f"r{i}", ignore_errors=True)
            baseline = base / "baseline.json"
            baseline.write_text(json.dumps({"datasets": {"tiny": {"ndcg@10": 0.999}}}))
            codes = [cli.main(["run", str(QUICK), "--quiet", "--out", str(base / f"r{i}"), "--baseline", str(baseline)])
                     for i in (0, 1)]
            tmp = base / "codes.json.tmp"
            tmp.write_text(json.dumps(codes))
            tmp.replace(done)
        codes = json.loads(done.read_text())
    return codes, [base / f"r{i}" / "latest" for i in (0, 1)]
