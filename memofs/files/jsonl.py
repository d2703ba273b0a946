"""Append-only JSONL files: whole-line appends and torn-tail repair (the store's rule for
``memories.jsonl``, ``memory-events.jsonl`` and ``embeddings.jsonl``).

An append is one ``os.write`` of whole lines on an ``O_APPEND`` descriptor, fsynced before
the writer's lock is released. A process killed mid-append can leave a torn last line;
the next writer, under the lock, saves its bytes aside and cuts the file back to its last
complete line before appending (:func:`repair_tail`), so a torn line never ends up in
the middle of a file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memofs.files import safe_json

log = logging.getLogger("memofs.jsonl")


_DERIVED: ContextVar[bool] = ContextVar("memofs_derived_appends", default=False)


@contextmanager
def derived_appends() -> Iterator[None]:
    """Appends made inside skip their ``fsync``: for lines derived from a record that is
    already fsynced (a memory's event and graph facts), which the store re-derives when a
    crash of the machine lost them (``Store.sync_derived``). A killed *process* loses
    nothing either way: its completed ``os.write`` calls are in the kernel's page cache."""
    token = _DERIVED.set(True)
    try:
        yield
    finally:
        _DERIVED.reset(token)


def compact(obj: dict[str, Any]) -> str:
    """``obj`` as one compact JSON line (no newline), as :func:`append_line` writes it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def append_line(path: Path, obj: dict[str, Any]) -> os.stat_result:
    """Append one compact JSON line (:func:`append_bytes`)."""
    return append_bytes(path, (compact(obj) + "\n").encode("utf-8"))


def append_lines(path: Path, lines: Iterable[str]) -> os.stat_result | None:
    """Append whole lines (:func:`append_bytes`); None when there is nothing to write."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    return append_bytes(path, data) if data else None


def append_bytes(path: Path, data: bytes) -> os.stat_result:
    """Append ``data`` (whole lines, each ending in a newline) with a single write on an
    O_APPEND descriptor, then fsync (no fsync inside :func:`derived_appends`). Returns the
    file's ``fstat`` after the write, for :func:`file_key`.

    The caller holds the file's writer lock and has called :func:`repair_tail` first, so
    a crash leaves at most a torn last line, which readers skip and the next writer cuts."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:  # os.write may write less than asked (signals, quotas)
            n = os.write(fd, view)
            view = view[n:]
        if not _DERIVED.get():
            os.fsync(fd)
        return os.fstat(fd)
    finally:
        os.close(fd)


FileKey = tuple[int, int, int]


def file_key(st: os.stat_result) -> FileKey:
    """``(inode, size, mtime_ns)``: what a writer compares to know a file is exactly as its
    own last append left it (any append, cut, replacement or edit since changes one)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def fsync_file(path: Path) -> None:
    """fsync ``path`` if it exists (makes earlier :func:`derived_appends` durable)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def repair_tail(path: Path, tmp_dir: Path) -> str | None:
    """Make ``path`` end with a complete line before an append (caller holds the lock).

    A last line without its newline is either a complete JSON object (the crash hit just
    before the newline: the newline is added) or a torn write (its bytes are saved to
    ``tmp_dir`` and cut off). Returns a warning, or None when the file was clean."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None
    with open(path, "rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return None
        # find the start of the unterminated tail
        block = 1 << 16
        pos = size
        start = 0
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                start = pos + nl + 1
                break
        fh.seek(start)
        tail = fh.read()
        try:
            safe_json.parse(tail, str(path), expect=dict)
            complete = True
        except safe_json.JSONFileError:
            complete = False
        if complete:
            fh.seek(size)
            fh.write(b"\n")
            msg = f"{path}: last line lacked its newline; terminated it"
        else:
            tmp_dir.mkdir(parents=True, exist_ok=True)
            saved = tmp_dir / f"torn-{path.name}-{os.getpid()}-{size}.bin"
            saved.write_bytes(tail)
            fh.truncate(start)
            msg = f"{path}: cut a torn last line ({len(tail)} bytes, saved to {saved.name})"
        fh.flush()
        os.fsync(fh.fileno())
    log.warning(msg)
    return msg


_TAIL_BYTES = 64


@dataclass
class AppendCursor:
    """Where a reader of an append-only file stopped: inode, byte offset and the (up to)
    64 bytes before it. :meth:`read` returns the complete lines written since (all of them
    the first time), and whether the file was read whole (replaced, cut or edited before
    the offset: the caller then rebuilds what it derived). The 64 bytes catch a rewrite
    that keeps the inode and grows the file (an editor saving in place) for one small read;
    an edit that leaves the last 64 bytes before the offset alone, in a file that then
    grows, goes unseen (the same blind spot as the size + mtime checks it replaces).
    ``lines`` counts the newline-terminated lines read so far (since the last whole read),
    so a writer knows a file's line count without reading it again."""

    inode: int = -1
    offset: int = 0
    tail: bytes = b""
    lines: int = 0

    def read(self, path: Path) -> tuple[bytes, bool]:
        """``(new complete lines, whole)``; a missing file reads as empty and whole."""
        try:
            fd, st = safe_json.open_regular(path)
        except FileNotFoundError:
            self.inode, self.offset, self.tail, self.lines = -1, 0, b"", 0
            return b"", True
        with os.fdopen(fd, "rb") as fh:
            whole = st.st_ino != self.inode or st.st_size < self.offset
            if not whole and self.offset:
                start = max(0, self.offset - _TAIL_BYTES)
                fh.seek(start)
                whole = fh.read(self.offset - start) != self.tail
            if whole:
                self.offset, self.tail, self.lines = 0, b"", 0
            fh.seek(self.offset)
            data = fh.read(st.st_size - self.offset)
        data = data[:data.rfind(b"\n") + 1]  # a torn last line is read again, whole, next time
        self.inode = st.st_ino
        self.offset += len(data)
        self.tail = (self.tail + data)[-_TAIL_BYTES:]
        self.lines += data.count(b"\n")
        return data, whole

    def advance(self, data: bytes, st: os.stat_result) -> bool:
        """Count ``data``, complete lines this process has just appended, as read, without
        reading them back; ``st`` is the file's ``fstat`` after the append. Only when they
        are exactly what follows the offset (same inode, the size grew by ``len(data)``:
        nothing else was appended or cut since the last :meth:`read`); returns whether it
        did (if not, the next :meth:`read` reads the file as usual)."""
        if st.st_ino != self.inode or self.offset + len(data) != st.st_size or not data.endswith(b"\n"):
            return False
        self.offset += len(data)
        self.tail = (self.tail + data)[-_TAIL_BYTES:]
        self.lines += data.count(b"\n")
        return True


def tail_lines(path: Path, n: int, block: int = 1 << 16) -> list[bytes]:
    """The last ``n`` non-blank lines of ``path`` (a torn unterminated tail included, as
    the last), read backwards in blocks: the cost follows ``n``, not the file's size."""
    if n <= 0:
        return []
    fd, st = safe_json.open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        pos, buf = st.st_size, b""
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
            if sum(1 for line in buf.split(b"\n")[1:] if line.strip()) >= n:
                break
    lines = buf.split(b"\n")
    if pos > 0:
        lines = lines[1:]  # the first piece may be the end of a longer line
    return [line for line in lines if line.strip()][-n:]
