"""An upstream (TypeScript) MemoFS store made a memofs store: ``memofs import [--dry-run]``.

What upstream keeps where (upstream-facts.md section 10) and what becomes of it:

* ``memory/notes.md`` (every memory, in ``formatTimestampedNote`` entries): **imported**.
  Each note becomes one ``memories.jsonl`` line: id (``metadata.id``; a note written by
  upstream's CLI has none and gets the id upstream's ``writeMemory`` gives a note written
  at that instant: ``mem_`` + 64-bit FNV-1a of ``<timestamp>:<content>`` (facts section 10
  step 3; :func:`upstream_id`), so both tools name it alike and a second import finds it
  again), kind, the heading timestamp as ``created_at``, confidence, tags, and upstream's
  fields (title, source, writer, ``sourceRefs``, the rest of the note metadata as
  ``metadata``) kept verbatim. A ``file`` sourceRef naming a regular file of the project
  becomes an anchor (hashed at import: drift is measured from then on). The graph nodes
  the note names (label or alias, as recall tokens) are its ``entities``, so upstream's
  ``supersedes`` edges, which join node ids, reach the memories
  (:meth:`memofs.ranking.recall.Recaller.superseded_by`).
  notes.md itself is left as it is.
* ``indexes/embeddings.jsonl`` (upstream ``FsRecallStore`` lines ``{id, text, embedding,
  metadata, namespace, updatedAt}``, keyed by chunk id): **converted** when the embedder
  matches. ``recall.embeddingModel`` (default ``Xenova/all-MiniLM-L6-v2``: the same
  weights, mean pooling and unit length as our local MiniLM) must name a model in
  :data:`SAME_MODEL` and the vector must have its dimension; a line whose text is a whole
  memory's text becomes that memory's line in our format. A vector of upstream's index
  text (``(title ?? first 80 characters) + "\n" + content``) is of another string, so it is
  named and not reused. Other lines (a chunk of
  a long note, core.md, another model) are reported and re-embedded by the next recall.
* ``config.json`` ``recall`` keys: read as they are by every recall
  (:func:`split_recall_config`): ``engine`` is mapped (``lexical`` -> ``use_vector``
  false, ``vector`` -> ``use_bm25`` and ``use_fuzzy`` false, ``hybrid``/``auto`` -> the
  defaults); ``localEmbeddings`` and ``embeddingModel`` choose upstream's embedder, which
  memofs chooses with ``MEMOFS_EMBEDDER``: each is reported in one line naming the file
  and key. The import moves them under ``recall.upstream`` (kept, no longer reported).
* ``graph/nodes.jsonl`` and ``graph/edges.jsonl``: read as they are
  (:meth:`memofs.graph.entity_graph.EntityGraph.load` takes ``from``/``to``, confidence,
  importance, and keeps upstream's other fields); the import adds the rule-based facts of
  imported notes upstream never extracted (its transient notes).
* ``manifest.json``: our paths are added beside upstream's.

Why an import rather than reading notes.md on every load: memofs's durable record is
``memories.jsonl`` (append-only, one implementation of loading, rehydration, the live
view and repair). Reading a second record would split every one of those in two; and
upstream's vectors are keyed by chunk, not memory, so they need converting once anyway.
Files that mean the same in both layouts (graph, config) are read as they are.

Lossless: every upstream file the import or a later memofs write touches (manifest,
config, embeddings, the event log, graph nodes and edges) is first copied byte for byte
under ``.memofs/upstream/`` (a later import never overwrites a copy); what memofs writes
into upstream's files is in upstream's dialect (graph edges with ``from``/``to``). The
dry run computes the same plan and writes nothing; a second import finds nothing to do.
Malformed input stops the import before anything is written, with one line naming file,
line and field.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from datetime import timezone
from pathlib import Path
from typing import Any

import numpy as np

from memofs.files import safe_json, secrets
from memofs.files.atomic import atomic_write_text
from memofs.files.jsonl import append_line, repair_tail
from memofs.files.notes_md import Note, parse_notes
from memofs.files.records import MEMORY_KINDS, Anchor, InvalidInputError, Memory, memory_extras
from memofs.files.timestamps import parse_iso
from memofs.graph.entity_graph import EDGES_FILE, NODES_FILE, EntityGraph
from memofs.signals.anchors import AnchorPathError
from memofs.signals.phrase_scan import fnv1a64
from memofs.signals.embedders.local import DEFAULT_NAME as MINILM
from memofs.signals.embeddings_file import EmbeddingRecord, EmbeddingsFile, text_sha256
from memofs.store.config_file import EMBEDDER_KEYS, ConfigFileError, split_recall_config
from memofs.store.project import (MAX_TEXT_CHARS, Store, StoreError, memory_to_json,
                                  normalize_tags, read_jsonl, sha256_hex16)
from memofs.text.index_text import upstream_index_text
from memofs.text.tokenize import tokenize

UPSTREAM_DEFAULT_MODEL = "Xenova/all-MiniLM-L6-v2"
SAME_MODEL: dict[str, tuple[str, int]] = {UPSTREAM_DEFAULT_MODEL: (MINILM, 384)}
"""Upstream ``recall.embeddingModel`` -> (our embedder name, dimension) of the same model."""
BACKUP_DIR = "upstream"
NOTES_FILE = Path("memory") / "notes.md"
_NOTE_META_KEPT_OUT = ("id", "sourceRefs")
FILE_REF = "file"
"""The sourceRef ``sourceType`` that names a project file (an anchor once imported)."""


def upstream_id(timestamp: str, content: str) -> str:
    """Upstream ``writeMemory``'s id for a note written at ``timestamp`` (facts section 10
    step 3: ``"mem_" + fingerprint("<nowISO>:<content>")``, fingerprint = 64-bit FNV-1a)."""
    return "mem_" + fnv1a64(f"{timestamp}:{content}")


def _legacy_id(timestamp: str, content: str) -> str:
    """The id imports before issue 37 gave a note without one (SHA-256 based): a note
    imported under it is already imported."""
    return "mem_" + sha256_hex16(f"{timestamp}:{content}")

# ---------------------------------------------------------------------- the plan
@dataclass
class ImportPlan:
    """What an import does (the dry run prints it; :func:`apply_import` carries it out)."""

    memories: list[Memory] = field(default_factory=list)
    already: int = 0
    embeddings: list[EmbeddingRecord] = field(default_factory=list)
    embeddings_kept: list[str] = field(default_factory=list)  # our own lines, verbatim
    embeddings_not_reused: list[str] = field(default_factory=list)
    embeddings_rewrite: bool = False
    config: dict[str, Any] | None = None  # the rewritten config.json, when it changes
    manifest: dict[str, Any] | None = None  # the rewritten manifest.json, when it changes
    graph: tuple[int, int] = (0, 0)
    warnings: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.memories or self.embeddings_rewrite or self.config is not None or self.manifest is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "memories": [m.id for m in self.memories], "already_imported": self.already,
            "embeddings_reused": len(self.embeddings), "embeddings_not_reused": self.embeddings_not_reused,
            "config_rewritten": self.config is not None, "manifest_rewritten": self.manifest is not None,
            "graph": {"nodes": self.graph[0], "edges": self.graph[1]}, "warnings": self.warnings,
            "changes": self.changes,
        }


def note_to_memory(note: Note, where: str) -> Memory:
    """One notes.md entry as a memory (see the module docstring); errors name ``where``
    (file:line) and the field."""
    at = f"{where}:{note.line}"
    if note.kind not in MEMORY_KINDS:
        raise StoreError(f"{at}: field 'kind' must be one of {', '.join(MEMORY_KINDS)}; got {note.kind!r}")
    try:
        created = parse_iso(note.timestamp)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{at}: heading timestamp {note.timestamp!r} is not an ISO timestamp with timezone ({exc})") from None
    if len(note.content) > MAX_TEXT_CHARS:
        raise StoreError(f"{at}: note has {len(note.content)} characters; the limit is {MAX_TEXT_CHARS}")
    meta = dict(note.metadata)
    mem_id = meta.get("id")
    if mem_id is not None and (not isinstance(mem_id, str) or not mem_id.strip()):
        raise StoreError(f"{at}: field 'metadata.id' must be a non-empty string")
    mem_id = mem_id or upstream_id(note.timestamp, note.content)
    user = {k: v for k, v in meta.items() if k not in _NOTE_META_KEPT_OUT}
    try:
        tags = normalize_tags(note.tags)
        extras = memory_extras(title=note.title, source=note.source, writer=note.writer,
                               source_refs=meta.get("sourceRefs"), metadata=user or None)
        secrets.check(note.content, note.title or "", *tags)  # what upstream's gate scans, plus tags
    except InvalidInputError as exc:
        raise StoreError(f"{at}: {exc}") from None
    return Memory(id=mem_id, text=note.content, kind=note.kind, created_at=created.astimezone(timezone.utc), confidence=note.confidence,
                  tags=tags, metadata=extras)


def read_notes(store: Store) -> list[Memory]:
    """The memories of the store's upstream ``memory/notes.md`` (none when it is absent);
    a repeated id: the later entry wins, as in memories.jsonl."""
    return [m for m, _ in _read_note_entries(store)]


def _read_note_entries(store: Store) -> list[tuple[Memory, str]]:
    """(memory, the id an import before issue 37 gave it) for each notes.md entry; the old
    id is the memory's own when the note carries one."""
    path = store.paths.dir / NOTES_FILE
    try:
        text = safe_json.read_text(path)
    except FileNotFoundError:
        return []
    except safe_json.JSONFileError as exc:
        raise StoreError(str(exc)) from None
    try:
        notes = parse_notes(text, str(path))
    except InvalidInputError as exc:
        raise StoreError(str(exc)) from None
    by_id: dict[str, tuple[Memory, str]] = {}
    for note in notes:
        m = note_to_memory(note, str(path))
        old = m.id if note.metadata.get("id") else _legacy_id(note.timestamp, note.content)
        by_id.pop(m.id, None)
        by_id[m.id] = (m, old)
    return list(by_id.values())


def _not_imported(store: Store, known: set[str]) -> tuple[list[Memory], int]:
    """The notes whose memory is in neither ``known`` id (today's nor the pre-issue-37 one),
    and how many are."""
    entries = _read_note_entries(store)
    todo = [m for m, old in entries if m.id not in known and old not in known]
    return todo, len(entries) - len(todo)


def pending_notes(store: Store, known: set[str]) -> int:
    """How many notes of an upstream notes.md are not in ``known`` (memory ids): the hint
    that ``memofs import`` has not run. 0 when there is no notes.md or it cannot be read."""
    try:
        return len(_not_imported(store, known)[0])
    except StoreError:
        return 0


def _named_nodes(graph: EntityGraph, text: str) -> list[str]:
    """Ids of the graph's nodes whose label or an alias ``text`` names: the candidate's
    recall tokens appear in ``text``'s tokens, in order and adjacent ("Redis Streams")."""
    words = tokenize(text)
    out = []
    for n in graph.nodes:
        for name in (n.label, *n.aliases):
            toks = tokenize(name)
            if toks and any(words[i:i + len(toks)] == toks for i in range(len(words) - len(toks) + 1)):
                out.append(n.id)
                break
    return out


def _file_anchors(store: Store, refs: object) -> tuple[list[Anchor], list[str]]:
    """Anchors for the ``file`` sourceRefs naming a regular file of the project
    (``sourcePath``, else ``path``, else ``sourceId``), and the file paths that name none
    (they stay sourceRefs only)."""
    out: dict[str, Anchor] = {}
    missed: list[str] = []
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, dict) or ref.get("sourceType") != FILE_REF:
            continue
        rel = next((ref[k] for k in ("sourcePath", "path", "sourceId") if isinstance(ref.get(k), str) and ref[k]), None)
        if rel is None:
            continue
        try:
            a = store.anchor(rel)
        except AnchorPathError:  # outside the project, missing or not a file: nothing to watch
            missed.append(rel)
            continue
        out.setdefault(a.path, a)
    return list(out.values()), missed


def _linked(store: Store, graph: EntityGraph, m: Memory, warnings: list[str]) -> Memory:
    """``m`` with its file sourceRefs as anchors and the graph nodes it names as entities;
    a file sourceRef that names no project file is reported in ``warnings``."""
    anchors, missed = _file_anchors(store, m.metadata.get("sourceRefs"))
    warnings += [f"{m.id}: sourceRef file {rel!r} is not a file of the project: kept, not drift-checked"
                 for rel in missed]
    nodes = _named_nodes(graph, m.text)
    meta = {**m.metadata, "entities": nodes} if nodes else m.metadata
    return replace(m, anchors=tuple(anchors), metadata=meta)


def _upstream_embedding(obj: dict[str, Any], where: str) -> tuple[str, str, list[float]] | None:
    """(id, text, vector) of an upstream FsRecallStore line; None for one of ours. A line
    that is neither raises :class:`StoreError` naming the field (upstream skips such lines
    silently; an import must not lose them silently)."""
    if "embedder" in obj and "text_sha256" in obj:
        return None
    for name, kind in (("id", str), ("text", str), ("embedding", list)):
        if not isinstance(obj.get(name), kind):
            raise StoreError(f"{where}: field {name!r} is missing or not a {kind.__name__} "
                             "(neither a memofs nor an upstream MemoFS embeddings line)")
    vec = obj["embedding"]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vec):
        raise StoreError(f"{where}: field 'embedding' must be a list of numbers")
    if "metadata" in obj and not isinstance(obj["metadata"], dict):
        raise StoreError(f"{where}: field 'metadata' must be an object")
    return obj["id"], obj["text"], vec


def _index_text(m: Memory) -> str:
    """Upstream's BM25/extraction text of a note (:func:`~memofs.text.index_text.upstream_index_text`)."""
    return upstream_index_text(m.text, m.metadata.get("title"))


def _json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file is missing."""
    try:
        return safe_json.load_file(path, expect=dict)
    except FileNotFoundError:
        return None
    except safe_json.JSONFileError as exc:
        raise StoreError(str(exc)) from None


def plan_import(store: Store) -> ImportPlan:
    """Everything an import would do, computed without writing (the dry run)."""
    plan = ImportPlan()
    p = store.paths
    stored = store.load().memories
    known = {m.id for m in stored}
    notes = read_notes(store)
    plan.memories, plan.already = _not_imported(store, known)
    graph = store.load_graph()  # read as it is: a malformed graph line stops the import here
    plan.graph = (len(graph.nodes), len(graph.edges))
    plan.memories = [_linked(store, graph, m, plan.warnings) for m in plan.memories]

    # config.json: upstream's embedder keys moved under recall.upstream
    config = _json_object(p.config)
    model = UPSTREAM_DEFAULT_MODEL
    if config is not None:
        recall = config.get("recall", {})
        if not isinstance(recall, dict):
            raise StoreError(f"{p.config}: field 'recall' must be an object")
        try:
            split_recall_config(recall, str(p.config))  # a bad engine stops the import
        except ConfigFileError as exc:
            raise StoreError(str(exc)) from None
        upstream = recall.get("upstream", {})
        if not isinstance(upstream, dict):
            raise StoreError(f"{p.config}: field 'recall.upstream' must be an object")
        model = recall.get("embeddingModel", upstream.get("embeddingModel", model))
        if any(k in recall for k in EMBEDDER_KEYS):
            moved = {**upstream, **{k: recall[k] for k in EMBEDDER_KEYS if k in recall}}
            plan.config = {**config, "recall": {**{k: v for k, v in recall.items() if k not in EMBEDDER_KEYS},
                                                "upstream": moved}}

    # manifest.json: our paths beside upstream's
    manifest = _json_object(p.manifest)
    if manifest is not None:
        merged = dict(manifest)
        for section, paths in store._manifest_paths().items():
            got = merged.get(section)
            merged[section] = {**(got if isinstance(got, dict) else {}), **paths}
        merged.setdefault("projectId", "default")
        if merged != manifest:
            plan.manifest = merged

    # embeddings.jsonl: upstream lines converted when the model matches
    rows, warnings = read_jsonl(p.embeddings)
    plan.warnings += warnings
    by_text = {text_sha256(m.text): m for m in [*stored, *notes]}
    # a vector of upstream's index text ``(title ?? first 80 characters) + "\n" + content``
    # (facts section 2) is of another string than the one memofs embeds: named, not reused
    by_index_text = {text_sha256(_index_text(m)): m for m in [*stored, *notes]}
    target = SAME_MODEL.get(model) if isinstance(model, str) else None
    converted: dict[str, EmbeddingRecord] = {}
    raw_lines = safe_json.read_bytes(p.embeddings).split(b"\n") if p.embeddings.exists() else []
    for lineno, obj in rows:
        where = f"{p.embeddings}:{lineno}"
        up = _upstream_embedding(obj, where)
        if up is None:
            plan.embeddings_kept.append(raw_lines[lineno - 1].decode("utf-8").rstrip("\r"))
            continue
        plan.embeddings_rewrite = True
        line_id, text, vec = up
        digest = text_sha256(text.replace("\r\n", "\n").strip())
        mem = by_text.get(digest)
        if target is None:
            plan.embeddings_not_reused.append(f"{where}: {line_id}: model {model!r} is not one memofs runs")
        elif len(vec) != target[1]:
            plan.embeddings_not_reused.append(f"{where}: {line_id}: {len(vec)} dimensions, {model} has {target[1]}")
        elif mem is None and digest in by_index_text:
            plan.embeddings_not_reused.append(f"{where}: {line_id}: embeds title and text of {by_index_text[digest].id}; "
                                              "memofs embeds the text alone")
        elif mem is None:
            plan.embeddings_not_reused.append(f"{where}: {line_id}: its text is not a whole memory (a chunk or core.md)")
        else:
            converted[mem.id] = EmbeddingRecord(
                id=mem.id, vector=np.asarray(vec, dtype=np.float32), embedder=target[0],
                text_sha256=text_sha256(mem.text), namespace=mem.namespace, metadata={"kind": mem.kind})
    plan.embeddings = list(converted.values())
    return plan


def _backup(store: Store, path: Path) -> None:
    """Copy ``path`` byte for byte under ``.memofs/upstream/`` (first free name: an earlier
    import's copy is never overwritten)."""
    if not path.exists():
        return
    rel = path.relative_to(store.paths.dir)
    dest = store.paths.dir / BACKUP_DIR / rel
    n = 0
    while dest.exists():
        if dest.read_bytes() == path.read_bytes():
            return
        n += 1
        dest = store.paths.dir / BACKUP_DIR / rel.with_name(f"{rel.name}.{n}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, dest)


def apply_import(store: Store, plan: ImportPlan) -> None:
    """Carry out ``plan`` under the store lock: back up what is rewritten, append the
    memories (and the ``memory.created`` events upstream's log lacks), add missing graph
    facts, rewrite config, manifest and embeddings."""
    p = store.paths
    with store.lock():
        # upstream's files this import or a later memofs write appends to: copied first, so
        # the store upstream wrote can always be put back (manifest and config just below)
        for path in (p.events, p.graph / NODES_FILE, p.graph / EDGES_FILE, p.embeddings):
            _backup(store, path)
        for f in (p.memories, p.events):
            if not f.exists():
                f.parent.mkdir(parents=True, exist_ok=True)
                f.touch()
        for rewritten, path in ((plan.manifest, p.manifest), (plan.config, p.config)):
            if rewritten is not None:
                _backup(store, path)
                atomic_write_text(path, json.dumps(rewritten, indent=2, ensure_ascii=False) + "\n")
        if plan.memories:
            repair_tail(p.memories, p.tmp)
            repair_tail(p.events, p.tmp)
            # what upstream's event log and graph already hold for these notes is not repeated
            no_event, no_facts = store.missing_derived(plan.memories)
            unlogged = {m.id for m in no_event}
            for m in plan.memories:
                append_line(p.memories, memory_to_json(m))
                if m.id in unlogged:
                    append_line(p.events, store._created_event(m))
            store._extract_graph(m.text for m in no_facts)
        if plan.embeddings_rewrite:
            with EmbeddingsFile(p.embeddings).lock:  # the lock every vector writer takes
                _backup(store, p.embeddings)
                lines = [*plan.embeddings_kept, *(r.to_json() for r in plan.embeddings)]
                atomic_write_text(p.embeddings, "".join(line + "\n" for line in lines))
