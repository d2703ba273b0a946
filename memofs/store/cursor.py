"""Expansion cursors and the cache of untruncated briefing lists (facts section 9).

:class:`ContextCache` is the LRU: at most 8 entries, each alive for 10 minutes from its
*creation* (not its last access); a hit moves an entry to most-recent, a put evicts the
oldest entries beyond 8. Time comes from an injected clock (epoch seconds; the CLI
passes ``time.time``).

A cursor is the unpadded base64url (30 characters) of 22 bytes:
``version (1) | cache key (8) | section index (1) | HMAC-SHA256(secret, first 10 bytes)[:12]``.
The cache key is 16 hex characters derived from the request, never the query itself, so
cursors are short (footers stay cheap inside the byte budget; MCP caps ``expand`` at 512
characters) and reveal nothing. A cursor whose MAC does not verify under this
cache's secret (tampered, or issued by another process) is refused.

The in-process cache draws a random 32-byte secret per process (MCP server). The CLI
runs one process per command, so :class:`FileContextCache` keeps the same LRU in
``.memofs/tmp/context-cache.json`` with a store-local secret in ``.memofs/tmp/cursor.key``
(mode 0600); the semantics (8 entries, TTL from creation, MAC check) are identical.
The key file is written to a temp file, fsynced and linked into place (never a partly
written key; a concurrent creator's key is never replaced); an empty, short or non-hex
key is refused with a one-line error. A damaged cache file or a wrong-typed entry is
discarded with a warning (it is only a cache). The request (``meta``: the query and what
came from it) is redacted before an entry is cached, so the cache file never holds a
string the secret gate would refuse; the lists are not scanned again: they are rendered
from stored memories, events and graph facts, which passed the gate when they were
written (scanning every cached item of a 100k-memory briefing cost ten recalls).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import logging
import math
import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memofs.files import safe_json, secrets
from memofs.files.atomic import atomic_write_text, fsync_dir
from memofs.files.records import InvalidInputError

log = logging.getLogger("memofs.cursor")
SECTIONS: tuple[str, ...] = ("entities", "recall", "recent", "notes")
MAX_ENTRIES = 8
TTL_SECONDS = 600.0
CURSOR_VERSION = 1
MAX_CURSOR_CHARS = 512
_MAC_BYTES = 12
_KEY_BYTES = 8
_CURSOR_BYTES = 1 + _KEY_BYTES + 1 + _MAC_BYTES
SECRET_BYTES = 32
MIN_SECRET_BYTES = 16
_HEX_KEY = re.compile(r"[0-9a-f]{16}")

TimeClock = Callable[[], float]


class CursorError(InvalidInputError):
    """A cursor that cannot be expanded; the message says why, in one line."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict: only the canonical unpadded encoding of some bytes is accepted (a changed
    padding bit in the last character would otherwise decode to the same bytes)."""
    if not isinstance(text, str) or not text or any(c not in _B64_ALPHABET for c in text):
        raise ValueError("not base64url")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64url(raw) != text:
        raise ValueError("not canonical base64url")
    return raw


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True)
class CacheEntry:
    """Untruncated lists of one compact briefing. ``lists`` maps section -> rendered items;
    ``meta`` holds the query, task type and what else expand reports."""

    key: str
    lists: dict[str, list[str]]
    meta: dict[str, Any]
    created_at: float


class ContextCache:
    """In-process LRU of :class:`CacheEntry` plus the cursor codec (random secret)."""

    def __init__(self, *, clock: TimeClock, max_entries: int = MAX_ENTRIES,
                 ttl_s: float = TTL_SECONDS, secret: bytes | None = None) -> None:
        if max_entries < 1 or ttl_s <= 0:
            raise ValueError("max_entries must be >= 1 and ttl_s > 0")
        self.clock = clock
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._secret = secret if secret is not None else os.urandom(32)
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()

    # -- LRU -----------------------------------------------------------------------
    def _load(self) -> None:  # hooks for the file-backed subclass
        pass

    def _save(self) -> None:
        pass

    def _expired(self, entry: CacheEntry, now: float) -> bool:
        return now - entry.created_at >= self.ttl_s

    def get(self, key: str) -> CacheEntry | None:
        """The live entry for ``key`` (moved to most-recent), or None; an expired one is evicted."""
        self._load()
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._expired(entry, self.clock()):
            del self._entries[key]
            self._save()
            return None
        self._entries.move_to_end(key)
        self._save()
        return entry

    def put(self, key: str, lists: dict[str, list[str]], meta: dict[str, Any]) -> CacheEntry:
        """Insert (or replace) at most-recent; evict the oldest beyond ``max_entries``.
        ``meta`` is redacted; ``lists`` hold stored (already gated) text and are kept as is."""
        self._load()
        entry = CacheEntry(key, {s: list(v) for s, v in lists.items()},
                           {k: _redact(v) for k, v in meta.items()}, self.clock())
        self._entries.pop(key, None)
        self._entries[key] = entry
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        self._save()
        return entry

    def keys(self) -> list[str]:
        """Keys, least-recent first (expired entries included until touched)."""
        self._load()
        return list(self._entries)

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    # -- cursors ---------------------------------------------------------------------
    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._secret, body, hashlib.sha256).digest()[:_MAC_BYTES]

    def cursor(self, key: str, section: str) -> str:
        """``base64url(version | key (8 bytes) | section index | HMAC[:12])``: 22 bytes, 30 characters."""
        if section not in SECTIONS:
            raise ValueError(f"unknown section {section!r}")
        raw_key = bytes.fromhex(key)
        if len(raw_key) != _KEY_BYTES:
            raise ValueError(f"cache key must be {2 * _KEY_BYTES} hex characters")
        body = bytes([CURSOR_VERSION]) + raw_key + bytes([SECTIONS.index(section)])
        return b64url(body + self._mac(body))

    def decode(self, cursor: object) -> tuple[str, str]:
        """``(key, section)`` of a cursor this cache issued; :class:`CursorError` otherwise."""
        if not isinstance(cursor, str) or not cursor.strip():
            raise CursorError("Expansion cursor is empty.")
        cursor = cursor.strip()
        if len(cursor) > MAX_CURSOR_CHARS:
            raise CursorError(f"Expansion cursor is malformed (longer than {MAX_CURSOR_CHARS} characters).")
        try:
            raw = b64url_decode(cursor)
        except (ValueError, binascii.Error):
            raise CursorError("Expansion cursor is malformed (not base64url).") from None
        if len(raw) != _CURSOR_BYTES:
            raise CursorError("Expansion cursor is malformed (wrong length).")
        if raw[0] != CURSOR_VERSION:
            raise CursorError("Expansion cursor is malformed (unknown version).")
        body, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        if not hmac.compare_digest(mac, self._mac(body)):
            raise CursorError("Expansion cursor was not issued by this memofs process or was tampered with.")
        index = body[-1]
        if index >= len(SECTIONS):  # only reachable with a valid MAC, i.e. never
            raise CursorError("Expansion cursor is malformed (unknown section).")
        return body[1:-1].hex(), SECTIONS[index]

    def resolve(self, cursor: object) -> tuple[CacheEntry, str]:
        """The cached entry and the cursor's section, or :class:`CursorError`."""
        key, section = self.decode(cursor)
        entry = self.get(key)
        if entry is None or entry.key != key:
            raise CursorError("Expansion cursor has expired or is unknown (entries live 10 minutes); run context again.")
        return entry, section


class FileContextCache(ContextCache):
    """The same LRU persisted in a JSON file (the CLI: one process per command).

    Each read-modify-write runs under ``lock`` (the store lock). The secret lives next to the cache
    file, created once with mode 0600."""

    def __init__(self, directory: Path, *, clock: TimeClock, lock: Any = None,
                 max_entries: int = MAX_ENTRIES, ttl_s: float = TTL_SECONDS) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file_lock = lock if lock is not None else contextlib.nullcontext()
        self.path = directory / "context-cache.json"
        self.warnings: list[str] = []
        key_path = directory / "cursor.key"
        if not key_path.exists():
            _create_key(key_path)
        super().__init__(clock=clock, max_entries=max_entries, ttl_s=ttl_s, secret=_read_key(key_path))

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            log.warning(message)
            self.warnings.append(message)

    def get(self, key: str) -> CacheEntry | None:
        with self._file_lock:
            return super().get(key)

    def put(self, key: str, lists: dict[str, list[str]], meta: dict[str, Any]) -> CacheEntry:
        with self._file_lock:
            return super().put(key, lists, meta)

    def _load(self) -> None:
        try:
            rows = safe_json.load_file(self.path, expect=list)
        except FileNotFoundError:
            rows = []
        except (safe_json.JSONFileError, OSError) as exc:  # a damaged cache is only a cache
            self._warn(f"discarded the damaged context cache ({exc})")
            rows = []
        entries: OrderedDict[str, CacheEntry] = OrderedDict()
        for i, row in enumerate(rows):
            entry = _entry_from_json(row)
            if entry is None:
                self._warn(f"{self.path}: discarded context-cache entry {i} (missing or wrong-typed fields)")
                continue
            entries[entry.key] = entry
        self._entries = entries

    def _save(self) -> None:

        rows = [{"key": e.key, "lists": e.lists, "meta": e.meta, "created_at": e.created_at} for e in self._entries.values()]
        atomic_write_text(self.path, json.dumps(rows, ensure_ascii=False), cache=True)


def _redact(value: Any) -> Any:
    """``value`` with every string the secret gate would refuse redacted (lists too)."""
    if isinstance(value, str):
        return secrets.redact(value)
    if isinstance(value, (list, tuple)):
        return [_redact(v) for v in value]
    return value


def _entry_from_json(row: object) -> CacheEntry | None:
    """A cached entry with every field type checked, or None."""
    if not isinstance(row, dict):
        return None
    key, lists, meta, created = row.get("key"), row.get("lists"), row.get("meta"), row.get("created_at")
    if not isinstance(key, str) or not _HEX_KEY.fullmatch(key) or not isinstance(meta, dict):
        return None
    if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created):
        return None
    if not isinstance(lists, dict) or any(
        s not in SECTIONS or not isinstance(v, list) or not all(isinstance(x, str) for x in v) for s, v in lists.items()
    ):
        return None
    return CacheEntry(key, lists, meta, float(created))


def _create_key(key_path: Path) -> None:
    """A new random key: temp file (0600) + fsync, then linked into place (no overwrite)."""

    fd, tmp = tempfile.mkstemp(prefix=".cursor.key.", suffix=".tmp", dir=key_path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(os.urandom(SECRET_BYTES).hex())
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, key_path)
        except FileExistsError:  # another process won the race; use its key
            pass
    finally:
        os.unlink(tmp)
    fsync_dir(key_path.parent)


def _read_key(key_path: Path) -> bytes:
    """The store's cursor secret; an empty, short or non-hex key file is refused."""
    fix = "delete it to issue new cursors"
    try:
        secret = bytes.fromhex(safe_json.read_bytes(key_path).decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise CursorError(f"{key_path}: not a hex key; {fix}") from None
    except OSError as exc:
        raise CursorError(f"{key_path}: cannot be read ({exc.strerror or type(exc).__name__}); {fix}") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise CursorError(f"{key_path}: key is empty or too short ({len(secret)} bytes, at least {MIN_SECRET_BYTES}); {fix}")
    return secret


def cache_key(*parts: object) -> str:
    """16 hex characters identifying one briefing request (query, task, store state)."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, default=str).encode()).hexdigest()[:16]
