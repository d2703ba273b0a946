"""Store: one project's ``.memofs/`` memory (writes, loading, rehydration), context cursors
and the byte-budgeted context briefing."""
