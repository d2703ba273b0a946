"""The system-under-test interface: ``ingest(scope, memories)``, ``recall(scope, ask, k)``,
``reset()``. A scope is one corpus (a project, a conversation, a haystack) exactly as the
harness asks each query against its own corpus (:meth:`Dataset.corpus_for`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memofs.files.records import Memory
from memofs_datasets.format import Dataset

UNSCOPED = "*"  # the scope name of unscoped queries (their corpus is every memory)


@dataclass(frozen=True)
class Ask:
    """One question put to a system: the text as asked, the task type and "now" (the
    query's ``as_of``, else the dataset's); foreign systems read the text alone."""

    id: str
    text: str
    task_type: str
    now: datetime


@dataclass(frozen=True)
class Recalled:
    """A system's answer, best first; ``scores`` (same length) when the system gives them."""

    ids: tuple[str, ...]
    scores: tuple[float, ...] | None = None


class AdapterConfigError(ValueError):
    """A malformed adapter configuration; ``str`` is one line naming the field."""

    def __init__(self, system: str, field: str, message: str, where: str = "") -> None:
        self.field = field
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}system {system!r}: {field}: {message}")


class System:
    """Base of every adapter. ``open`` gets the dataset before any ingest (the memofs
    pipeline reads its entity graph and source tree; foreign systems ignore it)."""

    name: str = "system"
    # ids a system may rank beside the memories (memofs ranks entity-graph nodes as
    # ``graph:<id>``): kept in its ranking as non-relevant items, never "unknown"
    extra_id_prefixes: tuple[str, ...] = ()

    def open(self, dataset: Dataset) -> None:  # noqa: B027 (optional hook)
        """Called once per dataset before the first ingest."""

    def ingest(self, scope: str, memories: Sequence[Memory]) -> None:
        raise NotImplementedError

    def recall(self, scope: str, ask: Ask, k: int) -> Recalled:
        raise NotImplementedError

    def reset(self) -> None:  # noqa: B027
        """Forget everything ingested (called between datasets)."""

    def index_bytes(self) -> int | None:
        """Bytes the system keeps for what it ingested (its files on disk); None when it
        keeps them only in memory."""
        return None

    def close(self) -> None:  # noqa: B027
        """Release processes, servers and folders."""


def folder_bytes(root: Path) -> int:
    """Total size of the regular files under ``root`` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0
