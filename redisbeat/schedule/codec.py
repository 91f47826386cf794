"""The JSON form of a schedule: the flat dict stored in Redis, read back strictly.

``from_json`` names the field that is wrong (missing, unknown, wrong type), so a corrupt
definition in Redis is quarantined with a reason instead of crashing a beat.
"""

from __future__ import annotations

import dataclasses
import functools
from datetime import datetime
from typing import Any

from ..errors import InvalidSchedule
from .clock import parse_iso
from .cron import CRONTAB_FIELDS
from .kinds import Clocked, Cron, Crontab, Interval, Schedule, Solar

__all__ = ["from_json", "to_json"]

_KINDS = {cls: cls.__name__.lower() for cls in (Interval, Crontab, Cron, Clocked, Solar)}
#: Each schedule kind's name in JSON -> its class.
KIND_CLASSES: dict[str, type] = {kind: cls for cls, kind in _KINDS.items()}
_NUMBER = (int, float)
_ZONE = (str, type(None))
_POLICY = (str, type(None))
# The JSON types each kind's fields must have; every field is required but the optional ones.
_FIELD_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "interval": {"every": _NUMBER, "relative": (bool,)},
    "crontab": {
        **{name: (str,) for name in CRONTAB_FIELDS},
        "tz": _ZONE,
        "dst_gap": _POLICY,
        "dst_fold": _POLICY,
    },
    "cron": {"expr": (str,), "tz": _ZONE, "dst_gap": _POLICY, "dst_fold": _POLICY},
    "clocked": {"at": (str,)},
    "solar": {"event": (str,), "lat": _NUMBER, "lon": _NUMBER},
}
#: Fields left out of the JSON form while None (the deployment's default): a definition
#: stored before they existed reads back, and dumps, as it did.
_OPTIONAL = frozenset({"dst_gap", "dst_fold"})


def to_json(schedule: Schedule) -> dict[str, Any]:
    """The flat JSON dict for a schedule: ``{"kind": ..., <fields>}``."""
    kind = _KINDS.get(type(schedule))
    if kind is None:
        raise InvalidSchedule("schedule", f"unsupported schedule type {type(schedule).__name__}")
    data: dict[str, Any] = {"kind": kind}
    for field in dataclasses.fields(schedule):
        value = getattr(schedule, field.name)
        if value is None and field.name in _OPTIONAL:
            continue
        data[field.name] = value.isoformat() if isinstance(value, datetime) else value
    return data


def _parse_at(text: str) -> datetime:
    try:
        return parse_iso(text)
    except ValueError:
        raise InvalidSchedule("schedule.at", f"not an ISO 8601 datetime: {text!r}") from None


def from_json(data: Any) -> Schedule:
    """Build a schedule from its JSON dict; anything malformed raises InvalidSchedule.

    Schedules are immutable, and many entries share one (every 10 s, every hour): one
    built from the same fields is taken from a cache, without checking (or parsing a cron
    expression) again.
    """
    if not isinstance(data, dict):
        raise InvalidSchedule("schedule", f"expected a JSON object, got {type(data).__name__}")
    # The types are part of the key: 1 and True are equal, but only one is a valid "relative".
    key = tuple((k, type(v), v) for k, v in data.items())
    try:
        return _cached(key)
    except TypeError:  # a field that is not hashable (a list, say): not a valid one
        return _build(data)


@functools.lru_cache(maxsize=1024)
def _cached(key: tuple[tuple[str, type, Any], ...]) -> Schedule:
    return _build({k: v for k, _, v in key})


def _build(data: dict[str, Any]) -> Schedule:
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in _FIELD_TYPES:
        raise InvalidSchedule(
            "schedule.kind", f"unknown kind {kind!r}; expected one of {sorted(_FIELD_TYPES)}"
        )
    types = _FIELD_TYPES[kind]
    for key in data:
        if key != "kind" and key not in types:
            raise InvalidSchedule(f"schedule.{key}", f"unknown field for kind {kind!r}")
    values: dict[str, Any] = {}
    for name, allowed in types.items():
        if name not in data:
            if name in _OPTIONAL:
                continue
            raise InvalidSchedule(f"schedule.{name}", f"missing (required for kind {kind!r})")
        value = data[name]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise InvalidSchedule(f"schedule.{name}", f"must be {names}, got {value!r}")
        values[name] = value
    if kind == "clocked":
        values["at"] = _parse_at(values["at"])
    schedule: Schedule = KIND_CLASSES[kind](**values)
    return schedule
