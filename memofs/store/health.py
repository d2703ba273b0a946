"""What the commands run, run once as a check: the one store-health computation that
``memofs doctor`` (:func:`memofs.surfaces.cli._health`) and the MCP resource
``memofs://health`` share, so neither says "healthy" while recall or context fail
(issue 36 item 9), and the repair of the caches they found damaged (``doctor --fix``).

Caches (the index sidecars, ``derived.json``, the context cache, the cursor key) are
documented as rebuildable (``memofs/store/STORE.md``): damage there is a problem ``--fix``
repairs by removing the damaged entry, and the next command rebuilds it; the commands
themselves already read a damaged cache as missing.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from filelock import Timeout

from memofs.files import cache_seal
from memofs.files.sidecar import Sidecar
from memofs.store.project import Store, rehydrate

UNSEALED = "is not sealed by this user's cache key (forged, copied from another store or machine, or older); every start rebuilds it until `memofs doctor --fix` does"


def _sidecars(store: Store) -> list[Sidecar]:
    """The index sidecars present (memories, terms, embeddings), by their metadata files
    (only :meth:`~memofs.files.sidecar.Sidecar.unsealed` and ``remove`` are used: format-free)."""
    idx = store.paths.embeddings.parent
    if not idx.is_dir():
        return []
    return [Sidecar(None, idx, f.name.removesuffix(".sidecar.json"), 0)
            for f in sorted(idx.glob("*.sidecar.json")) if f.is_file() and not f.is_symlink()]


def unsealed_caches(store: Store) -> list[str]:
    """One line per index sidecar whose seal this user's key did not make (issue 36 item 7).
    ``memofs doctor`` runs it before its own load, which would rebuild the memories sidecar."""
    sides = _sidecars(store)
    if sides and cache_seal.key() is None:  # nothing verifies: one line naming the cause, not one per cache
        return [f"the cache key {cache_seal.key_path()} cannot be read or created; every start rebuilds the index "
                "caches (set MEMOFS_CACHE_DIR to a writable folder outside the project)"]
    return [f"{store.paths.rel(s.meta_path)} {UNSEALED}" for s in sides if s.unsealed()]


def cache_paths(store: Store) -> list[Path]:
    """Every rebuildable cache entry of ``store`` now present (links and non-files included)."""
    p = store.paths
    idx = p.embeddings.parent
    found = [idx / "derived.json", p.tmp / "context-cache.json", p.tmp / "cursor.key"]
    if idx.is_dir():
        found += sorted(f for f in idx.iterdir() if f.name.endswith((".sidecar.json", ".npy")))
    return [f for f in found if os.path.lexists(f)]


def _kind(path: Path) -> str | None:
    """None for a regular file, else what is there instead (a link counts: caches are never links)."""
    st = os.lstat(path)
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO, device or socket"


def command_problems(store: Store) -> list[str]:
    """One line per way the commands would fail now: the write lock cannot be taken, a
    cache path holds something other than a file, the recall state cannot be built (what
    ``recall`` and ``context`` load), the context cache or its cursor key cannot be read,
    or the configured learned model cannot be loaded."""
    from memofs.ranking.learned import load_model
    from memofs.store.cursor import FileContextCache

    problems: list[str] = []
    fix = "run `memofs doctor --fix` to rebuild it"

    def check(what: str, step) -> None:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - each failing step is one reported line
            problems.append(f"{what}: {' '.join(str(exc).split()) or type(exc).__name__}")

    def lock() -> None:
        try:
            with store.lock().acquire(timeout=0):
                pass
        except Timeout:
            pass  # held by a writer now: not a fault

    check(f"{store.paths.rel(store.paths.lock)} cannot be taken", lock)
    problems.extend(unsealed_caches(store))
    for f in cache_paths(store):
        kind = _kind(f)
        if kind is not None:
            problems.append(f"{store.paths.rel(f)} is {kind}, not a file; {fix}")
    check("recall cannot load the store", lambda: rehydrate(store))
    check("context cannot read its cache",
          lambda: FileContextCache(store.paths.tmp, clock=lambda: 0.0, lock=store.lock())._load())
    cfg = store.recall_config() if not problems else None
    if cfg is not None and cfg.learned_model is not None:
        check("recall cannot load its learned model", lambda: load_model(cfg.learned_model))
    return problems


def repair_caches(store: Store) -> list[str]:
    """Remove every cache entry that is not a regular file, every index sidecar that is not
    sealed by this user's key and a cursor key that cannot be read (a damaged sidecar that
    is a file needs nothing: the next load reads it as missing and writes it again); returns
    what was done, one line each."""
    from memofs.store.cursor import CursorError, FileContextCache

    done: list[str] = []
    p = store.paths
    with store.lock():
        for f in cache_paths(store):
            kind = _kind(f)
            if kind is None:
                continue
            if kind == "a directory":
                shutil.rmtree(f)
            else:
                f.unlink()
            done.append(f"removed {kind} at {p.rel(f)} (a cache; rebuilt by the next command)")
        for side in _sidecars(store):
            if side.unsealed():
                side.remove()
                done.append(f"removed the unsealed {p.rel(side.meta_path)} and its columns (rebuilt from the durable record)")
        try:
            FileContextCache(p.tmp, clock=lambda: 0.0)
        except CursorError:
            (p.tmp / "cursor.key").unlink()
            done.append(f"replaced the unreadable {p.rel(p.tmp / 'cursor.key')} (outstanding cursors expire)")
    return done
