"""The memofs dataset format: a folder of ``dataset.toml``, ``memories.jsonl``, ``queries.jsonl``,
``qrels.tsv`` and optional ``graph/`` and source tree.  ``load_dataset`` validates everything and
either returns a complete :class:`Dataset` or raises :class:`DatasetError`; ``write_dataset`` is its
exact inverse.  See ``datasets/README.md`` for the field-by-field description.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

from memofs.files.records import GRAPH_STATUSES, MEMORY_KINDS, Anchor, GraphEdge, GraphNode, Memory
from memofs.text.lexicon import TASK_TYPES

QUERY_CATEGORIES: tuple[str, ...] = (
    "identifier",
    "exact_phrase",
    "error_code_version",
    "paraphrase",
    "abbreviation",
    "temporal_superseded",
    "temporal_recency",
    "stale_anchor",
    "expired_kind",
    "task_typed",
)
SPLITS: tuple[str, ...] = ("tune", "heldout")
CHANGE_KINDS: tuple[str, ...] = ("modified", "deleted")
MAX_RELEVANCE = 3

DATASET_TOML = "dataset.toml"
MEMORIES = "memories.jsonl"
QUERIES = "queries.jsonl"
QRELS = "qrels.tsv"
NODES = "graph/nodes.jsonl"
EDGES = "graph/edges.jsonl"
_FILE_ORDER = (DATASET_TOML, MEMORIES, QUERIES, QRELS, NODES, EDGES)
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Query:
    """One evaluation query; ``scope`` restricts its corpus to one namespace, ``as_of`` overrides "now"."""

    id: str
    text: str
    task_type: str = "general"
    category: str = "uncategorized"
    split: str | None = None
    as_of: datetime | None = None
    scope: str | None = None
    notes: str = ""
    metadata: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Change:
    """A file of the source tree changed (``modified`` | ``deleted``) after the memories were written."""

    namespace: str
    path: str
    change: str
    date: datetime


@dataclass(frozen=True)
class Issue:
    """One defect: the file (relative to the dataset root where possible), 1-based line, field, message."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.field}: {self.message}"


class DatasetError(ValueError):
    """A defective dataset.  ``str`` is ``path:line: field: message`` of the first defect; ``errors``
    holds every defect found (the loader collects them all before raising)."""

    def __init__(self, file: str | os.PathLike, line: int | None, field: str, message: str,
                 errors: list[Issue] | None = None) -> None:
        self.file = str(file)
        self.line = line
        self.field = field
        self.message = message
        first = Issue(self.file, line, field, message)
        self.errors: list[Issue] = errors if errors else [first]
        text = str(first)
        if len(self.errors) > 1:
            text += f" (and {len(self.errors) - 1} more defect(s))"
        super().__init__(text)

    @classmethod
    def from_issues(cls, issues: list[Issue]) -> DatasetError:
        first = issues[0]
        return cls(first.file, first.line, first.field, first.message, list(issues))

    def report(self, limit: int = 50) -> str:
        """Every defect, one per line (at most ``limit``)."""
        lines = [str(i) for i in self.errors[:limit]]
        if len(self.errors) > limit:
            lines.append(f"... {len(self.errors) - limit} more")
        return "\n".join(lines)


# --------------------------------------------------------------------------- dates


def parse_iso(value: Any) -> datetime:
    """Parse an ISO 8601 timestamp that carries a timezone; raise ``ValueError`` otherwise."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from None
    else:
        raise ValueError(f"expected an ISO 8601 string, got {type(value).__name__}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"timestamp has no timezone (naive datetimes are ambiguous): {value!r}")
    return dt


def format_iso(dt: datetime) -> str:
    """ISO 8601 with ``Z`` for UTC, the offset otherwise (the offset is preserved on round trip)."""
    text = dt.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _utc(dt: datetime | None) -> str | None:
    return None if dt is None else format_iso(dt.astimezone(timezone.utc))


# --------------------------------------------------------------------------- dataset


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset.  ``qrels[query_id][memory_id] = relevance`` (0-3, zeros are judged-not-relevant).

    ``source_tree`` is relative to ``root`` (the folder the dataset was loaded from); anchors of a
    memory in namespace NS resolve to ``root / source_tree / NS / anchor.path``.  ``stats`` is a
    loader's report (counts, dropped items) and takes no part in equality or the content hash.
    """

    name: str
    version: str
    as_of: datetime
    licence: str
    description: str
    memories: tuple[Memory, ...]
    queries: tuple[Query, ...]
    qrels: dict[str, dict[str, int]]
    graph_nodes: tuple[GraphNode, ...] = ()
    graph_edges: tuple[GraphEdge, ...] = ()
    source_tree: Path | None = None
    changes: tuple[Change, ...] = ()
    root: Path | None = field(default=None, compare=False)
    stats: dict = field(default_factory=dict, compare=False)

    @cached_property
    def _by_namespace(self) -> dict[str, tuple[Memory, ...]]:
        groups: dict[str, list[Memory]] = {}
        for m in self.memories:
            groups.setdefault(m.namespace, []).append(m)
        return {ns: tuple(ms) for ns, ms in groups.items()}

    @cached_property
    def memories_by_id(self) -> dict[str, Memory]:
        return {m.id: m for m in self.memories}

    @cached_property
    def queries_by_id(self) -> dict[str, Query]:
        return {q.id: q for q in self.queries}

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self._by_namespace)

    def corpus_for(self, query: Query) -> tuple[Memory, ...]:
        """The memories a query is asked against: its scope namespace, or everything if unscoped."""
        if query.scope is None:
            return self.memories
        return self._by_namespace.get(query.scope, ())

    def relevant(self, query_id: str, min_relevance: int = 1) -> dict[str, int]:
        return {m: r for m, r in self.qrels.get(query_id, {}).items() if r >= min_relevance}

    def split(self, name: str) -> Dataset:
        """The queries of split ``name`` with their qrels; memories and graph are kept whole."""
        queries = tuple(q for q in self.queries if q.split == name)
        if not queries:
            have = sorted({str(q.split) for q in self.queries})
            raise ValueError(f"dataset {self.name!r} has no query in split {name!r} (splits: {have})")
        keep = {q.id for q in queries}
        qrels = {qid: dict(j) for qid, j in self.qrels.items() if qid in keep}
        return dataclasses.replace(self, queries=queries, qrels=qrels, stats={**self.stats, "split": name})

    def anchor_root(self, namespace: str) -> Path | None:
        """Folder the anchors of ``namespace`` resolve against (None without a source tree)."""
        if self.source_tree is None or self.root is None:
            return None
        return self.root / self.source_tree / namespace

    def graph_for(self, namespace: str | None) -> tuple[tuple[GraphNode, ...], tuple[GraphEdge, ...]]:
        """The entity graph a query scoped to ``namespace`` sees.

        Node ids of the form ``<namespace>:...`` belong to that namespace (the authored
        datasets prefix each project's graph so); other nodes are shared by every scope.
        Edges are kept when both ends are visible. Unscoped queries see the whole graph.
        """
        if namespace is None:
            return self.graph_nodes, self.graph_edges
        spaces = set(self.namespaces)

        def visible(node_id: str) -> bool:
            head = node_id.split(":", 1)[0] if ":" in node_id else None
            return head not in spaces or head == namespace

        nodes = tuple(n for n in self.graph_nodes if visible(n.id))
        ids = {n.id for n in nodes}
        return nodes, tuple(e for e in self.graph_edges if e.source in ids and e.target in ids)

    def changes_for(self, namespace: str) -> dict[str, Change]:
        """Declared changes of one namespace's tree, keyed by anchor path."""
        return {c.path: c for c in self.changes if c.namespace == namespace}

    def now_for(self, query: Query) -> datetime:
        """"Now" for recency and expiry: the query's ``as_of`` or the dataset's."""
        return query.as_of if query.as_of is not None else self.as_of

    def content_hash(self) -> str:
        """sha256 of canonical JSON lines (sorted keys, UTC timestamps) of as_of, memories, queries,
        qrels, graph, changes and the source tree's file hashes.  Name, version, licence,
        description, stats and the folder location do not enter it."""
        h = hashlib.sha256()
        for record in self._canonical_records():
            h.update(json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
            h.update(b"\n")
        return h.hexdigest()

    def _canonical_records(self) -> Iterator[Any]:
        yield {"as_of": _utc(self.as_of), "source_tree": None if self.source_tree is None else self.source_tree.as_posix()}
        for m in self.memories:
            yield {"memory": {**memory_to_json(m), "created_at": _utc(m.created_at)}}
        for q in self.queries:
            yield {"query": {**query_to_json(q), "as_of": _utc(q.as_of)}}
        for qid in sorted(self.qrels):
            for mid in sorted(self.qrels[qid]):
                yield {"qrel": [qid, mid, self.qrels[qid][mid]]}
        for n in self.graph_nodes:
            yield {"node": node_to_json(n)}
        for e in self.graph_edges:
            yield {"edge": edge_to_json(e)}
        for c in self.changes:
            yield {"change": {**change_to_json(c), "date": _utc(c.date)}}
        if self.source_tree is not None and self.root is not None:
            tree = self.root / self.source_tree
            for p in sorted(tree.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:  # bytecode caches are not content
                    yield {"file": [p.relative_to(tree).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest()]}


# --------------------------------------------------------------------------- serialisation


def memory_to_json(m: Memory) -> dict[str, Any]:
    """The ``memories.jsonl`` object of a memory; optional fields are omitted when empty."""
    out: dict[str, Any] = {"id": m.id, "text": m.text, "kind": m.kind,
                           "created_at": None if m.created_at is None else format_iso(m.created_at)}
    if m.confidence is not None:
        out["confidence"] = m.confidence
    out["namespace"] = m.namespace
    if m.tags:
        out["tags"] = list(m.tags)
    if m.anchors:
        out["anchors"] = [_anchor_to_json(a) for a in m.anchors]
    if m.supersedes:
        out["supersedes"] = list(m.supersedes)
    meta = dict(m.metadata)
    entities = meta.pop("entities", ())
    if entities:
        out["entities"] = list(entities)
    if meta:
        out["metadata"] = meta
    return out


def _anchor_to_json(a: Anchor) -> dict[str, Any]:
    out: dict[str, Any] = {"path": a.path, "sha256": a.sha256}
    if a.lines is not None:
        out["lines"] = list(a.lines)
    return out


def query_to_json(q: Query) -> dict[str, Any]:
    out: dict[str, Any] = {"id": q.id, "text": q.text, "task_type": q.task_type, "category": q.category,
                           "split": q.split}
    if q.as_of is not None:
        out["as_of"] = format_iso(q.as_of)
    if q.scope is not None:
        out["scope"] = q.scope
    if q.notes:
        out["notes"] = q.notes
    if q.metadata:
        out["metadata"] = dict(q.metadata)
    return out


def node_to_json(n: GraphNode) -> dict[str, Any]:
    return {"id": n.id, "label": n.label, "type": n.type, "aliases": list(n.aliases), "status": n.status,
            "summary": n.summary}


def edge_to_json(e: GraphEdge) -> dict[str, Any]:
    return {"source": e.source, "target": e.target, "type": e.type, "status": e.status}


def change_to_json(c: Change) -> dict[str, Any]:
    return {"namespace": c.namespace, "path": c.path, "change": c.change, "date": format_iso(c.date)}


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
    (out / MEMORIES).write_text(_jsonl(memory_to_json(m) for m in ds.memories), encoding="utf-8")
    (out / QUERIES).write_text(_jsonl(query_to_json(q) for q in ds.queries), encoding="utf-8")
    with open(out / QRELS, "w", encoding="utf-8") as f:
        for qid, judged in ds.qrels.items():
            for mid, rel in judged.items():
                f.write(f"{qid} 0 {mid} {rel}\n")
    if ds.graph_nodes or ds.graph_edges:
        (out / "graph").mkdir()
        (out / NODES).write_text(_jsonl(node_to_json(n) for n in ds.graph_nodes), encoding="utf-8")
        (out / EDGES).write_text(_jsonl(edge_to_json(e) for e in ds.graph_edges), encoding="utf-8")


# --------------------------------------------------------------------------- validation helpers

_MISSING = object()


class _Issues:
    """Collects defects; a record with any defect is dropped, so nothing half-valid is kept."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[Issue] = []  # file names relative to root until raised

    def add(self, file: str, line: int | None, fld: str, message: str) -> None:
        self.items.append(Issue(file, line, fld, message))

    def raise_if_any(self) -> None:
        if self.items:
            # report in reading order (file, then line) so the first error is the earliest defect
            rank = {name: i for i, name in enumerate(_FILE_ORDER)}
            ordered = sorted(self.items, key=lambda i: (rank.get(i.file, len(rank)), i.line or 0))
            raise DatasetError.from_issues(
                [dataclasses.replace(i, file=str(self.root / i.file)) for i in ordered])


class _Obj:
    """Typed access to one JSON object's fields, reporting defects against ``file:line``."""

    def __init__(self, obj: dict, file: str, line: int | None, issues: _Issues) -> None:
        self.obj, self.file, self.line, self.issues = obj, file, line, issues
        self.ok = True

    def bad(self, fld: str, message: str) -> None:
        self.ok = False
        self.issues.add(self.file, self.line, fld, message)

    def only(self, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for key in self.obj:
            if key not in allowed:
                self.bad(key, f"unknown field (allowed: {', '.join(allowed)})")

    def str(self, key: str, *, required: bool = True, nullable: bool = False, empty: bool = False) -> Any:
        v = self.obj.get(key, _MISSING)
        if v is _MISSING or (v is None and nullable):
            if v is _MISSING and required:
                self.bad(key, "missing required field")
            return None
        if not isinstance(v, str):
            self.bad(key, f"expected a string, got {_typename(v)}")
            return None
        if not v.strip() and not empty:
            self.bad(key, "must not be empty")
            return None
        return v

    def choice(self, key: str, choices: tuple[str, ...], *, required: bool = True, nullable: bool = False,
               default: str | None = None) -> str | None:
        v = self.str(key, required=required, nullable=nullable)
        if v is None:
            return default
        if v not in choices:
            self.bad(key, f"unknown value {v!r} (expected one of: {', '.join(choices)})")
            return None
        return v

    def str_list(self, key: str) -> tuple[str, ...]:
        v = self.obj.get(key, _MISSING)
        if v is _MISSING or v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            self.bad(key, "expected a list of non-empty strings")
            return ()
        return tuple(v)

    def date(self, key: str, *, required: bool = True, nullable: bool = False) -> datetime | None:
        v = self.obj.get(key, _MISSING)
        if v is _MISSING or (v is None and nullable):
            if v is _MISSING and required:
                self.bad(key, "missing required field")
            return None
        try:
            return parse_iso(v)
        except ValueError as exc:
            self.bad(key, str(exc))
            return None


def _typename(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(v), type(v).__name__)


def _bad_rel_path(p: str) -> str | None:
    """Why an anchor/tree path is unacceptable (absolute, escapes with ``..``), or None."""
    if p.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", p) or PurePosixPath(p).is_absolute():
        return f"path must be relative, got {p!r}"
    if ".." in re.split(r"[\\/]", p):
        return f"path must not contain '..': {p!r}"
    return None


def _read_jsonl(path: Path, rel: str, issues: _Issues) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_no, object)`` for each non-blank line; malformed lines are reported and skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        issues.add(rel, None, "file", f"not UTF-8: {exc}")
        return
    for no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            issues.add(rel, no, "json", f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            issues.add(rel, no, "json", f"expected a JSON object, got {_typename(obj)}")
            continue
        yield no, obj


# --------------------------------------------------------------------------- loading


def load_dataset(path: str | os.PathLike, *, public: bool | None = None) -> Dataset:
    """Load and validate a dataset folder; raise :class:`DatasetError` listing every defect.

    ``public`` relaxes the authored rules for exported public benchmarks (``created_at`` may be null,
    any non-empty category, no split); None reads ``public = true|false`` from ``dataset.toml``.
    """
    root = Path(path).resolve()
    issues = _Issues(root)
    if not (root / DATASET_TOML).is_file():
        raise DatasetError(root / DATASET_TOML, None, "file", "missing: a dataset folder needs dataset.toml")
    header = _load_toml(root, issues, public)
    public = bool(header.get("public"))
    for name in (MEMORIES, QUERIES, QRELS):
        if not (root / name).is_file():
            issues.add(name, None, "file", "missing required file")
    issues.raise_if_any()

    memories, mem_lines, entities = _load_memories(root, issues, public)
    nodes, edges = _load_graph(root, issues)
    node_ids = {n.id for n in nodes}
    for m in memories:
        line = mem_lines[m.id]
        for sid in m.supersedes:
            if sid == m.id:
                issues.add(MEMORIES, line, "supersedes", "a memory cannot supersede itself")
            elif sid not in mem_lines:
                issues.add(MEMORIES, line, "supersedes", f"unknown memory id {sid!r}")
        for eid in entities.get(m.id, ()):
            if eid not in node_ids:
                issues.add(MEMORIES, line, "entities", f"unknown graph node id {eid!r}")
    namespaces = {m.namespace for m in memories}
    for c in header.get("changes", ()):
        if c.namespace not in namespaces:
            issues.add(DATASET_TOML, header["change_lines"].get(id(c)), "changes.namespace",
                       f"namespace {c.namespace!r} has no memories")

    queries, query_lines = _load_queries(root, issues, public, namespaces)
    # ids whose own line is defective are already reported: judgements naming them are not re-reported
    reported = (set(mem_lines) - {m.id for m in memories}) | (set(query_lines) - {q.id for q in queries})
    before = len(issues.items)
    qrels_skipped: set[str] = set()
    qrels = _load_qrels(root, issues, queries, {m.id: m for m in memories}, reported, qrels_skipped)
    if len(issues.items) > before:
        issues.raise_if_any()  # a broken qrels line may be the missing judgement: don't guess
    for q in queries:
        if q.id in qrels_skipped:
            continue  # its judgement named a defective memory, already reported
        if not any(r >= 1 for r in qrels.get(q.id, {}).values()):
            issues.add(QUERIES, query_lines[q.id], "id", f"query {q.id!r} has no memory judged relevant (>= 1) in {QRELS}")
    issues.raise_if_any()

    return Dataset(
        name=header["name"], version=header["version"], as_of=header["as_of"], licence=header["licence"],
        description=header["description"], memories=tuple(memories), queries=tuple(queries), qrels=qrels,
        graph_nodes=tuple(nodes), graph_edges=tuple(edges), source_tree=header.get("source_tree"),
        changes=tuple(header.get("changes", ())), root=root,
        stats={"memories": len(memories), "queries": len(queries), "namespaces": len(namespaces),
               "qrels": sum(len(j) for j in qrels.values())},
    )


def _toml_key_line(text: str, key: str, table: str | None = None, index: int = 0) -> int | None:
    """1-based line of ``key = ...`` at top level or inside the ``index``-th ``[table]``/``[[table]]``."""
    lines = text.splitlines()
    start, seen = 0, -1
    if table is not None:
        for i, raw in enumerate(lines):
            if re.match(rf"^\s*\[\[?\s*{re.escape(table)}\s*\]\]?\s*(#.*)?$", raw):
                seen += 1
                if seen == index:
                    start = i + 1
                    break
        else:
            return None
    for i in range(start, len(lines)):
        raw = lines[i]
        if re.match(r"^\s*\[", raw):
            return start if table is not None else None  # the table header line when the key is absent
        if re.match(rf"^\s*{re.escape(key)}\s*=", raw):
            return i + 1
    return start if table is not None else None


def _load_toml(root: Path, issues: _Issues, public: bool | None) -> dict[str, Any]:
    f = DATASET_TOML
    text = (root / f).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise DatasetError(root / f, int(m.group(1)) if m else None, "toml", f"invalid TOML: {exc}") from None
    out: dict[str, Any] = {}
    allowed = ("name", "version", "as_of", "licence", "description", "public", "source_tree", "changes")
    for key in data:
        if key not in allowed:
            issues.add(f, _toml_key_line(text, key), key, f"unknown key (allowed: {', '.join(allowed)})")
    for key in ("name", "version", "licence", "description"):
        v = data.get(key, _MISSING)
        if v is _MISSING:
            issues.add(f, None, key, "missing required key")
        elif not isinstance(v, str) or (key in ("name", "version") and not v.strip()):
            issues.add(f, _toml_key_line(text, key), key, "expected a non-empty string" if key in ("name", "version") else "expected a string")
        else:
            out[key] = v
    if "as_of" not in data:
        issues.add(f, None, "as_of", "missing required key")
    else:
        try:
            out["as_of"] = parse_iso(data["as_of"])
        except ValueError as exc:
            issues.add(f, _toml_key_line(text, "as_of"), "as_of", str(exc))
    pub = data.get("public", False)
    if not isinstance(pub, bool):
        issues.add(f, _toml_key_line(text, "public"), "public", "expected true or false")
        pub = False
    out["public"] = pub if public is None else public

    tree = data.get("source_tree")
    if tree is not None:
        line = _toml_key_line(text, "root", "source_tree")
        rootv = tree.get("root") if isinstance(tree, dict) else None
        if not isinstance(tree, dict) or set(tree) - {"root"}:
            issues.add(f, line, "source_tree", "expected a table with the single key 'root'")
        elif not isinstance(rootv, str) or not rootv.strip():
            issues.add(f, line, "source_tree.root", "expected a non-empty string")
        elif (why := _bad_rel_path(rootv)) is not None:
            issues.add(f, line, "source_tree.root", why)
        elif not (root / rootv).is_dir():
            issues.add(f, line, "source_tree.root", f"folder {rootv!r} does not exist inside the dataset")
        else:
            out["source_tree"] = Path(rootv)

    changes_raw = data.get("changes", [])
    changes: list[Change] = []
    out["change_lines"] = {}
    if not isinstance(changes_raw, list):
        issues.add(f, _toml_key_line(text, "changes"), "changes", "expected [[changes]] tables")
        changes_raw = []
    for i, c in enumerate(changes_raw):
        def line(key: str, i: int = i) -> int | None:
            return _toml_key_line(text, key, "changes", i)
        if not isinstance(c, dict):
            issues.add(f, line("namespace"), f"changes[{i}]", "expected a table")
            continue
        o = _Obj(c, f, None, issues)
        for key in c:
            if key not in ("namespace", "path", "change", "date"):
                issues.add(f, line(key), f"changes[{i}].{key}", "unknown key (allowed: namespace, path, change, date)")
                o.ok = False
        vals: dict[str, Any] = {}
        for key in ("namespace", "path", "change", "date"):
            v = c.get(key, _MISSING)
            if v is _MISSING:
                issues.add(f, line(key), f"changes[{i}].{key}", "missing required key")
                continue
            if key == "date":
                try:
                    vals[key] = parse_iso(v)
                except ValueError as exc:
                    issues.add(f, line(key), f"changes[{i}].date", str(exc))
                continue
            if not isinstance(v, str) or not v.strip():
                issues.add(f, line(key), f"changes[{i}].{key}", "expected a non-empty string")
            elif key == "path" and (why := _bad_rel_path(v)):
                issues.add(f, line(key), f"changes[{i}].path", why)
            elif key == "change" and v not in CHANGE_KINDS:
                issues.add(f, line(key), f"changes[{i}].change", f"unknown value {v!r} (expected modified or deleted)")
            else:
                vals[key] = v
        if o.ok and len(vals) == 4:
            ch = Change(**vals)
            changes.append(ch)
            out["change_lines"][id(ch)] = line("namespace")
    out["changes"] = tuple(changes)
    return out


_MEMORY_FIELDS = ("id", "text", "kind", "created_at", "confidence", "namespace", "tags", "anchors",
                  "supersedes", "entities", "metadata")


def _load_memories(root: Path, issues: _Issues, public: bool
                   ) -> tuple[list[Memory], dict[str, int], dict[str, tuple[str, ...]]]:
    memories: list[Memory] = []
    lines: dict[str, int] = {}
    entities: dict[str, tuple[str, ...]] = {}
    for no, obj in _read_jsonl(root / MEMORIES, MEMORIES, issues):
        o = _Obj(obj, MEMORIES, no, issues)
        o.only(_MEMORY_FIELDS)
        mid = o.str("id")
        if mid is not None and mid in lines:
            o.bad("id", f"duplicate memory id {mid!r} (first on line {lines[mid]})")
        text = o.str("text")
        kind = o.choice("kind", MEMORY_KINDS)
        created = o.date("created_at", nullable=public)
        conf = obj.get("confidence")
        if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float))):
            o.bad("confidence", f"expected a number in [0, 1], got {_typename(conf)}")
        elif conf is not None and not 0.0 <= conf <= 1.0:
            o.bad("confidence", f"must be within [0, 1], got {conf}")
        ns = o.str("namespace")
        tags = o.str_list("tags")
        anchors = _parse_anchors(o)
        supersedes = o.str_list("supersedes")
        ents = o.str_list("entities")
        meta = obj.get("metadata", {})
        if not isinstance(meta, dict):
            o.bad("metadata", "expected a JSON object")
        elif "entities" in meta:
            o.bad("metadata", "'entities' is a top-level field, not metadata")
        if not o.ok:
            if mid is not None and mid not in lines:
                lines[mid] = no  # known id: later references to it are not reported as unknown
            continue
        lines[mid] = no
        metadata = dict(meta)
        if ents:
            metadata["entities"] = ents
            entities[mid] = ents
        memories.append(Memory(id=mid, text=text, kind=kind, created_at=created,
                               confidence=None if conf is None else float(conf), namespace=ns, tags=tags,
                               anchors=anchors, supersedes=supersedes, metadata=metadata))
    return memories, lines, entities


def _parse_anchors(o: _Obj) -> tuple[Anchor, ...]:
    raw = o.obj.get("anchors")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        o.bad("anchors", "expected a list of {path, sha256, lines?} objects")
        return ()
    out: list[Anchor] = []
    for i, a in enumerate(raw):
        fld = f"anchors[{i}]"
        if not isinstance(a, dict):
            o.bad(fld, "expected an object {path, sha256, lines?}")
            continue
        for key in a:
            if key not in ("path", "sha256", "lines"):
                o.bad(f"{fld}.{key}", "unknown field (allowed: path, sha256, lines)")
        path, sha, lines = a.get("path"), a.get("sha256"), a.get("lines")
        if path is None:
            o.bad(f"{fld}.path", "missing required field")
        elif not isinstance(path, str) or not path.strip():
            o.bad(f"{fld}.path", "expected a non-empty string")
        elif (why := _bad_rel_path(path)) is not None:
            o.bad(f"{fld}.path", why)
        if sha is None:
            o.bad(f"{fld}.sha256", "missing required field")
        elif not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            o.bad(f"{fld}.sha256", f"expected 64 hex digits, got {sha!r}")
        span: tuple[int, int] | None = None
        if lines is not None:
            if (not isinstance(lines, list) or len(lines) != 2
                    or not all(isinstance(x, int) and not isinstance(x, bool) for x in lines)
                    or not 1 <= lines[0] <= lines[1]):
                o.bad(f"{fld}.lines", f"expected [start, end] with 1 <= start <= end, got {lines!r}")
            else:
                span = (lines[0], lines[1])
        if o.ok:
            out.append(Anchor(path=path, sha256=sha, lines=span))
    return tuple(out)


_QUERY_FIELDS = ("id", "text", "task_type", "category", "split", "as_of", "scope", "notes", "metadata")


def _load_queries(root: Path, issues: _Issues, public: bool, namespaces: set[str]
                  ) -> tuple[list[Query], dict[str, int]]:
    queries: list[Query] = []
    lines: dict[str, int] = {}
    for no, obj in _read_jsonl(root / QUERIES, QUERIES, issues):
        o = _Obj(obj, QUERIES, no, issues)
        o.only(_QUERY_FIELDS)
        qid = o.str("id")
        if qid is not None and qid in lines:
            o.bad("id", f"duplicate query id {qid!r} (first on line {lines[qid]})")
        text = o.str("text")
        task = o.choice("task_type", TASK_TYPES, required=not public, default="general")
        if public:
            category = o.str("category", required=False) or "uncategorized"
            split = o.choice("split", SPLITS, required=False, nullable=True)
        else:
            category = o.choice("category", QUERY_CATEGORIES)
            split = o.choice("split", SPLITS)
        as_of = o.date("as_of", required=False, nullable=True)
        scope = o.str("scope", required=False, nullable=True)
        if scope is not None and scope not in namespaces:
            o.bad("scope", f"namespace {scope!r} has no memories")
        notes = o.str("notes", required=False, nullable=True, empty=True) or ""
        meta = obj.get("metadata", {})
        if not isinstance(meta, dict):
            o.bad("metadata", "expected a JSON object")
        if qid is not None and qid not in lines:
            lines[qid] = no
        if o.ok:
            queries.append(Query(id=qid, text=text, task_type=task, category=category, split=split, as_of=as_of,
                                 scope=scope, notes=notes, metadata=dict(meta)))
    return queries, lines


def _load_qrels(root: Path, issues: _Issues, queries: list[Query], memories: dict[str, Memory],
                reported: set[str], skipped: set[str]) -> dict[str, dict[str, int]]:
    f = QRELS
    scope = {q.id: q.scope for q in queries}
    qrels: dict[str, dict[str, int]] = {}
    seen: dict[tuple[str, str], int] = {}
    for no, raw in enumerate((root / f).read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        cols = raw.split()
        if len(cols) != 4:
            issues.add(f, no, "columns", f"expected 4 columns 'query_id 0 memory_id relevance', got {len(cols)}")
            continue
        qid, _, mid, rel_text = cols
        if qid in reported or mid in reported:
            skipped.add(qid)
            continue
        ok = True
        if not re.fullmatch(r"[+-]?\d+", rel_text):
            issues.add(f, no, "relevance", f"expected an integer 0-{MAX_RELEVANCE}, got {rel_text!r}")
            ok = False
        elif not 0 <= int(rel_text) <= MAX_RELEVANCE:
            issues.add(f, no, "relevance", f"must be within 0-{MAX_RELEVANCE}, got {rel_text}")
            ok = False
        if qid not in scope:
            issues.add(f, no, "query_id", f"unknown query id {qid!r}")
            ok = False
        if mid not in memories:
            issues.add(f, no, "memory_id", f"unknown memory id {mid!r}")
            ok = False
        elif qid in scope and scope[qid] is not None and memories[mid].namespace != scope[qid]:
            issues.add(f, no, "memory_id", f"memory {mid!r} is in namespace {memories[mid].namespace!r}, "
                                           f"outside the query's scope {scope[qid]!r}")
            ok = False
        if (qid, mid) in seen:
            issues.add(f, no, "memory_id", f"duplicate judgement of ({qid}, {mid}) (first on line {seen[qid, mid]})")
            ok = False
        seen.setdefault((qid, mid), no)
        if ok:
            qrels.setdefault(qid, {})[mid] = int(rel_text)
    return qrels


def _load_graph(root: Path, issues: _Issues) -> tuple[list[GraphNode], list[GraphEdge]]:
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    node_lines: dict[str, int] = {}
    if (root / NODES).is_file():
        for no, obj in _read_jsonl(root / NODES, NODES, issues):
            o = _Obj(obj, NODES, no, issues)
            o.only(("id", "label", "type", "aliases", "status", "summary"))
            nid = o.str("id")
            if nid is not None and nid in node_lines:
                o.bad("id", f"duplicate node id {nid!r} (first on line {node_lines[nid]})")
            label = o.str("label")
            ntype = o.str("type", required=False) or "concept"
            aliases = o.str_list("aliases")
            status = o.choice("status", GRAPH_STATUSES, required=False, default="active")
            summary = o.str("summary", required=False, empty=True) or ""
            if nid is not None and nid not in node_lines:
                node_lines[nid] = no
            if o.ok:
                nodes.append(GraphNode(id=nid, label=label, type=ntype, aliases=aliases, status=status, summary=summary))
    if (root / EDGES).is_file():
        for no, obj in _read_jsonl(root / EDGES, EDGES, issues):
            o = _Obj(obj, EDGES, no, issues)
            o.only(("source", "target", "type", "status"))
            src, dst = o.str("source"), o.str("target")
            for key, v in (("source", src), ("target", dst)):
                if v is not None and v not in node_lines:
                    o.bad(key, f"unknown graph node id {v!r}")
            etype = o.str("type")
            status = o.choice("status", GRAPH_STATUSES, required=False, default="active")
            if o.ok:
                edges.append(GraphEdge(source=src, target=dst, type=etype, status=status))
    return nodes, edges


def read_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON file; a syntax error or truncation raises DatasetError with its line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(p, None, "file", "no such file") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(p, None, "file", f"not UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(p, exc.lineno, "json", f"invalid JSON: {exc.msg} (column {exc.colno})") from None


def bundled_datasets() -> dict[str, Path]:
    """Every folder under ``datasets/`` holding a ``dataset.toml``, keyed by its path relative to ``datasets/``."""
    base = Path(__file__).resolve().parent
    found: dict[str, Path] = {}
    for toml in sorted(base.rglob(DATASET_TOML)):
        rel = toml.parent.relative_to(base)
        if any(part.startswith((".", "__")) for part in rel.parts) or rel == Path("."):
            continue
        found[rel.as_posix()] = toml.parent
    return found
