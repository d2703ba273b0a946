"""What produced a report: its commit, and the code and inputs its figures depend on.

A report records a *stamp*: ``git_commit``; ``code_entries``, the modules that compute its
figures; ``code_inputs``, the repository files it reads besides code (its spec, the shipped
model files); ``code_files``, the :func:`memofs_eval.provenance.code_closure.digest` of every file in the
entries' import closure, of every project module the producing process had imported, and of
every input; and ``code_hash``, one hash over that map. Comments, docstrings and layout do
not count, and a file outside the closure cannot stale the report.

:func:`stale` says why a recorded stamp no longer describes the checkout (a file changed, is
gone, or joined the closure), so ``tests/test_eval/provenance/test_report_provenance.py`` and ``make reports``
(:mod:`memofs_eval.regenerate`) name the report and the file. Data is hashed separately (each
report's dataset hashes). The provenance machinery itself computes no figure and is left out.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from memofs_eval._env import REPO
from memofs_eval.provenance.code_closure import PACKAGES, closure, combined, digest

# modules that describe reports but compute no figure
NON_FIGURE = frozenset({"memofs_eval.provenance.stamp", "memofs_eval.provenance.code_closure", "memofs_eval.regenerate"})
MODEL_FILES = "memofs/ranking/models/*.json"


def git_commit(repo: Path = REPO, short: bool = False) -> str:
    """``HEAD``'s sha, with ``+dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        args = ["git", "rev-parse", *(["--short"] if short else []), "HEAD"]
        sha = subprocess.run(args, cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _rel(path: Path, repo: Path) -> str | None:
    try:
        return path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return None


def _inputs(patterns: Sequence[str], repo: Path, outputs: Sequence[str] = ()) -> list[str]:
    """Files matching ``patterns``, less those matching ``outputs``: what a run writes itself
    (a study's own model files) is never an input of its figures."""
    found = {p.relative_to(repo).as_posix() for pat in patterns for p in repo.glob(pat) if p.is_file()}
    written = {p.relative_to(repo).as_posix() for pat in outputs for p in repo.glob(pat)}
    return sorted(found - written)


def _loaded(repo: Path) -> set[str]:
    """Project modules this process has imported (lazy imports in the run included)."""
    folders = tuple(f"{f}/" for f in PACKAGES.values())
    out = set()
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] not in PACKAGES or name in NON_FIGURE:
            continue
        rel = _rel(Path(getattr(mod, "__file__", None) or "/"), repo)
        if rel and rel.startswith(folders):
            out.add(rel)
    return out


def _closure_files(entries: Sequence[str], repo: Path) -> set[str]:
    return {p.relative_to(repo).as_posix() for name, p in closure(entries, repo).items() if name not in NON_FIGURE}


def stamp(entries: Sequence[str], inputs: Sequence[str] = (), repo: Path = REPO, outputs: Sequence[str] = ()) -> dict:
    """The provenance a report records (see the module docstring); ``outputs``: patterns of
    files the run writes, left out of its inputs."""
    files = _closure_files(entries, repo) | _loaded(repo) | set(_inputs(inputs, repo, outputs))
    digests = {rel: digest(repo / rel) for rel in sorted(files)}
    return {"git_commit": git_commit(repo), "code_hash": combined(digests), "code_entries": list(entries),
            "code_inputs": list(inputs), "code_outputs": list(outputs), "code_files": digests}


def stale(recorded: dict, repo: Path = REPO) -> list[str]:
    """Why ``recorded`` (a :func:`stamp`) no longer describes ``repo``; empty when it does."""
    files: dict[str, str] = recorded.get("code_files") or {}
    if not files:
        return ["it records no per-file provenance (made before per-report provenance)"]
    reasons = []
    for rel, d in sorted(files.items()):
        path = repo / rel
        if not path.is_file():
            reasons.append(f"{rel} is gone")
        elif digest(path) != d:
            reasons.append(f"{rel} changed")
    now = _closure_files(recorded.get("code_entries", ()), repo) | set(
        _inputs(recorded.get("code_inputs", ()), repo, recorded.get("code_outputs", ())))
    reasons += [f"{rel} joined the code it depends on" for rel in sorted(now - set(files))]
    return reasons


_PREFIX = "<!-- provenance: "


def markdown_line(entries: Sequence[str], inputs: Sequence[str] = (), repo: Path = REPO) -> str:
    """A markdown report's stamp, as one comment line (invisible when rendered)."""
    return _PREFIX + json.dumps(stamp(entries, inputs, repo), sort_keys=True, separators=(",", ":")) + " -->"


def recorded(text: str) -> dict | None:
    """The stamp a markdown report recorded with :func:`markdown_line`, or ``None``."""
    m = re.search(r"<!-- provenance: (\{.*?\}) -->", text)
    if m:
        return json.loads(m.group(1))
    legacy = re.search(r"<!-- provenance: git_commit=(\S+) code_hash=(\S+) -->", text)  # one hash over every file
    return {"git_commit": legacy.group(1), "code_hash": legacy.group(2)} if legacy else None
