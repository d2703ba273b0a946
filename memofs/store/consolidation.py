"""Consolidating a store's entity graph (upstream ``consolidateMemory``; MCP
``memofs.consolidate``; facts sheet section 8, "Supersedes, retired and deprecated").

:meth:`memofs.graph.entity_graph.EntityGraph.consolidate` computes the plan; here it runs
under the store lock, and ``apply=True`` persists it (``apply=False`` is a preview that
writes nothing). Recall then skips the retired nodes' graph documents.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memofs.files.timestamps import iso
from memofs.graph.entity_graph import SUPERSEDES
from memofs.store.project import Store


def consolidate(store: Store, now: datetime, *, apply: bool = False) -> dict[str, Any]:
    """``{plan: {retiredNodes, retiredEdges, changed, now}, retirementsApplied, applied}``
    (upstream's result shape, without merges: this project's graph has no alias merges)."""
    with store.lock():
        graph = store.load_graph()
        result = graph.consolidate(now)
        if apply and result.changed:
            graph.save(store.paths.graph)
    edges = [{"from": s, "type": t, "to": d} for s, t, d in result.retired_edges]
    applied = apply and result.changed
    return {
        "plan": {"merges": [], "retiredNodes": list(result.retired_nodes), "retiredEdges": edges,
                 "changed": result.changed, "now": iso(now),
                 "supersedingEdgeType": SUPERSEDES},
        "mergesApplied": 0,
        "retirementsApplied": len(result.retired_nodes) + len(edges) if applied else 0,
        "applied": applied,
    }
