"""Binary sidecars of append-only JSONL files: what a load derived from a file's first
``offset`` bytes, kept as memory-mapped ``.npy`` columns so the next process starts without
parsing those lines again (issue 18, "fast start"). The JSONL stays the durable record; a
sidecar is only a cache: delete it and the next load rebuilds it.

Validity (:class:`PrefixStamp`): the JSONL's inode, the byte offset covered, the 64 bytes
before it and the file's mtime when the covered bytes were read, checked with one ``stat``
and one small read. The JSONL is only ever appended to in place or replaced by a rename, so
same inode, size > offset and the same 64 bytes means the sidecar covers a prefix of the
file and only the lines after the offset need parsing; size == offset needs the same mtime
too (a same-length edit in place changes it). Anything else (replaced, cut, hand-edited)
means a full parse and a new sidecar. Blind spot, stated: an in-place edit that keeps the
last 64 bytes before the offset *and* is followed by an append. A sidecar built with
``digest_prefix`` closes it: it also keeps a BLAKE3 digest of the whole prefix and checks it
on read (memories.jsonl: tens of MB at 100k, hashed in milliseconds; embeddings.jsonl,
hundreds of MB, keeps the tail check only).

Damage: each column's BLAKE3 digest is kept in the metadata and checked on read, so a
flipped byte or a truncated ``.npy`` is rebuilt, never trusted. A column is hashed from its
file with ordinary reads, never through its memory map: a hashed map's pages would stay in
the process's resident set (issue 38: the two 146 MiB vector matrices at 100,000 memories).
A reader may defer a column's check to its first use (:meth:`Sidecar.read`'s ``defer``;
:meth:`Columns.verified` then raises ValueError on a mismatch): a recall that never reads
the raw vectors never hashes them. Forgery (issue 36 item 7):
the metadata, digests and stamp included, is sealed with this user's key
(:mod:`memofs.files.cache_seal`), so a sidecar rewritten by anyone else, through this very
writer or by editing a column in place, or copied from another store, is rebuilt too.

Why ``.npy``: numpy's own format, memory-mapped without a copy, no code execution on load
(``allow_pickle=False``), readable by any numpy. Pickle is never used.

Writing: every column of a new generation goes to a temp file, is fsynced and renamed under
the generation's name; the JSON metadata naming the generation is written last (atomic), so
a crash (kill -9 included) leaves the old pair or the new one, never a mix; files of older
generations are removed after the switch.
"""

from __future__ import annotations

import json
import os
import secrets as _random
import shutil
import tempfile
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from blake3 import blake3

from memofs.files import cache_seal, safe_json
from memofs.files.atomic import atomic_write_text, fsync_dir
from memofs.files.records import text_sha256

TAIL_BYTES = 64
SHA_DTYPE = "S64"
"""A column of :func:`~memofs.files.records.text_sha256` hashes: 64 ASCII hex bytes a row."""


@dataclass(frozen=True)
class PrefixStamp:
    """Identifies the first ``offset`` bytes (``lineno`` lines) of a JSONL file as read."""

    inode: int
    offset: int
    tail: str  # hex of the up to 64 bytes before offset
    mtime_ns: int
    lineno: int
    digest: str = ""  # BLAKE3 of the whole prefix (:func:`prefix_digest`), when the sidecar keeps one ("" = tail check only)

    @classmethod
    def of(cls, st: os.stat_result, covered: bytes, offset: int, lineno: int) -> PrefixStamp:
        """The stamp of ``offset`` bytes whose last bytes are ``covered``'s, read from a file with stat ``st``."""
        return cls(st.st_ino, offset, covered[-TAIL_BYTES:].hex() if offset else "", st.st_mtime_ns, lineno)

    @classmethod
    def take(cls, path: Path, offset: int, lineno: int) -> PrefixStamp | None:
        """The stamp of ``path``'s first ``offset`` bytes as they are now; None when shorter or missing."""
        try:
            fd, st = safe_json.open_regular(path)
        except OSError:  # missing, or not a regular file
            return None
        with os.fdopen(fd, "rb") as fh:
            if st.st_size < offset:
                return None
            start = max(0, offset - TAIL_BYTES)
            fh.seek(start)
            return cls.of(st, fh.read(offset - start), offset, lineno)

    def covers(self, path: Path) -> bool:
        """True when ``path`` still starts with the bytes this stamp saw (see the module doc)."""
        now = PrefixStamp.take(path, self.offset, self.lineno)
        if now is None or now.inode != self.inode or now.tail != self.tail:
            return False
        size = os.stat(path).st_size
        return size > self.offset or now.mtime_ns == self.mtime_ns


def join_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A string column: the UTF-8 bytes (uint8) of the strings joined and each string's end
    (int64), counted in *characters* of the decoded join, so reading is one decode and slices."""
    ends = np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)))
    return np.frombuffer("".join(strings).encode("utf-8"), dtype=np.uint8), ends


def split_strings(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    """The strings of :func:`join_strings`' column; ValueError when the ends do not fit."""
    text = decode_strings(blob, ends)
    e = ends.tolist()
    return [text[a:z] for a, z in zip([0] + e[:-1], e)]


def decode_strings(blob: np.ndarray, ends: np.ndarray) -> str:
    """The decoded join of :func:`join_strings`' column (the buffer decoded in place, no
    copy of it first); ValueError when the ends do not fit."""
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise ValueError("a string column is not one row of bytes")
    text = str(memoryview(np.ascontiguousarray(blob)), "utf-8")
    if len(ends) and (int(ends[-1]) != len(text) or (np.diff(ends) < 0).any() or ends[0] < 0):
        raise ValueError("string ends do not match the joined text")
    return text


def sha256_column(texts: Iterable[str]) -> np.ndarray:
    """The :func:`~memofs.files.records.text_sha256` of each text as one :data:`SHA_DTYPE`
    array: the memories and vector sidecars keep their hashes so, and a start compares
    them with numpy instead of hashing every text."""
    return np.array([text_sha256(t) for t in texts], dtype=SHA_DTYPE).reshape(-1)


def prefix_digest(path: Path, offset: int) -> str | None:
    """BLAKE3 of ``path``'s first ``offset`` bytes; None when shorter or missing."""
    try:
        fd, _ = safe_json.open_regular(path)
    except OSError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as fh:
        got = _hash_reads(fh, offset)
    return None if got is None else got.hexdigest()


READ_BYTES = 1 << 22
"""Bytes hashed per read: few system calls, and a constant in the resident set.

BLAKE3 runs single-threaded here. Its multithreaded mode uses rayon's process-wide pool, and
a process forked after that pool started (a preforking server that opened a store first, a
``fork`` process pool) hangs for ever on its first multithreaded hash; the threads would save
~15 ms a 146 MiB matrix (tested: a forked child reads a sidecar)."""


def _hash_reads(fh: Any, nbytes: int) -> Any:
    """BLAKE3 of the next ``nbytes`` of the unbuffered file ``fh``, read READ_BYTES at a time
    into one reused buffer; None when the file ends first."""
    h = blake3()
    buf = memoryview(bytearray(min(nbytes, READ_BYTES) or 1))
    left = nbytes
    while left:
        n = fh.readinto(buf[:min(left, len(buf))])
        if not n:
            return None
        h.update(buf[:n])
        left -= n
    return h


DIGEST_PREFIX = "blake3:"
"""Names the digest in the metadata: a sidecar digested otherwise (SHA-256 before issue 38)
simply does not match, so it is rebuilt once."""


def column_digest(a: np.ndarray) -> str:
    """The digest of an array's C-order bytes, as written in the metadata."""
    data = np.ascontiguousarray(a).reshape(-1).view(np.uint8)  # any shape, (0, dim) included
    return DIGEST_PREFIX + blake3(data).hexdigest()


def _file_column_digest(path: Path, a: np.memmap) -> str | None:
    """:func:`column_digest` of a column as mapped from ``path``, computed from the file's
    bytes (reads, not the map: see the module's docstring); None when the file is shorter."""
    fd, _ = safe_json.open_regular(path, follow_symlinks=False)  # a FIFO swapped in cannot block
    with os.fdopen(fd, "rb", buffering=0) as fh:
        fh.seek(a.offset)
        got = _hash_reads(fh, a.nbytes)
    return None if got is None else DIGEST_PREFIX + got.hexdigest()


class Columns(dict):
    """A sidecar's columns by name, memory-mapped. A column named in ``deferred`` has not
    been checked against its digest yet: :meth:`verified` checks it (once) before handing
    it out."""

    def __init__(self, cols: dict[str, np.ndarray], digests: dict[str, str], paths: dict[str, Path],
                 deferred: Collection[str]) -> None:
        super().__init__(cols)
        self._digests, self._paths = digests, paths
        self.deferred = set(deferred)

    def verified(self, name: str) -> np.ndarray:
        """Column ``name``, its digest checked; ValueError when it does not match (the
        caller drops the sidecar: damage means rebuild)."""
        a = self[name]
        if name in self.deferred:
            if _mapped_digest(self._paths[name], a) != self._digests[name]:
                raise ValueError(f"sidecar column {self._paths[name].name} does not match its digest")
            self.deferred.discard(name)
        return a


def _mapped_digest(path: Path, a: np.ndarray) -> str | None:
    """:func:`column_digest` of a column as read, from its file where it can be; through the
    map when the file is gone (a newer generation replaced it after the read: the map stays
    valid, only the name was unlinked)."""
    if isinstance(a, np.memmap) and a.flags.c_contiguous:
        try:
            return _file_column_digest(path, a)
        except OSError:
            pass
    return column_digest(a)


class Sidecar:
    """The sidecar ``<dir>/<name>.sidecar.json`` + ``<dir>/<name>.<generation>.<column>.npy`` of one JSONL file.

    ``jsonl`` None: a sidecar its reader validates by content (the terms sidecar compares
    its rows' ids and text hashes with the load's): no prefix stamp is kept or checked."""

    def __init__(self, jsonl: Path | None, directory: Path, name: str, format: int, *, digest_prefix: bool = False) -> None:
        self.jsonl = None if jsonl is None else Path(jsonl)
        self.digest_prefix = digest_prefix
        self.dir = Path(directory)
        self.name = name
        self.format = format
        self.meta_path = self.dir / f"{name}.sidecar.json"

    def unsealed(self) -> bool:
        """True when the metadata file is there and readable but not sealed by this user's
        key (forged, copied from another store or machine, or written before seals): what
        ``memofs doctor`` reports, since every read then rebuilds the cache."""
        try:
            meta = safe_json.load_file(self.meta_path, expect=dict)
        except (FileNotFoundError, safe_json.JSONFileError, OSError):
            return False
        return not cache_seal.verify(meta)

    def remove(self) -> None:
        """Delete the metadata and every column file (caller holds the writer lock): the next
        load rebuilds the cache from the durable record."""
        for f in [self.meta_path, *self.dir.glob(f"{self.name}.*.npy")]:
            if f.is_dir() and not f.is_symlink():
                shutil.rmtree(f)
            else:
                f.unlink(missing_ok=True)

    def read(self, defer: Collection[str] = ()) -> tuple[dict[str, Any], Columns, PrefixStamp | None] | None:
        """``(metadata, columns memory-mapped, stamp)`` when the sidecar is intact, sealed by
        this user's key and covers a prefix of the JSONL as it is now (stamp None without a
        JSONL); None when missing, damaged, unsealed, stale or of another format. The
        columns named in ``defer`` are checked against their digests on first use
        (:meth:`Columns.verified`), not here."""
        try:
            meta = safe_json.load_file(self.meta_path, expect=dict)
        except (FileNotFoundError, safe_json.JSONFileError, OSError):
            return None
        if not cache_seal.verify(meta):
            return None  # not written by this user's writer: rebuilt, never trusted
        try:
            if meta["format"] != self.format:
                return None
            stamp = None if self.jsonl is None else PrefixStamp(**meta["stamp"])
            if stamp is not None and not stamp.covers(self.jsonl):
                return None
            if stamp is not None and self.digest_prefix and (not stamp.digest or prefix_digest(self.jsonl, stamp.offset) != stamp.digest):
                return None  # closes the tail check's blind spot: any edit before the offset
            cols: dict[str, np.ndarray] = {}
            paths: dict[str, Path] = {}
            for col, info in meta["columns"].items():
                path = self.dir / f"{self.name}.{meta['generation']}.{col}.npy"
                # a FIFO, directory or link out of the folder is refused, never opened (np.load would block on a FIFO)
                safe_json.require_regular(path, os.stat(path, follow_symlinks=False))
                a = np.load(path, mmap_mode="r", allow_pickle=False)
                if a.dtype.str != info["dtype"] or list(a.shape) != info["shape"]:
                    return None
                if col not in defer and _mapped_digest(path, a) != info["digest"]:
                    return None
                cols[col], paths[col] = a, path
            digests = {col: info["digest"] for col, info in meta["columns"].items()}
            return meta, Columns(cols, digests, paths, set(defer) & set(cols)), stamp
        except Exception:  # noqa: BLE001 - any damage (empty .npy: EOFError; wrong shapes: AttributeError) means "rebuild"
            return None

    def write(self, stamp: PrefixStamp | None, columns: dict[str, np.ndarray], extra: dict[str, Any]) -> bool:
        """Write a new generation for ``stamp`` (None without a JSONL; caller holds the
        JSONL's writer lock). False, writing nothing, when the JSONL no longer starts with
        the stamped bytes."""
        if (stamp is None) != (self.jsonl is None):
            raise ValueError("a stamp goes with a JSONL file, and only with one")
        if stamp is not None and not stamp.covers(self.jsonl):
            return False
        if stamp is not None and self.digest_prefix:
            stamp = replace(stamp, digest=prefix_digest(self.jsonl, stamp.offset) or "")
        self.dir.mkdir(parents=True, exist_ok=True)
        gen = _random.token_hex(6)
        info = {}
        for col, a in columns.items():
            a = np.ascontiguousarray(a)
            final = self.dir / f"{self.name}.{gen}.{col}.npy"
            fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=self.dir)
            try:
                with os.fdopen(fd, "wb") as fh:
                    np.save(fh, a, allow_pickle=False)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, 0o644)
                os.replace(tmp, final)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            info[col] = {"dtype": a.dtype.str, "shape": list(a.shape), "digest": column_digest(a)}
        fsync_dir(self.dir)
        meta = cache_seal.seal({"format": self.format, "generation": gen,
                                "stamp": None if stamp is None else asdict(stamp), "columns": info, **extra})
        atomic_write_text(self.meta_path, json.dumps(meta, ensure_ascii=False, separators=(",", ":")), cache=True)
        for old in self.dir.glob(f"{self.name}.*.npy"):
            if not old.name.startswith(f"{self.name}.{gen}."):
                if old.is_dir() and not old.is_symlink():  # damage where a column was: only a cache
                    shutil.rmtree(old)
                else:
                    old.unlink(missing_ok=True)
        return True
