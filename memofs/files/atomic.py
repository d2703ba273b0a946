"""Crash-safe whole-file writes: temp file in the same directory, fsync, ``os.replace``,
directory fsync (the store's rule for files that are rewritten: graph, embeddings, manifest,
config, cursor key, context cache)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it survives a crash (POSIX)."""
    if hasattr(os, "O_DIRECTORY"):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str, *, cache: bool = False) -> None:
    """Temp file in the same directory + fsync + ``os.replace`` + directory fsync.
    ``cache``: ``path`` is a rebuildable cache, so a directory found there (which the
    rename cannot replace) is removed first rather than failing the command forever."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if cache and path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; store files are ordinary project files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
