"""Code-anchor drift (spec "Post-scoring intelligence", item 1).

An anchor records a file path (relative to the project root) and the file's SHA-256 when
the memory was written. At recall time a memory is *stale* when any anchored file now
hashes differently or no longer exists; fusion then multiplies its score by the stale
penalty (0.5). Upstream has no anchor code; this follows the write-up.

Hashes are cached by ``(path, st_mtime_ns, st_size)``, so a recall re-reads only files
that changed since the last look.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from memofs.records import Anchor


class AnchorPathError(ValueError):
    """An anchor path that escapes the project root (``..``, absolute, or a symlink out)."""


def confine(root: Path, rel: str) -> Path:
    """``root / rel`` resolved, refusing anything outside ``root``."""
    if not rel or os.path.isabs(rel) or rel.startswith(("/", "\\")):
        raise AnchorPathError(f"anchor path must be relative to the project root: {rel!r}")
    if ".." in Path(rel).parts:
        raise AnchorPathError(f"anchor path must not contain '..': {rel!r}")
    root_r = root.resolve()
    full = (root_r / rel).resolve()
    if full != root_r and root_r not in full.parents:
        raise AnchorPathError(f"anchor path leaves the project root (symlink?): {rel!r}")
    return full


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class Drift:
    """Why a memory is stale: which anchor, and whether its file changed or is gone."""

    path: str
    change: str  # "modified" | "deleted" | "outside-root"

    def __str__(self) -> str:
        return f"{self.path} {self.change} since the memory was written"


class AnchorChecker:
    """Compares anchors with the files under ``root`` (None: no tree, nothing is stale)."""

    def __init__(self, root: Path | str | None) -> None:
        self.root = Path(root) if root is not None else None
        self._cache: dict[tuple[str, int, int], str] = {}
        self.reads = 0

    def current_hash(self, rel: str) -> str | None:
        """The file's SHA-256 now, or None if it does not exist."""
        assert self.root is not None
        full = confine(self.root, rel)
        try:
            st = full.stat()
        except FileNotFoundError:
            return None
        key = (str(full), st.st_mtime_ns, st.st_size)
        digest = self._cache.get(key)
        if digest is None:
            digest = sha256_file(full)
            self.reads += 1
            self._cache[key] = digest
        return digest

    def drift(self, anchors: tuple[Anchor, ...]) -> Drift | None:
        """The first drifted anchor, or None when every anchor still matches."""
        if self.root is None:
            return None
        for a in anchors:
            try:
                now = self.current_hash(a.path)
            except AnchorPathError:
                return Drift(a.path, "outside-root")
            if now is None:
                return Drift(a.path, "deleted")
            if now != a.sha256:
                return Drift(a.path, "modified")
        return None
