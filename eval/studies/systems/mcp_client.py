"""Any MCP server as a memory system, through a declared mapping from ingest/recall to its
tools (official ``mcp`` SDK client, stdio or Streamable HTTP).

Options (strings may hold the placeholders below; JSON templates are objects whose string
values are filled in, a value that is exactly one placeholder keeps its type):

* ``command`` + ``args`` + ``env`` (stdio) or ``url`` (Streamable HTTP) — one server per
  scope for stdio, started at the scope's ingest with ``{workdir}`` a fresh folder (so scopes
  never see each other's memories); with ``url`` the one server must be empty at the start;
* ``ingest_tool`` + ``ingest_arguments``: one call per memory, placeholders ``{id}``, ``{text}``,
  ``{kind}``, ``{scope}``; ``ingest_id_path``: where the result names the server's own id for
  the memory (then recalled ids are mapped back), else the server is told ``{id}``;
* ``recall_tool`` + ``recall_arguments``: placeholders ``{query}``, ``{k}``, ``{scope}``,
  ``{task_type}`` (the query's task type);
  ``result_path`` (``entities[*].name``: keys, ``[*]`` over a list) to the ranked ids and
  optionally ``score_path`` to their scores. A result is its ``structuredContent``, else the
  JSON of its first text block. A tool result with ``isError`` raises (a failed query).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memofs.files.records import Memory

from memofs_eval.inputs.spec import resolve_path
from memofs_eval.studies.systems.base import AdapterConfigError, Ask, Recalled, System, folder_bytes


def fill(template: Any, values: dict[str, Any]) -> Any:
    """``template`` with ``{name}`` placeholders of its strings replaced from ``values``."""
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if isinstance(template, str):
        for name, value in values.items():
            if template == "{" + name + "}":
                return value
        out = template
        for name, value in values.items():
            out = out.replace("{" + name + "}", str(value))
        return out
    return template


def walk(value: Any, path: str) -> list[Any]:
    """The values at ``path`` (dot-separated keys; ``key[*]`` iterates a list)."""
    items = [value]
    for part in path.split("."):
        spread = part.endswith("[*]")
        key = part[:-3] if spread else part
        nxt = []
        for it in items:
            v = it.get(key) if isinstance(it, dict) and key else it
            if v is None:
                continue
            nxt.extend(v if spread and isinstance(v, list) else [v])
        items = nxt
    return items


def payload(result: Any) -> Any:
    """A tool result's data: ``structuredContent``, else its first text block as JSON."""
    if getattr(result, "is_error", False) or getattr(result, "isError", False):
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise RuntimeError(f"tool error: {text}")
    structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if structured:
        return structured
    for c in result.content:
        if getattr(c, "type", "") == "text":
            return json.loads(c.text)
    return {}


class McpServer:
    """One MCP client session kept open across sync calls (an event loop in a portal thread)."""

    def __init__(self, command: str | None, args: Sequence[str], env: dict[str, str], url: str | None) -> None:
        from anyio.from_thread import start_blocking_portal
        from mcp import ClientSession

        self._stack = contextlib.ExitStack()
        try:
            portal = self._stack.enter_context(start_blocking_portal())
            if url is not None:
                from mcp.client.streamable_http import streamable_http_client

                streams = self._stack.enter_context(portal.wrap_async_context_manager(streamable_http_client(url)))
            else:
                from mcp import StdioServerParameters
                from mcp.client.stdio import stdio_client

                params = StdioServerParameters(command=command, args=list(args), env={**os.environ, **env})
                streams = self._stack.enter_context(portal.wrap_async_context_manager(stdio_client(params)))
            self.session = self._stack.enter_context(portal.wrap_async_context_manager(ClientSession(streams[0], streams[1])))
            self.portal = portal
            portal.call(self.session.initialize)
        except BaseException:
            self._stack.close()
            raise

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return payload(self.portal.call(self.session.call_tool, tool, arguments))

    def tools(self) -> list[str]:
        return [t.name for t in self.portal.call(self.session.list_tools).tools]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stack.close()


class McpSystem(System):
    OPTIONS = {"command": (str,), "args": (list,), "env": (dict,), "url": (str,), "ingest_tool": (str,),
               "ingest_arguments": (dict,), "ingest_id_path": (str,), "recall_tool": (str,), "recall_arguments": (dict,),
               "result_path": (str,), "score_path": (str,)}
    REQUIRED = ("ingest_tool", "ingest_arguments", "recall_tool", "recall_arguments", "result_path")

    def __init__(self, name: str, *, base: Path = Path("."), command: str | None = None, args: Sequence[str] = (),
                 env: dict | None = None, url: str | None = None, ingest_tool: str, ingest_arguments: dict,
                 ingest_id_path: str | None = None, recall_tool: str, recall_arguments: dict, result_path: str,
                 score_path: str | None = None) -> None:
        if (command is None) == (url is None):
            raise AdapterConfigError(name, "options.command", "give exactly one of command (stdio) and url (Streamable HTTP)")
        if command is not None and ("/" in command or command.startswith(".")):
            command = str(resolve_path(command, base))  # a path in the repo, else a name on PATH
        self.name, self.command, self.args, self.env, self.url = name, command, list(args), dict(env or {}), url
        self.ingest_tool, self.ingest_arguments, self.ingest_id_path = ingest_tool, ingest_arguments, ingest_id_path
        self.recall_tool, self.recall_arguments = recall_tool, recall_arguments
        self.result_path, self.score_path = result_path, score_path
        self._servers: dict[str, McpServer] = {}
        self._dirs: dict[str, Path] = {}
        self._ids: dict[str, dict[str, str]] = {}  # scope -> server id -> memory id

    def start(self, scope: str, workdir: Path) -> McpServer:
        """The scope's server (stdio: a fresh process on ``workdir``; http: the one at ``url``)."""
        if self.url is not None:
            if self._servers:
                return next(iter(self._servers.values()))
            return McpServer(None, (), {}, self.url)
        values = {"workdir": str(workdir), "scope": scope}
        return McpServer(self.command, fill(self.args, values), {k: str(fill(v, values)) for k, v in self.env.items()}, None)

    def prepare(self, scope: str, workdir: Path, memories: Sequence[Memory]) -> None:
        """Hook before the server starts (memofs writes its store here)."""

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        workdir = Path(tempfile.mkdtemp(prefix="memofs-sut-"))
        self._dirs[scope] = workdir
        self.prepare(scope, workdir, memories)
        server = self._servers[scope] = self.start(scope, workdir)
        ids = self._ids.setdefault(scope, {})
        for m in memories:
            self.ingest_one(server, scope, m, ids)

    def ingest_one(self, server: McpServer, scope: str, m: Memory, ids: dict[str, str]) -> None:
        out = server.call(self.ingest_tool, fill(self.ingest_arguments, {"id": m.id, "text": m.text, "kind": m.kind, "scope": scope}))
        if self.ingest_id_path:
            found = walk(out, self.ingest_id_path)
            if not found:
                raise RuntimeError(f"ingest of {m.id!r}: no id at {self.ingest_id_path!r} in the result")
            ids[str(found[0])] = m.id

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        out = self._servers[scope].call(self.recall_tool, fill(self.recall_arguments, {"query": ask.text, "k": k, "scope": scope,
                                                                      "task_type": ask.task_type}))
        ids = [str(i) for i in walk(out, self.result_path)][:k]
        mapping = self._ids.get(scope, {})
        ids = [mapping.get(i, i) for i in ids] if mapping else ids
        scores = [float(s) for s in walk(out, self.score_path)][:len(ids)] if self.score_path else None
        return Recalled(tuple(ids), tuple(scores) if scores is not None and len(scores) == len(ids) else None)

    def index_bytes(self) -> int | None:
        return sum(folder_bytes(d) for d in self._dirs.values()) if self.url is None else None

    def reset(self) -> None:
        for server in self._servers.values():
            server.close()
        for d in self._dirs.values():
            shutil.rmtree(d, ignore_errors=True)
        self._servers, self._dirs, self._ids = {}, {}, {}

    close = reset
