"""``write_dataset``: a :class:`~memofs_datasets.dataset.Dataset` as a dataset folder, the exact
inverse of ``load_dataset`` (memories in the store's dialect, ``format = 2``)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memofs.files.jsonl import compact
from memofs.files.memory_lines import memory_to_json
from memofs.files.timestamps import format_iso

from .dataset import (DATASET_TOML, EDGES, FORMAT, MEMORIES, NODES, QRELS, QUERIES, QUERY_CATEGORIES, Dataset,
                      change_to_json, edge_to_json, node_to_json, query_to_json)


def _is_public(ds: Dataset) -> bool:
    """Public-benchmark datasets relax the authored rules (no timestamps, free categories, no split)."""
    return (any(m.created_at is None for m in ds.memories)
            or any(q.split is None or q.category not in QUERY_CATEGORIES for q in ds.queries))


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # JSON string escapes are valid TOML basic-string escapes


def _jsonl(records: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def write_dataset(dataset: Dataset, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``dataset`` as a dataset folder at ``path`` (``load_dataset`` reads back an equal Dataset).

    The folder is assembled next to ``path`` and renamed into place, so a failure leaves nothing behind.
    The source tree (if any) is copied from ``dataset.root``.
    """
    dest = Path(path)
    if dest.exists() and any(dest.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{dest} exists and is not empty (pass overwrite=True)")
        if not (dest / DATASET_TOML).is_file():
            raise FileExistsError(f"refusing to overwrite {dest}: it is not a dataset folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _write_into(dataset, tmp)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _write_into(ds: Dataset, out: Path) -> None:
    lines = [f"name = {_toml_str(ds.name)}", f"version = {_toml_str(ds.version)}",
             f"as_of = {_toml_str(format_iso(ds.as_of))}", f"licence = {_toml_str(ds.licence)}",
             f"description = {_toml_str(ds.description)}"]
    lines.append(f"format = {FORMAT}")
    if _is_public(ds):
        lines.append("public = true")
    if ds.source_tree is not None:
        if ds.root is None:
            raise ValueError("dataset has a source_tree but no root to copy it from")
        lines += ["", "[source_tree]", f"root = {_toml_str(ds.source_tree.as_posix())}"]
        shutil.copytree(ds.root / ds.source_tree, out / ds.source_tree, ignore=shutil.ignore_patterns("__pycache__"))
    for c in ds.changes:
        lines += ["", "[[changes]]"] + [f"{k} = {_toml_str(v)}" for k, v in change_to_json(c).items()]
    (out / DATASET_TOML).write_text("\n".join(lines) + "\n", encoding="utf-8")
    # the store's own lines (memofs.files.memory_lines), so either reads the other's file
    (out / MEMORIES).write_text("".join(compact(memory_to_json(m)) + "\n" for m in ds.memories), encoding="utf-8")
    (out / QUERIES).write_text(_jsonl(query_to_json(q) for q in ds.queries), encoding="utf-8")
    with open(out / QRELS, "w", encoding="utf-8") as f:
        for qid, judged in ds.qrels.items():
            for mid, rel in judged.items():
                f.write(f"{qid} 0 {mid} {rel}\n")
    if ds.graph_nodes or ds.graph_edges:
        (out / "graph").mkdir()
        (out / NODES).write_text(_jsonl(node_to_json(n) for n in ds.graph_nodes), encoding="utf-8")
        (out / EDGES).write_text(_jsonl(edge_to_json(e) for e in ds.graph_edges), encoding="utf-8")
