"""``LiveStore``: a long-lived view of a store (the MCP server) that follows its files,
applying appended memories incrementally and rebuilding only when a file was rewritten."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memofs.files import safe_json
from memofs.files.jsonl import AppendCursor
from memofs.files.records import Memory
from memofs.store.directory import Clock, Store
from memofs.store.errors import StoreError
from memofs.store.lines import memory_from_row
from memofs.store.rehydrate import Rehydrated, rehydrate


class LiveStore:
    """A long-lived view (the MCP server) that follows the store's files, including writes
    by other processes. Lines appended to memories.jsonl are applied incrementally (parsed,
    embedded, added to the same Recaller; the graph is re-read when its files changed); the
    state is rebuilt from scratch only when memories.jsonl was rewritten (replaced, cut,
    edited: :class:`~memofs.files.jsonl.AppendCursor`) or an appended line repeats a known
    id with other content. Reads take no lock: they see complete lines only, so a reader
    waits on no writer at all."""

    def __init__(self, store: Store, *, embedder: Any = None, clock: Clock | None = None) -> None:
        self.store = store
        self.embedder = _LastEncode(embedder) if embedder is not None else None
        self.clock = clock or store.clock
        self._sig: tuple | None = None
        self._state: Rehydrated | None = None
        self._cursor = AppendCursor()
        self.full_loads = 0  # how many times the state was rebuilt from scratch

    def state(self) -> Rehydrated:
        sig = self.store.signature()
        if self._state is not None and sig == self._sig:
            return self._state
        data, whole = self._cursor.read(self.store.paths.memories)
        if self._state is None or whole or not self._apply(data, graph_changed=sig[1:3] != self._sig[1:3]):
            self._state = rehydrate(self.store, embedder=self.embedder, clock=self.clock)
            self.full_loads += 1
        elif sig[3:] != self._sig[3:]:  # core.md or notes.md changed: the phrase scan's texts
            self._state.recaller.set_phrase_sources(self.store.phrase_sources())
        self._sig = sig
        return self._state

    def _apply(self, data: bytes, graph_changed: bool) -> bool:
        """Add the memories of appended ``data`` to the state; False when only a full
        reload is right (a known id with other content: the later line wins in place)."""
        state = self._state
        assert state is not None
        rec = state.recaller
        path = self.store.paths.memories
        new: dict[str, Memory] = {}
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            try:
                row = safe_json.parse(raw, f"{path} (appended line)", expect=dict)
                m = memory_from_row(row, f"{path} (appended line)")
            except (safe_json.JSONFileError, StoreError):
                return False  # the full load reports it with its line number
            old = rec.memories.get(m.id)
            if old is not None:
                if old != m:
                    return False
                continue  # already loaded (the state was built after this append)
            new[m.id] = m
        if graph_changed:
            rec.graph = self.store.load_graph()
            rec.refresh_graph()
        if new:
            mems = list(new.values())
            rec.add(mems)  # its embedder (this view's) encodes them; remember's vector is reused
            state.memories.extend(mems)
            state.__dict__.pop("notes_head", None)  # the notes changed
        return True

    def remember(self, text: str, **kwargs: Any) -> Memory:
        return self.store.remember(text, embedder=self.embedder, **kwargs)


class _LastEncode:
    """An embedder that keeps the vectors of its last call, so the state picks up the
    vector ``remember`` just computed instead of encoding the text a second time."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self._last: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, texts: Sequence[str]) -> Any:
        import numpy as np

        texts = list(texts)
        todo = list(dict.fromkeys(t for t in texts if t not in self._last))
        fresh = dict(zip(todo, np.asarray(self.inner.encode(todo), dtype=np.float32))) if todo else {}
        known = {**self._last, **fresh}
        self._last = fresh
        return np.vstack([known[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
