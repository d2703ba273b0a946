"""The store's errors: a store that is missing, malformed or cannot be written."""

from __future__ import annotations

class StoreError(RuntimeError):
    """A store that is missing, malformed or cannot be written."""


class StoreNotFoundError(StoreError):
    """No ``.memofs/`` directory under the project root."""
