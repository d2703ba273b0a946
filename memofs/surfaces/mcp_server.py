"""The MemoFS MCP server over stdio or Streamable HTTP (official ``mcp`` SDK, low-level
``Server``, mcp>=2).

Tools (facts section 11; the agent-session tools are not served):

* ``memofs.recall``  {query, limit, taskType, explain} -> {items: [{id, text, score, ...}]}
* ``memofs.context`` {query, taskType, maxBytes, limit, section, expand, detail,
  includeCore, includeNotes, includeRecent, includeGraph} -> briefing (an expand call
  happens when ``expand`` is given; ``section`` defaults to the cursor's; the rest:
  :class:`~memofs.store.briefing.ContextOptions`)
* ``memofs.remember`` {content, kind, confidence, tags, anchors, supersedes, title, source,
  sourceRefs, metadata} -> {id, created, memory, sourceRefs?} (upstream's fields kept and returned)
* ``memofs.consolidate`` {apply, now} -> {plan, retirementsApplied, applied}: retire what
  active ``supersedes`` graph edges make obsolete; ``apply`` defaults to false (a preview,
  allowed read-only)

Resources (:data:`RESOURCES`): ``memofs://memory/core``, ``memofs://memory/notes`` (the
memories in upstream's notes.md format), ``memofs://memory/recent`` (recent events),
``memofs://graph/nodes``, ``memofs://graph/edges``, ``memofs://health`` and
``memofs://context`` (the briefing for the query "current task"). Prompts
(:data:`PROMPTS`): ``memofs-recall-context`` and ``memofs-memory-review``.

Input handling follows upstream: strings are trimmed and an empty string counts as
absent; a missing required string gives ``<name> is required.``; unknown keys are
ignored. Tool failures come back as results with ``isError: true``, text
``"<CODE>: <message>"`` and ``structuredContent: {error: {name, message, code, status}}``.
Codes: ``MCP_VALIDATION_ERROR`` (400) only for what the caller sent
(:class:`~memofs.files.records.InvalidInputError`), ``MEMOFS_WRITE_BLOCKED`` (400, a secret),
``MCP_AUTHORIZATION_ERROR`` (403, read-only), ``MEMOFS_STORE_ERROR`` (500, a damaged or
unreadable store: the operator's to fix) and ``MEMOFS_INTERNAL_ERROR`` (500, a fault of
the server itself, e.g. a bad model file; the message says to run ``memofs doctor``).

The server keeps one :class:`~memofs.store.project.LiveStore` (reloaded when the files change,
so CLI writes are seen) and one in-process :class:`~memofs.store.cursor.ContextCache` with a
random per-process cursor secret. Calls run in a worker thread, one at a time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memofs.store.briefing import (DETAILS, EXPAND_BUDGET, MAX_BUDGET, MIN_BUDGET, ContextOptions, briefing_for,
                                   expand_context, result_dict)
from memofs.store.cursor import MAX_CURSOR_CHARS, SECTIONS, ContextCache
from memofs.text.lexicon import TASK_TYPES
from memofs.files.records import (MAX_SOURCE_CHARS, MAX_SOURCE_REFS, MAX_TITLE_CHARS, MEMORY_KINDS, InvalidInputError,
                                  upstream_note_metadata)
from memofs.files.notes_md import Note, format_notes
from memofs.store.consolidation import consolidate
from memofs.store.health import command_problems
from memofs.files.timestamps import iso, parse_iso
from memofs.store.project import MAX_QUERY_CHARS, MAX_TAGS, MAX_TEXT_CHARS, LiveStore, Store, memory_to_json, read_jsonl

log = logging.getLogger("memofs.mcp")

SERVER_NAME = "memofs-mcp"
SERVER_VERSION = "0.1.0"
MAX_LIMIT = 100

_TASK = {"type": "string", "enum": list(TASK_TYPES), "description": "Task type that biases the query rewrite."}
TOOLS: dict[str, dict[str, Any]] = {
    "memofs.recall": {
        "description": "Hybrid recall (BM25 + fuzzy + vectors, reranked) over the project's memories.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 10},
                "taskType": _TASK,
                "explain": {"type": "boolean", "default": False, "description": "Include every signal, weight and penalty."},
            },
            "required": ["query"],
        },
        "annotations": {"readOnlyHint": True},
    },
    "memofs.context": {
        "description": (
            "A budgeted context briefing (at most 8192 bytes): directive, core memory, entities, "
            "relevant recall, recent events, notes. Pass a footer cursor as `expand` (with `section`) "
            "to get that section in full (64,000-byte budget) without re-querying."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": MAX_QUERY_CHARS, "description": "Required unless expanding."},
                "taskType": _TASK,
                "maxBytes": {"type": "integer", "minimum": MIN_BUDGET, "maximum": MAX_BUDGET},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                "section": {"type": "string", "enum": list(SECTIONS)},
                "expand": {"type": "string", "maxLength": MAX_CURSOR_CHARS},
                "detail": {"type": "string", "enum": list(DETAILS), "default": "compact",
                           "description": "full: every recall result and recent event, up to 262144 bytes (default 64000), no cursors."},
                "includeCore": {"type": "boolean", "default": True},
                "includeNotes": {"type": "boolean", "description": "Notes Memory: shown in compact unless false; in full only if true."},
                "includeRecent": {"type": "boolean", "default": True},
                "includeGraph": {"type": "boolean", "default": True, "description": "false drops the Entities section."},
            },
        },
        "annotations": {"readOnlyHint": True},
    },
    "memofs.remember": {
        "description": "Store a durable memory. Secrets are refused. Anchors are files (relative to the project root) whose changes mark the memory stale.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
                "kind": {"type": "string", "enum": list(MEMORY_KINDS), "default": "note"},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "tags": {"type": "array", "maxItems": MAX_TAGS,
                         "items": {"type": "string", "pattern": "^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$"}},
                "anchors": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 2048}},
                "supersedes": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 256}},
                "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
                "source": {"type": "string", "maxLength": MAX_SOURCE_CHARS},
                "sourceRefs": {"type": "array", "maxItems": MAX_SOURCE_REFS,
                               "items": {"type": "object", "required": ["sourceType"],
                                         "properties": {"sourceType": {"type": "string"}, "sourceId": {"type": "string"},
                                                        "path": {"type": "string"}, "url": {"type": "string"},
                                                        "title": {"type": "string"}}}},
                "metadata": {"type": "object", "description": "Your own metadata, kept and returned as given."},
            },
            "required": ["content"],
        },
        "annotations": {"readOnlyHint": False},
    },
    "memofs.consolidate": {
        "description": ("Retire graph entities and relations that active `supersedes` edges make obsolete. "
                        "apply=false (the default) previews the plan and writes nothing."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "apply": {"type": "boolean", "default": False},
                "now": {"type": "string", "maxLength": 64, "description": "ISO timestamp stamped on retired items (default: now)."},
            },
        },
        "annotations": {"readOnlyHint": False},
    },
}
WRITE_TOOLS = frozenset({"memofs.remember"})
"""Tools refused read-only (``memofs.consolidate`` only when ``apply`` is true)."""

RESOURCES: dict[str, tuple[str, str, str]] = {
    "memofs://memory/core": ("core", "text/markdown", "The persistent project briefing (core.md)."),
    "memofs://memory/notes": ("notes", "text/markdown", "Every memory, in upstream's notes.md format."),
    "memofs://memory/recent": ("recent", "application/json", "The 20 most recent memory events, newest first."),
    "memofs://graph/nodes": ("graph-nodes", "application/json", "Entity graph nodes."),
    "memofs://graph/edges": ("graph-edges", "application/json", "Entity graph edges."),
    "memofs://health": ("health", "application/json", "Store health: memory count and load warnings."),
    "memofs://context": ("context", "text/markdown", "The context briefing for the query 'current task'."),
}
"""uri -> (name, MIME type, description)."""

PROMPTS: dict[str, dict[str, Any]] = {
    "memofs-recall-context": {
        "description": "Recall project memory for a query and answer with it in view.",
        "arguments": [{"name": "query", "description": "What to recall.", "required": True},
                      {"name": "workspaceId", "description": "Accepted for upstream compatibility; one store per server.", "required": False},
                      {"name": "includeGraph", "description": "Accepted for upstream compatibility: recall always resolves graph entities.", "required": False}],
    },
    "memofs-memory-review": {
        "description": "Review a candidate memory before storing it: durable, specific, no secrets.",
        "arguments": [{"name": "content", "description": "The memory text to review.", "required": True},
                      {"name": "workspaceId", "description": "Accepted for upstream compatibility.", "required": False}],
    },
}


class ToolError(Exception):
    """A tool failure reported as an ``isError`` result."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def _invalid(message: str) -> ToolError:
    return ToolError("MCP_VALIDATION_ERROR", 400, message)


# ---------------------------------------------------------------------- argument checks
def _unicode(name: str, value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(f"{name} must be valid Unicode (it has a lone surrogate).") from None
    return value


def _str(args: dict[str, Any], name: str, *, required: bool = False, max_len: int | None = None) -> str | None:
    value = args.get(name)
    if value is not None and not isinstance(value, str):
        raise _invalid(f"{name} must be a string.")
    if value is not None:
        _unicode(name, value)
    value = value.strip() if isinstance(value, str) else None
    if not value:
        if required:
            raise _invalid(f"{name} is required.")
        return None
    if max_len is not None and len(value) > max_len:
        raise _invalid(f"{name} must be at most {max_len} characters.")
    return value


def _int(args: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _invalid(f"{name} must be an integer in [{lo}, {hi}].")
    return value


def _enum(args: dict[str, Any], name: str, allowed: tuple[str, ...]) -> str | None:
    value = _str(args, name)
    if value is not None and value not in allowed:
        raise _invalid(f"{name} must be one of: {', '.join(allowed)}.")
    return value


def _bool(args: dict[str, Any], name: str) -> bool | None:
    value = args.get(name)
    if value is not None and not isinstance(value, bool):
        raise _invalid(f"{name} must be a boolean.")
    return value


def _str_list(args: dict[str, Any], name: str, max_items: int) -> list[str]:
    value = args.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(f"{name} must be an array of strings.")
    if len(value) > max_items:
        raise _invalid(f"{name} must have at most {max_items} items.")
    return [_unicode(name, v).strip() for v in value if v.strip()]


def classify(exc: Exception) -> ToolError:
    """The caller's fault (validation, a secret) or the server's (store, internal)."""
    from memofs.signals.embeddings_file import EmbeddingsFileError
    from memofs.files.safe_json import JSONFileError
    from memofs.files.secrets import WriteBlockedError
    from memofs.ranking.learned import ModelFileError
    from memofs.store.project import StoreError

    if isinstance(exc, WriteBlockedError):
        return ToolError(exc.code, 400, str(exc))
    if isinstance(exc, InvalidInputError):
        return _invalid(str(exc))
    if isinstance(exc, (StoreError, JSONFileError, EmbeddingsFileError, ModelFileError, OSError, TimeoutError)):
        return ToolError("MEMOFS_STORE_ERROR", 500, str(exc))
    log.exception("internal error in a tool call")
    return ToolError("MEMOFS_INTERNAL_ERROR", 500,
                     f"internal error: {type(exc).__name__}: {exc} (run memofs doctor)")


# ---------------------------------------------------------------------- the service
@dataclass
class MemofsTools:
    """The three tools over one store, independent of the transport (tested directly too)."""

    live: LiveStore
    cache: ContextCache
    now: Callable[[], datetime]
    read_only: bool = False

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def call(self, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """The tool's structured result; :class:`ToolError` on failure."""
        handler = {"memofs.recall": self.recall, "memofs.context": self.context, "memofs.remember": self.remember,
                   "memofs.consolidate": self.consolidate}.get(name)
        if handler is None:
            raise ToolError("MCP_NOT_FOUND", 404, f"Unknown tool: {name}.")
        if arguments is not None and not isinstance(arguments, dict):
            raise _invalid("arguments must be an object.")
        writes = name in WRITE_TOOLS or (name == "memofs.consolidate" and (arguments or {}).get("apply") is True)
        if self.read_only and writes:
            raise ToolError("MCP_AUTHORIZATION_ERROR", 403,
                            f"Operation {name} is blocked because this MCP server is running read-only.")
        with self._lock:
            try:
                # per call, not only at start: a link out of .memofs/ planted while the server runs is refused too
                self.live.store.refuse_links_out()
                return handler(arguments or {})
            except ToolError:
                raise
            except Exception as exc:
                raise classify(exc) from None

    def recall(self, args: dict[str, Any]) -> dict[str, Any]:
        query = _str(args, "query", required=True, max_len=MAX_QUERY_CHARS)
        limit = _int(args, "limit", 1, MAX_LIMIT) or 10
        task = _enum(args, "taskType", TASK_TYPES)
        explain = args.get("explain", False)
        if not isinstance(explain, bool):
            raise _invalid("explain must be a boolean.")
        state = self.live.state()
        results = state.recaller.recall(query, limit, task_type=task, now=self.now(), explain=True)
        return {"items": [result_dict(r, explain) for r in results], "warnings": state.warnings}

    def context(self, args: dict[str, Any]) -> dict[str, Any]:
        expand = _str(args, "expand", max_len=MAX_CURSOR_CHARS)
        section = _enum(args, "section", SECTIONS)
        max_bytes = _int(args, "maxBytes", MIN_BUDGET, MAX_BUDGET)
        if expand is not None:
            return expand_context(self.cache, expand, section, max_bytes or EXPAND_BUDGET).to_dict()
        query = _str(args, "query", required=True, max_len=MAX_QUERY_CHARS)
        flags = {name: _bool(args, key) for name, key in (("include_core", "includeCore"), ("include_notes", "includeNotes"),
                                                          ("include_recent", "includeRecent"), ("include_graph", "includeGraph"))}
        options = ContextOptions(detail=_enum(args, "detail", DETAILS) or "compact",
                                 **{k: v for k, v in flags.items() if v is not None})
        b = briefing_for(self.live, self.cache, query=query, now=self.now(), task_type=_enum(args, "taskType", TASK_TYPES),
                         max_bytes=max_bytes, limit=_int(args, "limit", 1, MAX_LIMIT), options=options)
        return b.to_dict()

    def remember(self, args: dict[str, Any]) -> dict[str, Any]:
        content = _str(args, "content", required=True, max_len=MAX_TEXT_CHARS)
        kind = _enum(args, "kind", MEMORY_KINDS) or "note"
        conf = args.get("confidence")
        if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 <= conf <= 1):
            raise _invalid("confidence must be a number in [0, 1].")
        m = self.live.remember(content, kind=kind, confidence=conf, tags=_str_list(args, "tags", MAX_TAGS),
                               anchors=_str_list(args, "anchors", 100), supersedes=_str_list(args, "supersedes", 100),
                               now=self.now(), title=_str(args, "title", max_len=MAX_TITLE_CHARS),
                               source=_str(args, "source", max_len=MAX_SOURCE_CHARS),
                               source_refs=args.get("sourceRefs"), metadata=args.get("metadata"))
        out = {"id": m.id, "created": True, "memory": memory_to_json(m)}
        if m.metadata.get("sourceRefs"):
            out["sourceRefs"] = m.metadata["sourceRefs"]  # upstream's result echoes them
        return out

    def consolidate(self, args: dict[str, Any]) -> dict[str, Any]:
        apply = args.get("apply", False)
        if not isinstance(apply, bool):
            raise _invalid("apply must be a boolean.")
        stamp = _str(args, "now", max_len=64)
        try:
            now = parse_iso(stamp) if stamp is not None else self.now()
        except (TypeError, ValueError):
            raise _invalid("now must be an ISO timestamp with a timezone.") from None
        return consolidate(self.live.store, now, apply=apply)

    # ------------------------------------------------------------------ resources, prompts
    def read_resource(self, uri: str) -> str:
        """The text of resource ``uri``; :class:`ToolError` (404) for an unknown one."""
        if uri not in RESOURCES:
            raise ToolError("MCP_NOT_FOUND", 404, f"Unknown resource: {uri}.")
        with self._lock:
            try:
                if uri != "memofs://health":  # as in call(); health reports problems, it does not refuse
                    self.live.store.refuse_links_out()
                return self._resource(uri)
            except ToolError:
                raise
            except Exception as exc:
                raise classify(exc) from None

    def _resource(self, uri: str) -> str:
        store = self.live.store
        if uri == "memofs://memory/core":
            return store.read_core()
        if uri == "memofs://memory/recent":
            return json.dumps(store.recent_events(20)[0], ensure_ascii=False, indent=1)
        if uri in ("memofs://graph/nodes", "memofs://graph/edges"):
            name = uri.rsplit("/", 1)[1]
            path = store.paths.graph / f"{name}.jsonl"
            # the store's reader: regular files only, depth and UTF-8 checked, a torn tail skipped
            rows, _ = read_jsonl(path)
            return json.dumps([obj for _, obj in rows], ensure_ascii=False, indent=1)
        if uri == "memofs://health":  # what `memofs doctor` runs (memofs.store.health)
            problems = command_problems(store)
            try:
                state = self.live.state()
            except Exception as exc:  # noqa: BLE001 - reported, as doctor reports it
                problems.append(f"the server cannot load the store: {exc}")
                warnings, count = [], 0
            else:
                warnings, count = state.warnings, len(state.memories)
            return json.dumps({"ok": not problems and not warnings, "healthy": not problems, "memories": count,
                               "warnings": warnings, "problems": problems}, indent=1)
        state = self.live.state()
        if uri == "memofs://memory/notes":
            return format_notes([_note(m) for m in state.memories])
        return briefing_for(self.live, self.cache, query="current task", now=self.now()).text

    def prompt(self, name: str, args: dict[str, str] | None) -> tuple[str, str]:
        """(description, user message) of prompt ``name``; recall runs for the recall prompt."""
        if name not in PROMPTS:
            raise ToolError("MCP_NOT_FOUND", 404, f"Unknown prompt: {name}.")
        args = args or {}
        if name == "memofs-recall-context":
            query = _str(args, "query", required=True, max_len=MAX_QUERY_CHARS)
            items = self.call("memofs.recall", {"query": query, "limit": 10})["items"]
            lines = "\n".join(f"- [{i['id']}] ({i['score']:.4f}) {i['text']}" for i in items) or "- (nothing recalled)"
            return PROMPTS[name]["description"], (
                f"Project memory recalled for: {query}\n\n{lines}\n\n"
                "Use these memories where they apply, say which ones you relied on, and say when none applies.")
        content = _str(args, "content", required=True, max_len=MAX_TEXT_CHARS)
        return PROMPTS[name]["description"], (
            "Review this candidate memory before it is stored with memofs.remember. Is it durable (a decision, "
            "constraint, preference, goal or reference rather than chatter), specific, self-contained, and free of "
            "secrets? Suggest a kind and tags, or say why it should not be stored.\n\n"
            f"Candidate:\n{content}")


def _note(m: Any) -> Note:
    def text(key: str) -> str | None:
        value = m.metadata.get(key)
        return value if isinstance(value, str) else None

    return Note(timestamp=iso(m.created_at) if m.created_at else "1970-01-01T00:00:00Z", content=m.text, kind=m.kind,
                title=text("title"), tags=m.tags, confidence=1.0 if m.confidence is None else m.confidence,
                source=text("source"), writer=text("writer"), metadata=upstream_note_metadata(m))


# ---------------------------------------------------------------------- MCP wiring
def build_server(tools: MemofsTools) -> Any:
    """A low-level ``mcp.server.Server`` exposing :data:`TOOLS` (mcp>=2 handler API)."""
    import anyio
    from mcp import types
    from mcp.server import Server

    tool_list = [types.Tool.model_validate({"name": n, **spec}) for n, spec in TOOLS.items()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tool_list)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, args = params.name, params.arguments
        try:
            result = await anyio.to_thread.run_sync(tools.call, name, args)
        except ToolError as exc:
            return _error(types, exc)
        except Exception as exc:  # never crash the server (tools.call classifies its own errors)
            return _error(types, classify(exc))
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": text}], "structuredContent": result, "isError": False})

    resource_list = [types.Resource.model_validate({"uri": u, "name": n, "mimeType": mt, "description": d})
                     for u, (n, mt, d) in RESOURCES.items()]

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(resources=resource_list)

    async def read_resource(ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        try:
            text = await anyio.to_thread.run_sync(tools.read_resource, uri)
        except ToolError as exc:
            raise _protocol_error(exc) from None
        return types.ReadResourceResult.model_validate(
            {"contents": [{"uri": uri, "mimeType": RESOURCES[uri][1], "text": text}]})

    prompt_list = [types.Prompt.model_validate({"name": n, **spec}) for n, spec in PROMPTS.items()]

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return types.ListPromptsResult(prompts=prompt_list)

    async def get_prompt(ctx: Any, params: Any) -> Any:
        try:
            desc, text = await anyio.to_thread.run_sync(tools.prompt, params.name, params.arguments)
        except ToolError as exc:
            raise _protocol_error(exc) from None
        return types.GetPromptResult.model_validate(
            {"description": desc, "messages": [{"role": "user", "content": {"type": "text", "text": text}}]})

    return Server(SERVER_NAME, version=SERVER_VERSION, on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt,
                  instructions="Call memofs.context at the start of a task; memofs.recall before answering; "
                               "memofs.remember for durable decisions (never secrets).")


def _error(types: Any, exc: ToolError) -> Any:
    err = {"name": type(exc).__name__, "message": str(exc), "code": exc.code, "status": exc.status}
    return types.CallToolResult.model_validate({
        "content": [{"type": "text", "text": f"{exc.code}: {exc}"}],
        "structuredContent": {"error": err},
        "isError": True,
    })


def _protocol_error(exc: ToolError) -> Exception:
    """A resource or prompt failure as a JSON-RPC error (-32602 for the caller's, -32603 else)."""
    from mcp.shared.exceptions import MCPError

    code = -32602 if exc.status < 500 else -32603
    return MCPError(code, f"{exc.code}: {exc}", {"code": exc.code})


def parse_http(address: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); a one-line ValueError otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http wants HOST:PORT (e.g. 127.0.0.1:8765); got {address!r}")
    return host.strip("[]"), int(port)


def serve(store: Store, *, cache_clock: Callable[[], float], embedder: Any = None, read_only: bool = False,
          http: str | None = None) -> None:
    """Serve ``store`` over stdio until the client closes the connection, or over Streamable
    HTTP at ``http`` (``HOST:PORT``, endpoint ``/mcp``) until interrupted. "Now" comes from
    ``store.clock`` (recall, writes) and ``cache_clock`` (cursor TTL), both injected."""
    import anyio

    if store.clock is None:
        raise ValueError("serve needs a store with a clock (Store.open(root, clock=...))")
    tools = MemofsTools(LiveStore(store, embedder=embedder), ContextCache(clock=cache_clock), store.clock, read_only)
    server = build_server(tools)
    if http is not None:
        import uvicorn

        host, port = parse_http(http)
        app = server.streamable_http_app(host=host)
        uvicorn.run(app, host=host, port=port, log_level="warning")
        return
    from mcp.server.stdio import stdio_server

    from memofs.surfaces.jsonrpc_errors import AnsweringReadStream

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            # the SDK drops lines it cannot validate without a reply (memofs.surfaces.jsonrpc_errors)
            await server.run(AnsweringReadStream(read_stream, write_stream), write_stream,
                             server.create_initialization_options())

    anyio.run(run)
