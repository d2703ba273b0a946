"""The memofs dataset format: a folder of ``dataset.toml``, ``memories.jsonl``, ``queries.jsonl``,
``qrels.tsv`` and optional ``graph/`` and source tree.  ``load_dataset`` validates everything and
either returns a complete :class:`Dataset` or raises :class:`DatasetError`; ``write_dataset`` is its
exact inverse.  See ``datasets/README.md`` for the field-by-field description.

The format's concepts live in their own modules, re-exported here so ``from
memofs_datasets.format import ...`` keeps working: the records and constants
(:mod:`.dataset`), the validation helpers (:mod:`.validation`), the loader (:mod:`.loader`)
and the writer (:mod:`.writer`). Memories use memofs's one ``memories.jsonl`` codec
(:mod:`memofs.files.memory_lines`), timestamps memofs's parser (:mod:`memofs.files.timestamps`).
"""

from __future__ import annotations

from memofs.files.memory_lines import memory_to_json
from memofs.files.timestamps import format_iso, parse_iso

from .dataset import (CHANGE_KINDS, DATASET_TOML, EDGES, FORMAT, MAX_RELEVANCE, MEMORIES, NODES,
                      QRELS, QUERIES, QUERY_CATEGORIES, SPLITS, TASK_TYPES, Change, Dataset, Query, change_to_json,
                      edge_to_json, node_to_json, query_to_json)
from .loader import bundled_datasets, load_dataset
from .validation import DatasetError, Issue, read_json
from .writer import write_dataset

__all__ = [
    "CHANGE_KINDS", "DATASET_TOML", "EDGES", "FORMAT", "MAX_RELEVANCE", "MEMORIES", "NODES", "QRELS",
    "QUERIES", "QUERY_CATEGORIES", "SPLITS", "TASK_TYPES", "Change", "Dataset", "DatasetError", "Issue", "Query",
    "bundled_datasets", "change_to_json", "edge_to_json", "format_iso", "load_dataset", "memory_to_json",
    "node_to_json", "parse_iso", "query_to_json", "read_json", "write_dataset",
]
