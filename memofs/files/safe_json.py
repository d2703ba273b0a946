"""The one JSON reader for every file the store reads (memories, events, graph,
embeddings, manifest, config, the context cache).

Bytes are decoded as strict UTF-8, nesting is limited to :data:`MAX_DEPTH` levels
(deeper input is refused before the parser runs, so it never hits ``RecursionError``),
and every failure is a :class:`JSONFileError` whose message names the file (and the
line, for JSONL and for multi-line files). Files are opened with :func:`open_regular`:
a FIFO, directory or device where a file should be is refused, never read (a FIFO
would block the reader forever).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting accepted; store records nest at most 4 levels."""

# a JSON string (so brackets inside strings are not counted) or one bracket
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class JSONFileError(ValueError):
    """A file or line that is not valid UTF-8 JSON of the expected shape.

    ``where`` is ``path`` or ``path:line``; ``reason`` says what is wrong."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


class NotRegularFileError(OSError):
    """A path that should be a regular file but is a FIFO, directory, device or socket."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def require_regular(path: Path | str, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(f"{path} is {_kind(st.st_mode)}, not a regular file")


def open_regular(path: Path | str, *, follow_symlinks: bool = True) -> tuple[int, os.stat_result]:
    """A read-only descriptor on the regular file ``path`` and its ``fstat``.

    ``stat`` first (a device is not even opened), then ``O_NONBLOCK`` (a FIFO swapped in
    meanwhile cannot block the open) and ``fstat`` on the descriptor. Raises
    :class:`NotRegularFileError`; ``FileNotFoundError`` passes through."""
    require_regular(path, os.stat(path, follow_symlinks=follow_symlinks))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        require_regular(path, st)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_bytes(path: Path | str) -> bytes:
    """The whole regular file ``path`` (see :func:`open_regular`)."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as strict UTF-8; the error names ``where`` and the byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONFileError(where, f"not valid UTF-8 (byte {exc.start})") from None


def read_text(path: Path) -> str:
    """A whole text file as strict UTF-8 (``FileNotFoundError`` passes through)."""
    return decode_utf8(read_bytes(path), str(path))


def _too_deep(text: str) -> bool:
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False  # fast path: cannot nest deeper than the brackets it has
    depth = 0
    for m in _TOKENS.finditer(text):
        tok = m.group(0)
        if tok in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif tok in ("]", "}"):
            depth -= 1
    return False


def parse(data: str | bytes, where: str, *, expect: type | None = None, line_numbers: bool = False) -> Any:
    """Parse one JSON document. ``expect``: the required top-level type (e.g. ``dict``);
    ``line_numbers``: add the failing line to ``where`` (whole multi-line files)."""
    text = decode_utf8(data, where) if isinstance(data, bytes) else data
    if _too_deep(text):
        raise JSONFileError(where, f"invalid JSON (nested deeper than {MAX_DEPTH} levels)")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONFileError(f"{where}:{exc.lineno}" if line_numbers else where, f"invalid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer over the digit limit
        raise JSONFileError(where, f"invalid JSON ({exc})") from None
    if expect is not None and not isinstance(obj, expect):
        raise JSONFileError(where, f"expected a JSON {'object' if expect is dict else expect.__name__}, got {type(obj).__name__}")
    return obj


def load_file(path: Path, *, expect: type | None = None) -> Any:
    """A whole JSON file (``FileNotFoundError`` passes through)."""
    return parse(read_bytes(path), str(path), expect=expect, line_numbers=True)
