"""Named recall profiles: ``RecallConfig(profile=...)`` / ``"profile"`` in ``.memofs/config.json``.

* ``reference``: the spec's settings (every :class:`~memofs.ranking.config.RecallConfig`
  default); the default profile.
* ``robust``: the learned-fusion study's best leave-one-dataset-out configuration
  (``python -m memofs_eval.learned_transfer``), retrained on every dataset for shipping. Its settings
  live beside the model in ``memofs/ranking/models/profile-robust.json`` (written by the
  study): the recall fields to set, with ``learned_model`` naming a file of that folder.

This module reads data only (no config import), so :mod:`memofs.ranking.config` can use it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

MODELS_DIR = Path(__file__).resolve().parent / "models"
PROFILE_NAMES: tuple[str, ...] = ("reference", "robust")


def profile_file(name: str) -> Path:
    return MODELS_DIR / f"profile-{name}.json"


@lru_cache(maxsize=None)
def _settings(name: str) -> tuple[tuple[str, Any], ...]:
    if name == "reference":
        return (("profile", "reference"),)
    path = profile_file(name)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: profile {name!r} is not shipped (run python -m memofs_eval.learned_transfer)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: json: {exc.msg}") from None
    settings = doc.get("settings") if isinstance(doc, dict) else None
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: settings: expected an object of RecallConfig fields")
    out = dict(settings)
    if isinstance(out.get("learned_model"), str):
        out["learned_model"] = str(MODELS_DIR / out["learned_model"])  # the file ships beside this one
    out["profile"] = name
    return tuple(sorted(out.items()))


def profile_settings(name: str) -> dict[str, Any]:
    """The :class:`~memofs.ranking.config.RecallConfig` fields of profile ``name``."""
    if name not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {name!r} (one of {', '.join(PROFILE_NAMES)})")
    return dict(_settings(name))
