"""Timestamps as every memofs file and surface writes them: ISO 8601 in UTC with a ``Z``
suffix (upstream's ``new Date().toISOString()`` shape, microseconds kept), read back only
with an explicit timezone."""

from __future__ import annotations

from datetime import datetime, timezone


def iso(dt: datetime) -> str:
    """``2026-03-01T00:00:00Z``: UTC, ``Z`` suffix."""
    return dt.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def parse_iso(value: str) -> datetime:
    """An ISO timestamp with a timezone (``Z`` accepted); TypeError/ValueError otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError("timestamp has no timezone")
    return dt
