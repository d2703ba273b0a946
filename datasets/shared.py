"""Where the project's shared reference data lives: one resolver for every caller.

The data that may not be committed (LoCoMo, the LongMemEval development sample, the spec
write-up) sits in a ``shared/`` folder beside the repository. ``$MEMOFS_SHARED`` names
another folder; ``MEMOFS_SHARED=off`` (or ``none``, ``0``, or the empty string) switches
shared data off, so a run can prove it needs none of it. Shared data only *adds* tests,
benchmarks and reports: the core suite and ``make eval`` never depend on it.

``$MEMOFS_SHARED_AUDIT`` names a file to which every resolution of the shared folder appends
one line, ``$MEMOFS_TEST_NODEID`` (the test running, set by ``tests/conftest.py``): CI's
standalone pass re-runs, with shared data off, exactly the tests that used it (``.ci/run``).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "MEMOFS_SHARED"
AUDIT_ENV, NODEID_ENV = "MEMOFS_SHARED_AUDIT", "MEMOFS_TEST_NODEID"
OFF = frozenset({"", "off", "none", "0", "false", "no"})
DEFAULT = Path(__file__).resolve().parents[1].parent / "shared"


def shared_root() -> Path | None:
    """The shared folder, or ``None`` when it is switched off or absent."""
    raw = os.environ.get(ENV)
    if raw is not None and raw.strip().lower() in OFF:
        return None
    root = Path(raw).expanduser().resolve() if raw is not None else DEFAULT
    _audit()
    return root if root.is_dir() else None


def _audit() -> None:
    """One line naming the running test in ``$MEMOFS_SHARED_AUDIT``, when that is set."""
    log = os.environ.get(AUDIT_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as f:  # one short append: atomic on POSIX
            f.write(os.environ.get(NODEID_ENV, "?") + "\n")


def shared_path(*parts: str) -> Path | None:
    """``<shared>/<parts...>`` when shared data is on and that path exists, else ``None``."""
    root = shared_root()
    if root is None:
        return None
    path = root.joinpath(*parts)
    return path if path.exists() else None


def locomo_path() -> Path | None:
    """The LoCoMo release folder (``datasets/locomo``), when present."""
    return shared_path("datasets", "locomo")


def longmemeval_dev_path() -> Path | None:
    """The LongMemEval development sample (``datasets/longmemeval-dev/longmemeval_dev.json``)."""
    return shared_path("datasets", "longmemeval-dev", "longmemeval_dev.json")
