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
``digest_prefix`` closes it: it also keeps a BLAKE2b of the whole prefix and checks it on
read (memories.jsonl: tens of MB at 100k, hashed in tens of ms; embeddings.jsonl, hundreds
of MB, keeps the tail check only).

Damage: each column's SHA-256 digest is kept in the metadata and checked on read, so a
flipped byte or a truncated ``.npy`` is rebuilt, never trusted. Forgery (issue 36 item 7):
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

import hashlib
import json
import os
import secrets as _random
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

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
    digest: str = ""  # BLAKE2b of the whole prefix, when the sidecar keeps one ("" = tail check only)

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
    text = blob.tobytes().decode("utf-8")
    if len(ends) and (int(ends[-1]) != len(text) or (np.diff(ends) < 0).any() or ends[0] < 0):
        raise ValueError("string ends do not match the joined text")
    e = ends.tolist()
    return [text[a:z] for a, z in zip([0] + e[:-1], e)]


def sha256_column(texts: Iterable[str]) -> np.ndarray:
    """The :func:`~memofs.files.records.text_sha256` of each text as one :data:`SHA_DTYPE`
    array: the memories and vector sidecars keep their hashes so, and a start compares
    them with numpy instead of hashing every text."""
    return np.array([text_sha256(t) for t in texts], dtype=SHA_DTYPE).reshape(-1)


def prefix_digest(path: Path, offset: int) -> str | None:
    """BLAKE2b of ``path``'s first ``offset`` bytes, read in 1 MiB blocks; None when shorter or missing."""
    h = hashlib.blake2b(digest_size=16)
    try:
        fd, _ = safe_json.open_regular(path)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        left = offset
        while left:
            block = fh.read(min(left, 1 << 20))
            if not block:
                return None
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def _digest(a: np.ndarray) -> str:
    # SHA-256, not BLAKE2b: OpenSSL's runs on the CPU's SHA extensions, about twice as fast
    # here on the vector matrices every start now hashes (issue 36 item 7, memofs_eval.bench.seal_cost)
    return hashlib.sha256(memoryview(np.ascontiguousarray(a)).cast("B")).hexdigest()


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

    def read(self) -> tuple[dict[str, Any], dict[str, np.ndarray], PrefixStamp | None] | None:
        """``(metadata, columns memory-mapped, stamp)`` when the sidecar is intact, sealed by
        this user's key and covers a prefix of the JSONL as it is now (stamp None without a
        JSONL); None when missing, damaged, unsealed, stale or of another format."""
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
            for col, info in meta["columns"].items():
                path = self.dir / f"{self.name}.{meta['generation']}.{col}.npy"
                # a FIFO, directory or link out of the folder is refused, never opened (np.load would block on a FIFO)
                safe_json.require_regular(path, os.stat(path, follow_symlinks=False))
                a = np.load(path, mmap_mode="r", allow_pickle=False)
                if a.dtype.str != info["dtype"] or list(a.shape) != info["shape"]:
                    return None
                if _digest(a) != info["digest"]:
                    return None
                cols[col] = a
            return meta, cols, stamp
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
            info[col] = {"dtype": a.dtype.str, "shape": list(a.shape), "digest": _digest(a)}
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
