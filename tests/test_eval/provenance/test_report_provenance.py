"""Every committed report records the code and inputs its figures depend on, and they are the
checkout's; only a change to that code stales it (memofs_eval.provenance.stamp, memofs_eval.regenerate)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from memofs_eval._env import REPO
from memofs_eval.provenance.code_closure import closure, digest, imports
from memofs_eval.provenance.stamp import markdown_line, recorded, stale, stamp
from memofs_eval.regenerate import REPORTS, figure_changes

FIGURE_REPORTS = [r for r in REPORTS if not r.timing]
TIMING_REPORTS = [r for r in REPORTS if r.timing]


@pytest.mark.parametrize("rep", FIGURE_REPORTS, ids=lambda r: r.stamp)
def test_report_matches_the_code(rep) -> None:
    assert (REPO / rep.stamp).is_file(), f"{rep.stamp} is not committed"
    why = rep.why_stale()
    assert not why, f"{rep.stamp} is stale ({'; '.join(why)}): regenerate with `make reports` or `{shlex.join(rep.command)}`"


@pytest.mark.parametrize("rep", TIMING_REPORTS, ids=lambda r: r.stamp)
def test_timing_report_records_its_commit(rep) -> None:
    """Timing reports say what they ran on, but a hash never fails them (a rerun measures the machine)."""
    rec = rep.recorded()
    assert rec is not None and rec.get("git_commit"), f"{rep.stamp} records no provenance"


def _project(root: Path) -> Path:
    """A tiny repository with the three packages: eval imports the pipeline, bench is apart."""
    files = {
        "memofs/__init__.py": "",
        "memofs/fusion.py": '"""Fusion."""\n\ndef fuse(x):\n    # weights from the spec\n    return 0.6 * x\n',
        "memofs/unused.py": "X = 1\n",
        "datasets/__init__.py": "",
        "eval/__init__.py": "",
        "eval/run.py": "from memofs.fusion import fuse\n\ndef go():\n    from memofs_datasets import loader\n    return fuse(1)\n",
        "datasets/loader.py": "def load():\n    return []\n",
        "eval/bench/__init__.py": "",
        "eval/bench/time.py": "import memofs.fusion\n",
        "eval/specs/s.toml": "# a comment\nk = 10\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_stamp_covers_the_import_closure_and_inputs(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    got = stamp(("memofs_eval.run",), ("eval/specs/*.toml",), repo)
    assert sorted(got["code_files"]) == [
        "datasets/__init__.py", "datasets/loader.py", "eval/__init__.py", "eval/run.py", "eval/specs/s.toml",
        "memofs/__init__.py", "memofs/fusion.py"]
    assert stale(got, repo) == []


def test_comments_docstrings_and_layout_stale_nothing(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    got = stamp(("memofs_eval.run",), ("eval/specs/*.toml",), repo)
    (repo / "memofs/fusion.py").write_text('"""Fusion, reworded."""\n\n\ndef fuse(x):  # why\n    """Doc."""\n    return 0.6 * x\n')
    (repo / "eval/specs/s.toml").write_text("k = 10  # K\n")
    assert stale(got, repo) == []


def test_stale_names_the_file(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    got = stamp(("memofs_eval.run",), (), repo)
    (repo / "memofs/fusion.py").write_text("def fuse(x):\n    return 0.5 * x\n")
    assert stale(got, repo) == ["memofs/fusion.py changed"]
    (repo / "eval/run.py").write_text("from memofs.fusion import fuse\nfrom memofs import unused\n")
    assert "memofs/unused.py joined the code it depends on" in stale(got, repo)
    (repo / "datasets/loader.py").unlink()
    assert "datasets/loader.py is gone" in stale(got, repo)


def test_a_runs_own_outputs_are_not_its_inputs(tmp_path: Path) -> None:
    """A study that rewrites its model files must not go stale because it wrote them, while a
    model file it reads (another study's) still stales it."""
    repo = _project(tmp_path)
    models = repo / "memofs/models"
    models.mkdir()
    (models / "mine-v2.json").write_text('{"w": 1}')
    (models / "theirs-v3.json").write_text('{"w": 2}')
    got = stamp(("memofs_eval.run",), ("memofs/models/*.json",), repo, outputs=("memofs/models/*-v2.json",))
    assert "memofs/models/mine-v2.json" not in got["code_files"] and "memofs/models/theirs-v3.json" in got["code_files"]
    (models / "mine-v2.json").write_text('{"w": 3}')
    (models / "mine2-v2.json").write_text('{"w": 4}')
    assert stale(got, repo) == []
    (models / "theirs-v3.json").write_text('{"w": 5}')
    assert stale(got, repo) == ["memofs/models/theirs-v3.json changed"]


def test_bench_edit_stales_only_timing(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    run = stamp(("memofs_eval.run",), (), repo)
    bench = stamp(("memofs_eval.bench.time",), (), repo)
    (repo / "eval/bench/time.py").write_text("import memofs.fusion\nN = 2\n")
    assert stale(run, repo) == [] and stale(bench, repo) == ["eval/bench/time.py changed"]


def test_committed_figure_reports_do_not_depend_on_benches_or_comments() -> None:
    """On the real tree: no figure report's code includes eval/bench, so a bench edit stales only
    the timing reports; and a comment added to every memofs source changes no digest."""
    for rep in FIGURE_REPORTS:
        rec = rep.recorded()
        if rec is None:
            continue
        files = set(rec.get("code_files", {})) | {p.relative_to(REPO).as_posix() for p in closure(rec.get("code_entries", ()), REPO).values()}
        assert not [f for f in files if f.startswith("eval/bench/")], rep.stamp
    src = (REPO / "memofs/ranking/fusion.py").read_text(encoding="utf-8")
    assert digest(REPO / "memofs/ranking/fusion.py") == _digest_of(src.replace("\n", "  # a comment\n", 3) + "# trailing\n")


def _digest_of(text: str) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.py"
        p.write_text(text, encoding="utf-8")
        return digest(p)


def test_a_file_rewritten_in_place_gets_its_new_digest_and_imports(tmp_path: Path) -> None:
    """digest and imports remember a source by its bytes, never by its path or time: an edit of
    the same size in the same instant is seen, and the old bytes give the old digest back."""
    p = tmp_path / "m.py"
    p.write_text("N = 1\n")
    first = digest(p)
    p.write_text("N = 2\n")
    assert digest(p) != first
    p.write_text("N = 1\n")
    assert digest(p) == first
    p.write_text('"""A docstring."""\nN = 1  # a comment\n')
    assert digest(p) == first
    known = {"pkg", "pkg.a", "pkg.b", "pkg.m"}
    p.write_text("from pkg import a\n")
    assert imports("pkg.m", p, known) == {"pkg.a"}
    p.write_text("from pkg import b\n")  # same size, same instant
    assert imports("pkg.m", p, known) == {"pkg.b"}


def test_markdown_stamp_round_trips(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    line = markdown_line(("memofs_eval.run",), (), repo)
    got = recorded(f"# Report\n\n{line}\n")
    assert got == stamp(("memofs_eval.run",), (), repo)
    assert got["git_commit"] == "unknown"


def test_figure_changes_compare_figure_by_figure() -> None:
    old = b"method,ndcg\na,0.5\nb,0.25\n"
    assert figure_changes("r.csv", old, old) == []
    assert figure_changes("r.csv", old, b"method,ndcg\na,0.5\nb,0.3\n") == ["r.csv: {'method': 'b'} ndcg: 0.25 -> 0.3"]
    # rows matched by their text columns: a new column or row is named, the figures still compared
    assert figure_changes("r.csv", old, b"method,ndcg,protocol\nb,0.25,x\na,0.5,x\nc,0.1,x\n") == [
        "r.csv: column protocol added", "r.csv: row {'method': 'c'} added"]
    assert figure_changes("r.csv", old, b"method,ndcg,protocol\na,0.5,x\nb,0.2,x\n") == [
        "r.csv: column protocol added", "r.csv: {'method': 'b'} ndcg: 0.25 -> 0.2"]
    a = json.dumps({"git_commit": "x", "code_hash": "1", "cv": {"locomo": [0.1, 0.2]}, "timings": {"s": 1}}).encode()
    b = json.dumps({"git_commit": "y", "code_hash": "2", "cv": {"locomo": [0.1, 0.2]}, "timings": {"s": 9}}).encode()
    assert figure_changes("s.json", a, b) == []
    c = json.dumps({"cv": {"locomo": [0.1, 0.3]}}).encode()
    assert figure_changes("s.json", a, c) == ["s.json: cv.locomo[1]: 0.2 -> 0.3"]
