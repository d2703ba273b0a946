"""The ``.memofs/`` store of one project, by the names it has always been imported by.

Each concept lives in its own module (issue 35), re-exported here so ``from
memofs.store.project import ...`` keeps working:

* :mod:`memofs.store.directory`: :class:`Store` (layout, lock, crash-safe writes, loading;
  its docstring states the durability rules) and its constants;
* :mod:`memofs.store.derived`: the derived lines (events, graph facts), their checkpoint,
  ``sync_derived`` and ``repair``;
* :mod:`memofs.store.lines`: reading the JSONL files; memory lines decoded by the one
  ``memories.jsonl`` codec, :mod:`memofs.files.memory_lines`;
* :mod:`memofs.store.inputs`: what a caller's text, tags and namespace must be;
* :mod:`memofs.store.rehydrate`: a store loaded into a ready Recaller;
* :mod:`memofs.store.live`: :class:`LiveStore`, the long-lived view that follows the files;
* :mod:`memofs.store.errors`: :class:`StoreError`, :class:`StoreNotFoundError`.
"""

from __future__ import annotations

from memofs.files.memory_lines import MAX_TAGS, MAX_TEXT_CHARS, memory_to_json
from memofs.store.derived import SUMMARY_CHARS, DerivedLines, fnv1a32
from memofs.store.directory import (CORE_TEMPLATE, DERIVED_CHECKPOINT_WRITES, LOCK_TIMEOUT_S, MANIFEST_VERSION,
                                    SIDECAR_REFRESH_LINES, Clock, LoadReport, Store, fixed_clock, sha256_hex16,
                                    wall_clock)
from memofs.store.errors import StoreError, StoreNotFoundError
from memofs.store.inputs import MAX_QUERY_CHARS, NAMESPACE_PATTERN, TAG_PATTERN, normalize_tags
from memofs.store.lines import memory_from_row, read_jsonl, read_jsonl_from
from memofs.store.live import LiveStore
from memofs.store.rehydrate import Rehydrated, rehydrate

__all__ = [
    "CORE_TEMPLATE", "DERIVED_CHECKPOINT_WRITES", "LOCK_TIMEOUT_S", "MANIFEST_VERSION", "MAX_QUERY_CHARS", "MAX_TAGS",
    "MAX_TEXT_CHARS", "NAMESPACE_PATTERN", "SIDECAR_REFRESH_LINES", "SUMMARY_CHARS", "TAG_PATTERN", "Clock",
    "DerivedLines", "LiveStore", "LoadReport", "Rehydrated", "Store", "StoreError", "StoreNotFoundError", "sha256_hex16",
    "fixed_clock", "fnv1a32", "memory_from_row", "memory_to_json", "normalize_tags", "read_jsonl", "read_jsonl_from", "rehydrate",
    "wall_clock",
]
