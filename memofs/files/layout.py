"""Where a project's ``.memofs/`` store keeps each file (layout in :mod:`memofs.store.directory`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

STORE_DIR = ".memofs"


@dataclass(frozen=True)
class Paths:
    """Absolute paths of one store's files, each joined once (``remember`` reads several per
    call, and a pathlib join costs more than the append it locates)."""

    root: Path

    @cached_property
    def dir(self) -> Path:
        return self.root / STORE_DIR

    @cached_property
    def manifest(self) -> Path:
        return self.dir / "manifest.json"

    @cached_property
    def config(self) -> Path:
        return self.dir / "config.json"

    @cached_property
    def core(self) -> Path:
        return self.dir / "memory" / "core.md"

    @cached_property
    def memories(self) -> Path:
        return self.dir / "memory" / "memories.jsonl"

    @cached_property
    def events(self) -> Path:
        return self.dir / "events" / "memory-events.jsonl"

    @cached_property
    def graph(self) -> Path:
        return self.dir / "graph"

    @cached_property
    def embeddings(self) -> Path:
        return self.dir / "indexes" / "embeddings.jsonl"

    @cached_property
    def tmp(self) -> Path:
        return self.dir / "tmp"

    @cached_property
    def lock(self) -> Path:
        return self.dir / ".lock"

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()
