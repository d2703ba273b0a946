"""``.memofs/config.json``: where recall's settings are read (one reader for every caller).

``recall`` holds overrides of any :class:`~memofs.ranking.config.RecallConfig` field
(validated by it). An upstream MemoFS config (upstream-facts.md section 10:
``recall{engine, localEmbeddings, embeddingModel}``) is read as it is: ``engine`` is
mapped to the switches it means, the embedder keys are reported (memofs picks the embedder
with ``MEMOFS_EMBEDDER``), and ``recall.upstream`` (where ``memofs import`` moves them) is
skipped. Upstream never reads ``engine`` itself (facts section 0); we honour what it says.

``autoExtractGraph`` (a boolean, default true) is upstream's runtime option of that name
(upstream-facts.md, "Rule-based extractor"), kept in the file: false stops the rule-based
extraction of graph facts on every write, for a store whose graph is curated (written whole,
:meth:`~memofs.store.directory.Store.write_graph`) rather than extracted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memofs.files import safe_json
from memofs.ranking.config import RecallConfig

ENGINES: dict[str, dict[str, bool]] = {
    "lexical": {"use_vector": False},
    "vector": {"use_bm25": False, "use_fuzzy": False},
    "hybrid": {},
    "auto": {},
}
"""Upstream ``recall.engine`` -> the RecallConfig switches it means."""
EMBEDDER_KEYS = ("localEmbeddings", "embeddingModel")
"""Upstream ``recall`` keys that choose an embedder (memofs: ``MEMOFS_EMBEDDER``)."""


def split_recall_config(recall: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """``config.json`` ``recall`` as RecallConfig overrides plus one message per upstream
    key memofs does not use. ``engine`` is mapped unless our own switch is also set;
    ``recall.upstream`` (where the import keeps upstream's keys) is skipped. A bad
    ``engine`` raises :class:`ConfigFileError` naming the file and key."""
    ours = {k: v for k, v in recall.items() if k not in ("engine", "upstream", *EMBEDDER_KEYS)}
    notes: list[str] = []
    if "engine" in recall:
        engine = recall["engine"]
        if engine not in ENGINES:
            raise ConfigFileError(f"{where}: key 'recall.engine' must be one of {', '.join(ENGINES)}; got {engine!r}")
        for k, v in ENGINES[engine].items():
            ours.setdefault(k, v)
    for k in EMBEDDER_KEYS:
        if k in recall:
            notes.append(f"{where}: key 'recall.{k}' is upstream MemoFS's embedder setting; memofs ignores it "
                         "(choose the embedder with MEMOFS_EMBEDDER; `memofs import` moves it aside)")
    return ours, notes




class ConfigFileError(ValueError):
    """A config.json that cannot be used; the message names the file and key."""


def load_recall_config(path: Path) -> tuple[RecallConfig, list[str]]:
    """The RecallConfig ``path`` asks for (defaults when the file is missing) and one
    message per upstream key it ignores. Raises :class:`ConfigFileError` (one line, file
    and key) on a malformed file or a value RecallConfig refuses."""
    try:
        data = safe_json.load_file(path)
    except FileNotFoundError:
        return RecallConfig(), []
    except safe_json.JSONFileError as exc:
        raise ConfigFileError(str(exc)) from None
    overrides = data.get("recall", {}) if isinstance(data, dict) else None
    if not isinstance(overrides, dict):
        raise ConfigFileError(f"{path}: field 'recall' must be an object")
    ours, notes = split_recall_config(overrides, str(path))
    try:
        return RecallConfig.from_dict(ours), notes
    except (TypeError, ValueError) as exc:
        raise ConfigFileError(f"{path}: field 'recall': {exc}") from None


def load_auto_extract_graph(path: Path) -> bool:
    """``config.json`` ``autoExtractGraph`` (true when the file or the key is missing).
    Raises :class:`ConfigFileError` (one line, file and key) on a malformed file or a
    value that is not a boolean."""
    try:
        data = safe_json.load_file(path)
    except FileNotFoundError:
        return True
    except safe_json.JSONFileError as exc:
        raise ConfigFileError(str(exc)) from None
    value = data.get("autoExtractGraph", True) if isinstance(data, dict) else True
    if not isinstance(value, bool):
        raise ConfigFileError(f"{path}: field 'autoExtractGraph' must be true or false; got {value!r}")
    return value
