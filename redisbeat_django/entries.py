"""Turn a PeriodicTask row into a :class:`redisbeat.Entry`, and map errors back to its fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from redisbeat import Entry
from redisbeat.errors import InvalidEntry, InvalidSchedule
from redisbeat.schedule.kinds import Clocked, Cron, Crontab, Interval, Schedule, Solar

#: The ``source`` of every entry the Django app owns.
SOURCE = "django"

PERIOD_SECONDS = {
    "days": 86400.0,
    "hours": 3600.0,
    "minutes": 60.0,
    "seconds": 1.0,
    "milliseconds": 0.001,
}

# Entry/schedule field (as named in InvalidEntry.field) -> model field.
_FIELDS = {
    "schedule.every": "every",
    "schedule.expr": "cron_expression",
    "schedule.tz": "timezone",
    "schedule.at": "clocked_at",
    "schedule.event": "solar_event",
    "schedule.lat": "latitude",
    "schedule.lon": "longitude",
    "grace": "grace_seconds",
    "options": "queue",
}
# The field that carries a schedule-wide error, per kind.
_MAIN_FIELD = {
    "interval": "every",
    "crontab": "minute",
    "cron": "cron_expression",
    "clocked": "clocked_at",
    "solar": "solar_event",
}


def form_field(row: Any, entry_field: str) -> str:
    """The model field an ``InvalidEntry.field`` of this row refers to."""
    if entry_field in _FIELDS:
        return _FIELDS[entry_field]
    if entry_field == "schedule":
        return _MAIN_FIELD.get(row.kind, "kind")
    if entry_field.startswith("schedule."):
        return entry_field.removeprefix("schedule.")
    return entry_field


def schedule_of(row: Any) -> Schedule:
    """The schedule a row describes; ``InvalidEntry`` names the missing or bad field."""
    name, kind = row.name or "?", row.kind
    tz = row.timezone or None
    dst = {"dst_gap": row.dst_gap or None, "dst_fold": row.dst_fold or None}
    if kind == "interval":
        if not row.every:
            raise InvalidEntry(name, "every", "is required for an interval schedule")
        if row.period not in PERIOD_SECONDS:
            raise InvalidEntry(name, "period", f"must be one of {sorted(PERIOD_SECONDS)}")
        return Interval(row.every * PERIOD_SECONDS[row.period])
    if kind == "crontab":
        return Crontab(
            minute=row.minute,
            hour=row.hour,
            day_of_week=row.day_of_week,
            day_of_month=row.day_of_month,
            month_of_year=row.month_of_year,
            tz=tz,
            **dst,
        )
    if kind == "cron":
        if not row.cron_expression.strip():
            raise InvalidEntry(name, "cron_expression", "is required for a cron schedule")
        return Cron(row.cron_expression.strip(), tz=tz, **dst)
    if kind == "clocked":
        if row.clocked_at is None:
            raise InvalidEntry(name, "clocked_at", "is required for a one-time schedule")
        return Clocked(
            timezone.make_aware(row.clocked_at)
            if timezone.is_naive(row.clocked_at)
            else row.clocked_at
        )
    if kind == "solar":
        for field in ("solar_event", "latitude", "longitude"):
            if getattr(row, field) in (None, ""):
                raise InvalidEntry(name, field, "is required for a solar schedule")
        return Solar(row.solar_event, float(row.latitude), float(row.longitude))
    raise InvalidEntry(name, "kind", f"unknown schedule kind {kind!r}")


def options_of(row: Any) -> dict[str, Any]:
    """Celery ``apply_async`` options: routing, priority, headers, expiry."""
    options: dict[str, Any] = {
        key: getattr(row, key) for key in ("queue", "exchange", "routing_key") if getattr(row, key)
    }
    if row.priority is not None:
        options["priority"] = row.priority
    if row.headers:
        if not isinstance(row.headers, dict):
            raise InvalidEntry(row.name, "headers", "must be a JSON object")
        options["headers"] = row.headers
    if row.expire_at_end and row.end_at is not None:
        options["expires"] = row.end_at.isoformat()
    elif row.expire_seconds:
        options["expires"] = row.expire_seconds
    return options


def to_entry(row: Any) -> Entry:
    """The entry a row stands for; raises ``InvalidEntry`` with the model field's name."""
    name = row.name or "?"
    try:
        schedule = schedule_of(row)
    except InvalidEntry:
        raise
    except InvalidSchedule as exc:
        raise InvalidEntry(name, exc.field, exc.message) from None
    if not isinstance(row.args, list):
        raise InvalidEntry(name, "args", 'must be a JSON array, e.g. [1, "a"]')
    if not isinstance(row.kwargs, dict):
        raise InvalidEntry(name, "kwargs", 'must be a JSON object, e.g. {"key": 1}')
    return Entry(
        name=row.name,
        task=row.task,
        schedule=schedule,
        args=row.args,
        kwargs=row.kwargs,
        options=options_of(row),
        enabled=row.enabled,
        start_at=_aware(row.start_at),
        end_at=_aware(row.end_at),
        one_off=row.one_off,
        catch_up=row.catch_up,
        grace=None if row.grace_seconds is None else float(row.grace_seconds),
        source=SOURCE,
        description=row.description,
        max_runs=row.max_runs,
        overlap=row.overlap,
        jitter=row.jitter or None,  # 0 is no jitter, stored as none (as an entry omits it)
    )


def _aware(value: datetime | None) -> datetime | None:
    return None if value is None else _as_aware(value)


def _as_aware(value: datetime) -> datetime:
    """Django with ``USE_TZ = False`` gives naive datetimes: they are in its time zone."""
    return value if timezone.is_aware(value) else timezone.make_aware(value)


def row_error(row: Any, exc: InvalidEntry) -> str:
    """The error of a row that ``to_entry`` refused, naming the model field."""
    return str(InvalidEntry(row.name, form_field(row, exc.field), exc.message))
