"""Replies to malformed JSON-RPC lines on the MCP stdio transport (issue 36 item 10).

The ``mcp`` SDK's stdio transport (``mcp.server.stdio.stdio_server``) turns a line it cannot
validate into an ``Exception`` item on the read stream, and its dispatcher
(``mcp.shared.jsonrpc_dispatcher.JSONRPCDispatcher._dispatch``) debug-logs and drops such
items unless an ``on_stream_exception`` observer is set, which the server runner never sets.
So a malformed line gets no reply and a client that sent an id waits forever. JSON-RPC 2.0
(section 5.1) says a parse error is answered with -32700 and an invalid request with -32600.

:class:`AnsweringReadStream` wraps the read stream the SDK hands us and answers each such
item through the SDK's own write stream (so replies never interleave with its lines): the
error names the problem, and carries the request's id when one can be recovered (a line with
a top-level ``"method"`` and a string or integer ``"id"``), else ``null`` as the
specification asks. The Streamable HTTP transport already answers them (HTTP 400 with a
JSON-RPC error), so it needs nothing here.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

log = logging.getLogger("memofs.mcp")
_WS = " \t\r\n"
_MESSAGE_CHARS = 200  # of the validator's message kept in the reply (never the line itself)


def _skip_nested(raw: str, i: int) -> int:
    """The index after the object or array opening at ``i`` (iterative: any depth, no recursion)."""
    depth, in_str, esc = 0, False, False
    for j in range(i, len(raw)):
        c = raw[j]
        if in_str:
            esc, in_str = (False, True) if esc else (c == "\\", c != '"')
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError("unterminated")


def top_level_scalars(raw: str) -> dict[str, Any]:
    """The scalar members of the JSON object ``raw`` at its top level, read as far as it
    parses (nested values are skipped unparsed, so a 5,000-deep ``params`` costs one scan);
    a nested member is recorded as None so its key is still seen."""
    dec = json.JSONDecoder()
    out: dict[str, Any] = {}
    n, i = len(raw), 0

    def ws(k: int) -> int:
        while k < n and raw[k] in _WS:
            k += 1
        return k

    try:
        i = ws(i)
        if i >= n or raw[i] != "{":
            return out
        i = ws(i + 1)
        while i < n and raw[i] != "}":
            key, i = dec.raw_decode(raw, i)
            i = ws(i)
            if not isinstance(key, str) or raw[i] != ":":
                return out
            i = ws(i + 1)
            if raw[i] in "{[":
                i, val = _skip_nested(raw, i), None
            else:
                val, i = dec.raw_decode(raw, i)
            out.setdefault(key, val)
            i = ws(i)
            if raw[i] == ",":
                i = ws(i + 1)
    except (ValueError, IndexError):  # the rest does not parse: keep what did
        pass
    return out


def _request_id(members: Any) -> str | int | None:
    """The id of what was meant as a request (a ``"method"`` member and a string or integer
    ``"id"`` that can be written back); None otherwise."""
    if not isinstance(members, dict) or "method" not in members:
        return None
    rid = members.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        return None
    if isinstance(rid, str):
        try:
            rid.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in the id itself
            return None
    return rid


def error_reply(exc: Exception) -> Any:
    """The ``JSONRPCError`` answering the transport's ``exc`` for one line: -32700 when the
    line is not JSON the validator reads, -32600 when it is JSON but not a JSON-RPC message."""
    import mcp_types as types

    errors: list[dict[str, Any]] = []
    try:
        errors = list(exc.errors())  # type: ignore[attr-defined]  # a pydantic ValidationError
    except Exception:  # noqa: BLE001 - anything else the transport yields: a parse error
        pass
    parse = not errors or any(e.get("type") == "json_invalid" for e in errors)
    rid = None
    for e in errors:
        got = e.get("input")
        rid = _request_id(top_level_scalars(got) if isinstance(got, str) else got)
        if rid is not None:
            break
    first = errors[0].get("msg", "") if errors else str(exc)
    code, what = (types.PARSE_ERROR, "Parse error") if parse else (types.INVALID_REQUEST, "Invalid Request")
    return types.JSONRPCError(jsonrpc="2.0", id=rid,
                              error=types.ErrorData(code=code, message=f"{what}: {first}"[:_MESSAGE_CHARS]))


class AnsweringReadStream:
    """The SDK's stdio read stream, less its ``Exception`` items, each answered on
    ``write`` with :func:`error_reply` (duck-typed like the stream: the dispatcher iterates
    it, enters it and reads ``last_context``)."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        from mcp.shared.message import SessionMessage

        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = error_reply(item)
            log.debug("answered a malformed line with %s", reply.error.message)
            await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
