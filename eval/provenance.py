"""What produced a report: the commit and a hash of the code its figures depend on.

``code_hash`` is the SHA-256 (first 16 hex digits) of every file that can change a
committed figure: the Python sources of ``memofs/``, ``eval/`` and ``datasets/``, the
experiment specs (``eval/specs/*.toml``) and the shipped model files
(``memofs/ranking/models/*.json``), each as ``relative path NUL bytes NUL`` in path order. Data is
hashed separately (each report's dataset hashes). Every committed report records it, and
``tests/test_report_provenance.py`` fails when a report's hash is not the checkout's, so a
report can never silently describe other code than the one beside it.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from memofs_eval._env import REPO

CODE_GLOBS: tuple[str, ...] = ("memofs/**/*.py", "eval/**/*.py", "datasets/*.py", "eval/specs/*.toml", "memofs/ranking/models/*.json")


def code_files(repo: Path = REPO) -> list[Path]:
    found = {p for g in CODE_GLOBS for p in repo.glob(g) if p.is_file() and "__pycache__" not in p.parts}
    return sorted(found, key=lambda p: p.relative_to(repo).as_posix())


def code_hash(repo: Path = REPO) -> str:
    h = hashlib.sha256()
    for p in code_files(repo):
        h.update(p.relative_to(repo).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


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


def provenance(repo: Path = REPO) -> dict[str, str]:
    """The two fields every report records."""
    return {"git_commit": git_commit(repo), "code_hash": code_hash(repo)}


_LINE = "<!-- provenance: git_commit={git_commit} code_hash={code_hash} -->"


def markdown_line(repo: Path = REPO) -> str:
    """The provenance of a markdown report, as a comment line (invisible when rendered)."""
    return _LINE.format(**provenance(repo))


def recorded(text: str) -> dict[str, str] | None:
    """The provenance a markdown report recorded with :func:`markdown_line`, or ``None``."""
    import re

    m = re.search(r"<!-- provenance: git_commit=(\S+) code_hash=(\S+) -->", text)
    return {"git_commit": m.group(1), "code_hash": m.group(2)} if m else None
