"""Milliseconds since the Unix epoch: the one unit of time redisbeat stores and compares.

Redis scores and the Lua scripts count integer milliseconds; these convert at the edge.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import TypeGuard

__all__ = ["MAX_MS", "from_ms", "parse_iso", "time_to_live", "to_ms", "valid_ms"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


def to_ms(dt: datetime) -> int:
    """Milliseconds since the Unix epoch of an aware datetime (floored)."""
    if dt.utcoffset() is None:
        raise ValueError(f"expected a timezone-aware datetime, got naive {dt}")
    return (dt - _EPOCH) // _MS


#: The latest time redisbeat stores (9999-12-31T23:59:59.999Z, Python's last datetime). A
#: score or time in Redis outside 0..MAX_MS was not written by redisbeat.
MAX_MS = 253_402_300_799_999


def valid_ms(ms: object) -> TypeGuard[float]:
    """True for a time redisbeat could have written: ms since the epoch, up to MAX_MS."""
    return isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 <= ms <= MAX_MS


def from_ms(ms: int) -> datetime:
    """The aware UTC datetime ``ms`` milliseconds after the Unix epoch."""
    return _EPOCH + timedelta(milliseconds=ms)


def parse_iso(text: str) -> datetime:
    """An ISO 8601 time as ``datetime.fromisoformat`` reads it, a trailing ``Z`` for UTC
    included on every Python (3.10's does not read one); ValueError when it is not one."""
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


def time_to_live(expires: object, now: Callable[[], datetime]) -> float | None:
    """Seconds until a task's ``expires`` (seconds, an aware datetime or its ISO string),
    as Celery works them out; negative once past. None for what only Celery reads: a time
    without a UTC offset, a string ``parse_iso`` does not read."""
    if isinstance(expires, str):
        expires = _iso_time(expires)
    if isinstance(expires, datetime) and expires.utcoffset() is not None:
        return (expires - now()).total_seconds()
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        return expires
    return None


@lru_cache(maxsize=1024)
def _iso_time(text: str) -> datetime | None:
    """An entry's ISO ``expires`` read once, not for every message it sends."""
    try:
        return parse_iso(text)
    except ValueError:
        return None
