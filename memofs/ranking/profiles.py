"""Named recall profiles: ``RecallConfig(profile=...)`` / ``"profile"`` in ``.memofs/config.json``.

* ``reference``: the spec's settings (every :class:`~memofs.ranking.config.RecallConfig`
  default); the default profile.
* ``robust``: the learned-fusion study's best leave-one-dataset-out configuration
  (``python -m memofs_eval.studies.learned_transfer``), retrained on every dataset for shipping. Its settings
  live beside the model in ``memofs/ranking/models/profile-robust.json`` (written by the
  study): the recall fields to set, with ``learned_model`` naming a file of that folder.
* ``recommended``: learned fusion chosen by a rule fixed in advance over a wider space (the
  robust study's candidates x query modes with and without Snowball stemming), selected and
  scored leave one dataset out (``python -m memofs_eval.studies.recommended``); its file
  ``profile-recommended.json`` also lists, per dataset, a model trained without that dataset
  (``heldout_models``), which evaluations of that dataset use.
* ``upstream``: upstream MemoFS's own ranking (``localRecall`` + ``mergeHybridCandidates``,
  upstream-facts sections 0-4), for users who switch tools and want the same order:
  fixed weights 0.6 x vector + 0.4 x lexical even with no vector score (no dynamic
  weighting), then the 0.5/0.5 reranker blend; BM25, fuzzy and reranker over upstream's
  document text ``(title ?? first 80 characters) + "\n" + text``, tokenized with upstream's
  68 stop words (not our 94); graph node documents as
  ``label summary`` (they share the BM25 corpus, so N, df and avgdl count them) and
  returned as candidates; no query rewrite, lexicon, entity boost, drift, kind decay or
  supersession; recency and confidence neutral (0.5 each: upstream's lexical candidates carry
  neither). What it cannot copy: upstream's BM25 holds only the memories its running process
  wrote durably (a fresh upstream process holds graph nodes only).

This module reads data only (no config import), so :mod:`memofs.ranking.config` can use it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

MODELS_DIR = Path(__file__).resolve().parent / "models"
PROFILE_NAMES: tuple[str, ...] = ("reference", "robust", "recommended", "upstream")
UPSTREAM_SETTINGS: dict[str, Any] = {
    "dynamic_weights": False, "upstream_index_text": True, "graph_doc_aliases": False, "upstream_stop_words": True,
    "include_graph_docs": True, "neutral_recency_confidence": True, "use_rewrite": False,
    "use_lexicon": False, "use_entity_boost": False, "use_drift": False, "use_decay": False,
    "use_supersession": False, "entity_match": "upstream",
}
"""The ``upstream`` profile's :class:`~memofs.ranking.config.RecallConfig` fields (see above)."""

_STUDY = {"recommended": "python -m memofs_eval.studies.recommended"}


def profile_file(name: str) -> Path:
    return MODELS_DIR / f"profile-{name}.json"


@lru_cache(maxsize=None)
def _settings(name: str) -> tuple[tuple[str, Any], ...]:
    if name == "reference":
        return (("profile", "reference"),)
    if name == "upstream":
        return tuple(sorted({**UPSTREAM_SETTINGS, "profile": name}.items()))
    path = profile_file(name)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: profile {name!r} is not shipped (run {_STUDY.get(name, 'python -m memofs_eval.studies.learned_transfer')})") from None
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
