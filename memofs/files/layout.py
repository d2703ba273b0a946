"""Where a project's ``.memofs/`` store keeps each file (layout in :mod:`memofs.store.project`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STORE_DIR = ".memofs"


@dataclass(frozen=True)
class Paths:
    """Absolute paths of one store's files."""

    root: Path

    @property
    def dir(self) -> Path:
        return self.root / STORE_DIR

    @property
    def manifest(self) -> Path:
        return self.dir / "manifest.json"

    @property
    def config(self) -> Path:
        return self.dir / "config.json"

    @property
    def core(self) -> Path:
        return self.dir / "memory" / "core.md"

    @property
    def memories(self) -> Path:
        return self.dir / "memory" / "memories.jsonl"

    @property
    def events(self) -> Path:
        return self.dir / "events" / "memory-events.jsonl"

    @property
    def graph(self) -> Path:
        return self.dir / "graph"

    @property
    def embeddings(self) -> Path:
        return self.dir / "indexes" / "embeddings.jsonl"

    @property
    def tmp(self) -> Path:
        return self.dir / "tmp"

    @property
    def lock(self) -> Path:
        return self.dir / ".lock"

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()
