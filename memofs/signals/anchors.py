"""Code-anchor drift (spec "Post-scoring intelligence", item 1).

An anchor records a file path (relative to the project root) and the file's SHA-256 when
the memory was written. At recall time a memory is *stale* when any anchored file now
hashes differently or no longer exists; fusion then multiplies its score by the stale
penalty (0.5). Upstream has no anchor code; this follows the write-up.

Hashes are cached by ``(path, st_mtime_ns, st_size)``, so a recall re-reads only files
that changed since the last look.

Only regular files are ever read: the path is ``stat``-ed first, then opened with
``O_NONBLOCK`` and checked again with ``fstat`` (a FIFO swapped in between cannot block
the reader). A FIFO, directory, device or socket at an anchored path, or a file that
cannot be read, makes that one memory stale with a reason; it never fails the recall.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from memofs.files import secrets
from memofs.files.layout import STORE_DIR
from memofs.files.records import Anchor, InvalidInputError
from memofs.files.safe_json import NotRegularFileError, open_regular, require_regular


class AnchorPathError(InvalidInputError):
    """An anchor path that escapes the project root (``..``, absolute, or a symlink out)."""


def confine(root: Path, rel: str) -> Path:
    """``root / rel`` resolved, refusing anything outside ``root`` or inside the store;
    ``OSError`` (ELOOP) for a symbolic link loop, as opening one gives."""
    if not isinstance(rel, str) or "\x00" in rel:
        raise AnchorPathError(f"anchor path must be a string without NUL bytes: {secrets.shown(rel)}")
    if not rel or os.path.isabs(rel) or rel.startswith(("/", "\\")):
        raise AnchorPathError(f"anchor path must be relative to the project root: {secrets.shown(rel)}")
    if ".." in Path(rel).parts:
        raise AnchorPathError(f"anchor path must not contain '..': {secrets.shown(rel)}")
    root_r = root.resolve()
    try:
        full = (root_r / rel).resolve()
    except RuntimeError:  # Python 3.11's resolve() on a symlink loop (3.13 returns the path; opening it gives ELOOP)
        raise OSError(errno.ELOOP, "symbolic link loop", rel) from None
    if full != root_r and root_r not in full.parents:
        raise AnchorPathError(f"anchor path leaves the project root (symlink?): {secrets.shown(rel)}")

    store_dir = root_r / STORE_DIR
    if full == store_dir or store_dir in full.parents:
        raise AnchorPathError(f"anchor path must not point into {STORE_DIR}/: {secrets.shown(rel)}")
    return full


def hash_regular(path: Path) -> tuple[str, os.stat_result]:
    """SHA-256 of the regular file ``path`` and its ``fstat``; never blocks on a FIFO
    (:func:`memofs.files.safe_json.open_regular`, symlinks not followed: ``path`` is resolved).

    Raises :class:`NotRegularFileError` for anything but a regular file, ``FileNotFoundError``
    when it is gone."""
    fd, st = open_regular(path, follow_symlinks=False)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "rb", closefd=False) as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest(), st
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    """SHA-256 of a regular file (see :func:`hash_regular`)."""
    return hash_regular(path)[0]


@dataclass(frozen=True)
class Drift:
    """Why a memory is stale: which anchor, and whether its file changed, is gone, is not
    a regular file, cannot be read, or its path is refused (``detail`` says why)."""

    path: str
    change: str  # "modified" | "deleted" | "outside-root" | "not-regular" | "unreadable"
    detail: str = ""

    def __str__(self) -> str:
        if self.change == "not-regular":
            return f"{self.path} is not a regular file"
        if self.change == "unreadable":
            return f"{self.path} cannot be read ({self.detail})"
        if self.change == "outside-root":
            return f"{self.path} is not a valid anchor path ({self.detail})" if self.detail else f"{self.path} is outside the project root"
        return f"{self.path} {self.change} since the memory was written"


class AnchorChecker:
    """Compares anchors with the files under ``root`` (None: no tree, nothing is stale)."""

    def __init__(self, root: Path | str | None) -> None:
        self.root = Path(root) if root is not None else None
        self._cache: dict[tuple[str, int, int], str] = {}
        self.reads = 0

    def current_hash(self, rel: str) -> str | None:
        """The file's SHA-256 now, or None if it does not exist. Raises
        :class:`NotRegularFileError` (or another ``OSError``) for what cannot be hashed."""
        assert self.root is not None
        full = confine(self.root, rel)
        try:
            st = os.stat(full)
            require_regular(full, st)
            digest = self._cache.get((str(full), st.st_mtime_ns, st.st_size))
            if digest is None:
                digest, st = hash_regular(full)
                self.reads += 1
                self._cache[(str(full), st.st_mtime_ns, st.st_size)] = digest
        except (FileNotFoundError, NotADirectoryError):
            return None
        return digest

    def drift(self, anchors: tuple[Anchor, ...]) -> Drift | None:
        """The first drifted anchor, or None when every anchor still matches."""
        if self.root is None:
            return None
        for a in anchors:
            try:
                now = self.current_hash(a.path)
            except ValueError as exc:  # AnchorPathError, or a path Python refuses (NUL byte)
                return Drift(a.path, "outside-root", str(exc))
            except NotRegularFileError:
                return Drift(a.path, "not-regular")
            except OSError as exc:  # permissions, ELOOP (a symlink swapped in), I/O errors
                return Drift(a.path, "unreadable", exc.strerror or type(exc).__name__)
            if now is None:
                return Drift(a.path, "deleted")
            if now != a.sha256:
                return Drift(a.path, "modified")
        return None
