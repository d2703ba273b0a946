"""Every committed report records the code that made it, and that code is the checkout's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memofs_eval._env import REPO
from memofs_eval.provenance import code_files, code_hash, markdown_line, recorded

# report file -> the command that regenerates it
JSON_REPORTS = {
    "reports/latest/manifest.json": "make eval",
    "reports/locomo/latest/manifest.json": "make eval-locomo",
    "reports/learned/summary.json": "python -m memofs_eval.learned",
    "reports/learned/lodo/summary.json": "python -m memofs_eval.learned_transfer",
    "reports/longmemeval/latest/manifest.json": "make eval-longmemeval",
}
MARKDOWN_REPORTS = {
    "reports/performance.md": "make bench",
    "reports/bench-lexical.md": "make bench (or make bench-lexical)",
    "reports/bench-vector.md": "make bench (or make bench-vector)",
    "reports/supersession/supersession.md": "python -m memofs_eval.supersession_sweep --out reports/supersession --count locomo=../shared/datasets/locomo:locomo --count longmemeval-dev=../shared/datasets/longmemeval-dev/longmemeval_dev.json:longmemeval",
}


def _committed(rel: str) -> Path:
    path = REPO / rel
    if not path.is_file():
        pytest.fail(f"{rel} is not committed")
    return path


@pytest.mark.parametrize("rel", sorted(JSON_REPORTS))
def test_json_report_matches_the_code(rel: str) -> None:
    got = json.loads(_committed(rel).read_text(encoding="utf-8"))
    assert got.get("git_commit") and got.get("code_hash"), f"{rel} records no provenance"
    assert got["code_hash"] == code_hash(), f"{rel} was made by other code: regenerate with `{JSON_REPORTS[rel]}`"


@pytest.mark.parametrize("rel", sorted(MARKDOWN_REPORTS))
def test_markdown_report_matches_the_code(rel: str) -> None:
    got = recorded(_committed(rel).read_text(encoding="utf-8"))
    assert got is not None, f"{rel} records no provenance"
    assert got["code_hash"] == code_hash(), f"{rel} was made by other code: regenerate with `{MARKDOWN_REPORTS[rel]}`"


def test_code_hash_follows_every_code_file(tmp_path: Path) -> None:
    for rel in ("memofs/a.py", "eval/b.py", "eval/specs/s.toml", "datasets/c.py", "memofs/ranking/models/m.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    (tmp_path / "README.md").write_text("prose\n")
    (tmp_path / "datasets" / "tiny").mkdir()
    (tmp_path / "datasets" / "tiny" / "memories.jsonl").write_text("{}\n")  # data: hashed per dataset, not here
    assert [p.relative_to(tmp_path).as_posix() for p in code_files(tmp_path)] == [
        "datasets/c.py", "eval/b.py", "eval/specs/s.toml", "memofs/a.py", "memofs/ranking/models/m.json"]
    before = code_hash(tmp_path)
    (tmp_path / "README.md").write_text("other prose\n")
    assert code_hash(tmp_path) == before
    (tmp_path / "eval" / "b.py").write_text("x = 2\n")
    assert code_hash(tmp_path) != before
    line = markdown_line(tmp_path)
    assert recorded(f"# Report\n\n{line}\n") == {"git_commit": "unknown", "code_hash": code_hash(tmp_path)}
