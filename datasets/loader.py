"""``load_dataset``: read and validate a dataset folder, reporting every defect with its file,
line and field; ``bundled_datasets`` lists the folders shipped under ``datasets/``."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from memofs.files import memory_lines
from memofs.files.records import GRAPH_STATUSES, MEMORY_KINDS, Anchor, GraphEdge, GraphNode, InvalidInputError, Memory
from memofs.files.timestamps import parse_iso

from .dataset import (CHANGE_KINDS, DATASET_TOML, EDGES, FORMAT, MAX_RELEVANCE, MEMORIES, NODES, QRELS, QUERIES,
                      QUERY_CATEGORIES, SPLITS, TASK_TYPES, Change, Dataset, Query)
from .validation import _MISSING, DatasetError, _bad_rel_path, _Issues, _Obj, _read_jsonl, _typename

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


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

    memories, mem_lines, entities = _load_memories(root, issues, public, nested=header.get("format") == 1)
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
    allowed = ("name", "version", "as_of", "licence", "description", "format", "public", "source_tree", "changes")
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
        except (TypeError, ValueError) as exc:
            issues.add(f, _toml_key_line(text, "as_of"), "as_of", str(exc))
    fmt = data.get("format", 1)
    if fmt not in (1, FORMAT) or isinstance(fmt, bool):
        issues.add(f, _toml_key_line(text, "format"), "format", f"expected 1 or {FORMAT}, got {fmt!r}")
        fmt = FORMAT
    out["format"] = fmt
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
                except (TypeError, ValueError) as exc:
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


def _load_memories(root: Path, issues: _Issues, public: bool, nested: bool
                   ) -> tuple[list[Memory], dict[str, int], dict[str, tuple[str, ...]]]:
    """The memories of ``memories.jsonl``: the store's dialect, or with ``nested`` (format 1)
    the older one (:mod:`memofs.files.memory_lines`); every defect reported with its line."""
    memories: list[Memory] = []
    lines: dict[str, int] = {}
    entities: dict[str, tuple[str, ...]] = {}
    for no, obj in _read_jsonl(root / MEMORIES, MEMORIES, issues):
        o = _Obj(obj, MEMORIES, no, issues)
        if nested:
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
        if not nested:
            try:
                meta = memory_lines.line_metadata(obj, nested=False)
            except InvalidInputError as exc:
                o.bad("metadata", str(exc))
        elif not isinstance(meta, dict):
            o.bad("metadata", "expected a JSON object")
        elif "entities" in meta:
            o.bad("metadata", "'entities' is a top-level field, not metadata")
        if not o.ok:
            if mid is not None and mid not in lines:
                lines[mid] = no  # known id: later references to it are not reported as unknown
            continue
        lines[mid] = no
        metadata = {k: v for k, v in meta.items() if k != "entities"}
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
