"""Timestamps as every memofs file, surface and dataset writes them: ISO 8601, read back
only with an explicit timezone. The store writes UTC with a ``Z`` suffix (upstream's
``new Date().toISOString()`` shape, microseconds kept: :func:`iso`); a dataset keeps the
offset it was given (:func:`format_iso`, which is :func:`iso` for a UTC time)."""

from __future__ import annotations

from datetime import datetime, timezone


def iso(dt: datetime) -> str:
    """``2026-03-01T00:00:00Z``: UTC, ``Z`` suffix."""
    return dt.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def format_iso(dt: datetime) -> str:
    """ISO 8601 with ``Z`` for UTC, the offset otherwise (kept on a round trip)."""
    text = dt.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def parse_iso(value: object) -> datetime:
    """An ISO 8601 timestamp with a timezone (``Z`` accepted), or a ``datetime`` with one
    (TOML reads unquoted dates so). A value of another type raises TypeError, a string
    that is no timestamp or carries no timezone ValueError; both messages name the value."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from None
    else:
        raise TypeError(f"expected an ISO 8601 string, got {type(value).__name__}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"timestamp has no timezone (naive datetimes are ambiguous): {value!r}")
    return dt
