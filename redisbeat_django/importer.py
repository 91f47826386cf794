"""Import django-celery-beat's periodic tasks into redisbeat_django's PeriodicTask table.

Each source task becomes one row with its schedule inline. Rows are written in one
transaction with bulk writes, so their push to Redis happens once, after the commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from redisbeat.errors import ConfigurationError, RedisBeatError

from .conf import celery_app
from .conversion import IMPORTED_FIELDS, NotImportable, convert, describe_error
from .entries import to_entry
from .first_sends import difference
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


@dataclass(frozen=True)
class Outcome:
    """What happened to one source task."""

    name: str
    status: str  # one of STATUSES
    reason: str = ""
    #: How its sends will differ from django-celery-beat's ('' when they will not).
    differs: str = ""

    def __str__(self) -> str:
        text = f"{self.name}: {self.status}" + (f": {self.reason}" if self.reason else "")
        return text + (f" (differs: {self.differs})" if self.differs else "")


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
    app = celery_app()
    zone = str(app.conf.timezone or "UTC")
    with transaction.atomic():
        tasks = list(tasks.order_by("name"))
        existing = PeriodicTask.objects.in_bulk([t.name for t in tasks], field_name="name")
        created: list[PeriodicTask] = []
        changed: list[PeriodicTask] = []
        for task in tasks:
            outcome, row = _import_one(task, existing.get(task.name))
            if row is not None:
                outcome = _compared(outcome, task, row, app, zone)
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
        return Outcome(task.name, "failed", describe_error(exc)), None
    return Outcome(task.name, status), row


def _compared(outcome: Outcome, task: Any, row: PeriodicTask, app: Any, zone: str) -> Outcome:
    """The outcome, with how the task's first send will differ from django-celery-beat's."""
    try:
        entry = to_entry(row)
    except RedisBeatError:
        return outcome
    return replace(outcome, differs=difference(task, entry, app, timezone.now(), zone))


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
