"""Import django-celery-beat's periodic tasks into redisbeat_django's PeriodicTask table.

Each source task becomes one row with its schedule inline. Rows are written in one
transaction with bulk writes, so their push to Redis happens once, after the commit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.utils import timezone

from redisbeat.errors import ConfigurationError, RedisBeatError

from .models import PeriodicTask

SOURCE_APP = "django_celery_beat"
NOT_INSTALLED = (
    "django-celery-beat is not installed (add 'django_celery_beat' to INSTALLED_APPS "
    "to import from it)"
)
#: Source tasks left out, and why.
SKIPPED = {
    "celery.backend_cleanup": "redisbeat's beat_schedule sync already provides it",
}
STATUSES = ("imported", "updated", "unchanged", "skipped", "failed")

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
#: The columns an import writes; the rest (catch-up, grace) keep what was set here.
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


@dataclass(frozen=True)
class Outcome:
    """What happened to one source task."""

    name: str
    status: str  # one of STATUSES
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.status}" + (f": {self.reason}" if self.reason else "")


@dataclass
class ImportReport:
    """The outcome of every source task, and what the import did around them."""

    outcomes: list[Outcome] = field(default_factory=list)
    dry_run: bool = False
    #: Source tasks set to enabled=False by ``disable_source``.
    disabled: list[str] = field(default_factory=list)
    #: Imported rows Redis has not accepted (checked after the commit): name -> sync error.
    not_pushed: dict[str, str] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def summary(self) -> str:
        text = ", ".join(f"{self.count(s)} {s}" for s in STATUSES)
        return text + (" (dry run: nothing was written)" if self.dry_run else "")


def require_source() -> None:
    """Raise ``ConfigurationError`` unless django-celery-beat is an installed app."""
    if not apps.is_installed(SOURCE_APP):
        raise ConfigurationError(NOT_INSTALLED)


def import_tasks(
    only: Iterable[str] = (), *, dry_run: bool = False, disable_source: bool = False
) -> ImportReport:
    """Create or update a row per django-celery-beat task (only those named, if any)."""
    require_source()
    source = apps.get_model(SOURCE_APP, "PeriodicTask")
    wanted = sorted(set(only))
    tasks = source.objects.select_related("interval", "crontab", "solar", "clocked")
    tasks = tasks.filter(name__in=wanted) if wanted else tasks.all()
    report = ImportReport(dry_run=dry_run)
    with transaction.atomic():
        tasks = list(tasks.order_by("name"))
        existing = PeriodicTask.objects.in_bulk([t.name for t in tasks], field_name="name")
        created: list[PeriodicTask] = []
        changed: list[PeriodicTask] = []
        for task in tasks:
            outcome, row = _import_one(task, existing.get(task.name))
            report.outcomes.append(outcome)
            if outcome.status == "imported" and row is not None:
                created.append(row)
            elif outcome.status == "updated" and row is not None:
                changed.append(row)
        found = {t.name for t in tasks}
        for name in wanted:
            if name not in found:
                report.outcomes.append(Outcome(name, "failed", "no django-celery-beat task"))
        report.outcomes.sort(key=lambda o: o.name)
        done = [o.name for o in report.outcomes if o.status in STATUSES[:3]]
        if disable_source:
            report.disabled = sorted(
                source.objects.filter(name__in=done, enabled=True).values_list("name", flat=True)
            )
        if not dry_run:
            _write(created, changed)
            if report.disabled:
                _disable(source, report.disabled)
    if not dry_run:
        report.not_pushed = _not_pushed(done)
    return report


def _import_one(task: Any, row: PeriodicTask | None) -> tuple[Outcome, PeriodicTask | None]:
    if task.name in SKIPPED:
        return Outcome(task.name, "skipped", SKIPPED[task.name]), None
    try:
        values = convert(task)
    except NotImportable as exc:
        return Outcome(task.name, "failed", str(exc)), None
    if row is None:
        row, status = PeriodicTask(name=task.name, **values), "imported"
    elif all(getattr(row, key) == value for key, value in values.items()):
        return Outcome(task.name, "unchanged"), row
    else:
        for key, value in values.items():
            setattr(row, key, value)
        status = "updated"
    try:
        row.full_clean()
    except ValidationError as exc:
        return Outcome(task.name, "failed", _describe(exc)), None
    return Outcome(task.name, status), row


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


def _describe(exc: ValidationError) -> str:
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


def _write(created: list[PeriodicTask], changed: list[PeriodicTask]) -> None:
    if created:
        PeriodicTask.objects.bulk_create(created)
    if changed:
        now = timezone.now()
        for row in changed:
            row.updated_at = now  # bulk_update skips auto_now; it marks sync_status pending
        PeriodicTask.objects.bulk_update(changed, [*IMPORTED_FIELDS, "updated_at"])


def _disable(source: Any, names: list[str]) -> None:
    source.objects.filter(name__in=names).update(enabled=False)
    # A bulk update sends no signal; this is how django-celery-beat's beat learns of it.
    apps.get_model(SOURCE_APP, "PeriodicTasks").update_changed()


def _not_pushed(names: list[str]) -> dict[str, str]:
    """Rows Redis refused (or could not be reached for) when the commit pushed them."""
    rows = PeriodicTask.objects.filter(name__in=names).exclude(sync_error="")
    return dict(rows.values_list("name", "sync_error"))
