"""How a django-celery-beat periodic task becomes the column values of a PeriodicTask row.

Pure translation, no database writes: :mod:`.importer` runs the import with it. Errors name
the source's fields, so they say what to fix in django-celery-beat.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from redisbeat.errors import RedisBeatError

# Every schedule column, at the value a row of another kind leaves it, so a task whose
# kind changed in the source carries nothing over from its old schedule.
_BLANK_SCHEDULE: dict[str, Any] = {
    "every": None,
    "period": "seconds",
    "minute": "*",
    "hour": "*",
    "day_of_week": "*",
    "day_of_month": "*",
    "month_of_year": "*",
    "cron_expression": "",
    "timezone": "",
    "clocked_at": None,
    "solar_event": "",
    "latitude": None,
    "longitude": None,
}
#: The columns an import writes; the rest (catch-up, grace, max runs, overlap, jitter: the
#: policies django-celery-beat has no fields for) keep what was set here.
IMPORTED_FIELDS = (
    "task",
    "kind",
    *_BLANK_SCHEDULE,
    *("args", "kwargs", "queue", "exchange", "routing_key", "priority", "headers"),
    *("expire_seconds", "expire_at_end", "enabled", "one_off", "start_at", "end_at"),
    "description",
)
_CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
# Our column -> the source field it came from, so a failure names what the user can fix.
_SOURCE_FIELDS = {
    "every": "interval.every",
    "period": "interval.period",
    **{name: f"crontab.{name}" for name in (*_CRONTAB_FIELDS, "timezone")},
    "clocked_at": "clocked.clocked_time",
    "solar_event": "solar.event",
    "latitude": "solar.latitude",
    "longitude": "solar.longitude",
    "start_at": "start_time",
    "end_at": "expires",
}


class NotImportable(RedisBeatError):
    """A source task cannot become a valid row; ``field`` names the source field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"field {field!r}: {message}" if field else message)
        self.field = field
        self.message = message


def convert(task: Any) -> dict[str, Any]:
    """The column values of a row for a django-celery-beat task (not yet validated)."""
    return {
        "task": task.task,
        **schedule_fields(task),
        "args": _json(task.args, "args", []),
        "kwargs": _json(task.kwargs, "kwargs", {}),
        "queue": task.queue or "",
        "exchange": task.exchange or "",
        "routing_key": task.routing_key or "",
        "priority": task.priority,
        # django-celery-beat names the task in every message's headers.
        "headers": {**_json(task.headers, "headers", {}), "periodic_task_name": task.name},
        "expire_seconds": task.expire_seconds,
        # ... and its expires is the message's expiry too, not only the schedule's end.
        "expire_at_end": task.expires is not None,
        "enabled": task.enabled,
        "one_off": task.one_off or task.clocked_id is not None,
        "start_at": task.start_time,
        "end_at": task.expires,
        "description": task.description or "",
    }


def schedule_fields(task: Any) -> dict[str, Any]:
    """The schedule columns for the one schedule a source task points at."""
    kinds = [k for k in ("interval", "crontab", "solar", "clocked") if getattr(task, f"{k}_id")]
    if len(kinds) != 1:
        found = ", ".join(kinds) or "none"
        raise NotImportable("", f"needs exactly one of interval, crontab, solar, clocked ({found})")
    kind = kinds[0]
    values = {**_BLANK_SCHEDULE, "kind": kind}
    if kind == "interval":
        values.update(_interval(task.interval.every, task.interval.period))
    elif kind == "crontab":
        values.update({name: getattr(task.crontab, name) for name in _CRONTAB_FIELDS})
        # Without DJANGO_CELERY_BEAT_TZ_AWARE its crontabs run in Celery's time zone.
        if getattr(settings, "DJANGO_CELERY_BEAT_TZ_AWARE", True):
            values["timezone"] = zone_name(task.crontab.timezone)
    elif kind == "solar":
        values.update(
            solar_event=task.solar.event,
            latitude=task.solar.latitude,
            longitude=task.solar.longitude,
        )
    else:
        values["clocked_at"] = task.clocked.clocked_time
    return values


def _interval(every: int, period: str) -> dict[str, Any]:
    if period != "microseconds":
        return {"every": every, "period": period}
    if every % 1000:
        raise NotImportable(
            "interval.every",
            f"{every} microseconds is not a whole number of milliseconds, "
            "the smallest interval redisbeat schedules",
        )
    return {"every": every // 1000, "period": "milliseconds"}


def zone_name(tz: Any) -> str:
    """The IANA name of a zoneinfo or pytz zone, or of a zone given by name."""
    if not tz:
        return ""
    if isinstance(tz, str):
        return tz
    return str(getattr(tz, "key", None) or getattr(tz, "zone", None) or tz)


def _json(text: str | None, name: str, empty: Any) -> Any:
    if text is None or not text.strip():
        return empty
    try:
        return json.loads(text)
    except ValueError as exc:
        raise NotImportable(name, f"is not valid JSON ({exc})") from None


def describe_error(exc: ValidationError) -> str:
    """A model validation error as ``field 'x': message``, with the source's field names."""
    parts = []
    for name, messages in exc.message_dict.items():
        text = " ".join(messages)
        parts.append(
            text if name == NON_FIELD_ERRORS else str(NotImportable(_source_field(name), text))
        )
    return "; ".join(parts)


def _source_field(name: str) -> str:
    return _SOURCE_FIELDS.get(name, name)
