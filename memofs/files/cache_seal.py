"""Seals on the store's derived caches (issue 36 item 7): a keyed MAC (HMAC-SHA256) over a
cache's metadata, whose column digests cover every row (texts, hashes, vectors) and whose
prefix stamp binds it to the durable record it mirrors.

Why a key, and why outside the project: a digest anyone can recompute does not stop a cache
rewritten through our own writer (one text changed) or edited in place (two vector rows
swapped), and a key kept in ``.memofs/`` travels with a cloned repository. The key is per
user and machine: ``$MEMOFS_CACHE_DIR/keys/cache-seal.key``, else
``~/.cache/memofs/keys/cache-seal.key``, 32 random bytes, mode 0600, created on first use.

A cache whose seal is missing or wrong is read as missing: rebuilt from the durable record,
never trusted and never an error (``memofs/store/STORE.md``: caches are rebuildable). Without
a usable key (no writable home, say) nothing verifies, so every start rebuilds: slower, never
wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any

KEY_BYTES = 32
FIELD = "seal"
"""The metadata field holding the seal (every other field is covered by it)."""

_keys: dict[Path, bytes] = {}  # one read of the key file per process and location


def key_path() -> Path:
    """Where this user's cache key lives (see the module doc)."""
    root = os.environ.get("MEMOFS_CACHE_DIR", "").strip()
    return (Path(root) if root else Path.home() / ".cache" / "memofs") / "keys" / "cache-seal.key"


def _read(path: Path) -> bytes | None:
    """The key at ``path`` when it is a regular file of :data:`KEY_BYTES` bytes, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        data = fh.read(KEY_BYTES + 1)
    return data if len(data) == KEY_BYTES else None


def _create(path: Path) -> bytes | None:
    """A new key published at ``path`` without a window: written 0600 to a temp file and
    hard-linked to its name, which fails if another process got there first (then theirs
    is the key). A damaged key file (wrong length, not a file) is replaced by rename."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".cache-seal.", dir=path.parent)  # mkstemp creates 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            if _read(path) is None:  # there but unusable: ours replaces it
                os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return _read(path)


def key() -> bytes | None:
    """This user's cache key, created on first use; None when it cannot be read or made."""
    path = key_path()
    if path not in _keys:
        try:
            got = _read(path) or _create(path)
        except OSError:
            got = None
        if got is None:
            return None
        _keys[path] = got
    return _keys[path]


def _mac(meta: dict[str, Any], k: bytes) -> str:
    body = {f: v for f, v in meta.items() if f != FIELD}
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hmac.new(k, text.encode("ascii"), hashlib.sha256).hexdigest()


def seal(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with its seal (unchanged, unsealed, when there is no key: it will not verify)."""
    k = key()
    return meta if k is None else {**meta, FIELD: _mac(meta, k)}


def verify(meta: dict[str, Any]) -> bool:
    """True when ``meta`` carries a seal this user's key made over exactly these fields."""
    k = key()
    got = meta.get(FIELD)
    if k is None or not isinstance(got, str):
        return False
    try:
        return hmac.compare_digest(got, _mac(meta, k))
    except (TypeError, ValueError):  # a field JSON cannot write back: not ours
        return False
