"""The repository root stays off ``sys.path`` (issue 40): its ``datasets/`` folder, installed as
``memofs_datasets``, must never pass for Hugging Face's ``datasets`` to a library that probes
for it the way lancedb does (``find_spec("datasets")``, then ``from datasets import Dataset``
once a module of that name is imported)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from memofs_eval._env import REPO

PROBE = """
import importlib.util, sys
import memofs, memofs_eval, memofs_datasets, memofs_eval.studies.systems.run  # the project's packages first
spec = importlib.util.find_spec("datasets")
origin = spec.origin if spec else None
print("REPO" if origin and origin.startswith(sys.argv[1]) else f"OK {origin}")
"""


def _shadowed_by_repo() -> bool:
    spec = importlib.util.find_spec("datasets")
    return bool(spec and spec.origin and spec.origin.startswith(str(REPO)))


def test_datasets_is_not_the_repo_folder_in_the_test_process():
    import memofs_datasets  # noqa: F401
    import memofs_eval.studies.systems.run  # noqa: F401

    assert not _shadowed_by_repo(), "the repository root is on sys.path: datasets/ shadows Hugging Face's datasets"
    mod = sys.modules.get("datasets")
    assert mod is None or not str(getattr(mod, "__file__", "")).startswith(str(REPO))
    if importlib.util.find_spec("datasets") is not None:  # Hugging Face's, when installed: what lancedb imports
        from datasets import Dataset  # noqa: F401


def test_a_harness_process_started_from_the_repo_root_does_not_see_the_folder():
    """``python -c`` from the root puts the root first on ``sys.path``; importing the harness
    (``memofs_eval._env.setup``) takes it off again. Without that, the probe finds ``datasets/``."""
    out = subprocess.run([sys.executable, "-c", PROBE, str(REPO)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().startswith("OK"), out.stdout
    bare = subprocess.run([sys.executable, "-c", "import importlib.util; s = importlib.util.find_spec('datasets');"
                           "print(s.origin if s else None)"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bare.stdout.strip().startswith(str(REPO)), "the probe no longer shows the shadowing it guards against"
