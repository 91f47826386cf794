"""PeriodicTask: one row per schedule entry, its schedule inline (no shared schedule rows).

This module knows nothing of Redis: a write to push is announced (``post_save``,
``post_delete``, :data:`bulk_written`), and :mod:`.signals` hands it to :mod:`.sync`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.dispatch import Signal
from django.utils.timezone import now
from django.utils.translation import gettext_lazy as _

from redisbeat.errors import InvalidEntry

from .choices import SOLAR_CHOICES, CatchUp, DstFold, DstGap, Kind, Overlap, Period, SyncStatus
from .entries import SOURCE, form_field, to_entry

# The choices are public here, where they have always been.
__all__ = [
    "SOLAR_CHOICES", "SYNC_FIELDS", "CallKind", "CatchUp", "DelayedCall", "DelayedTask",
    "DstFold", "DstGap", "Entry", "Kind", "Overlap", "Period", "PeriodicTask",
    "PeriodicTaskQuerySet", "SyncStatus", "bulk_written", "is_sync_write",
]  # fmt: skip


#: Columns only the sync writes; changing them alone is not an edit to push.
SYNC_FIELDS = frozenset({"sync_status", "sync_error", "synced_at"})

#: Sent (sender: PeriodicTask) after a bulk write that ``post_save`` does not see, with
#: ``pks`` and ``names`` of the rows to push, ``removed`` (names whose entries may have to
#: go) and ``using`` (the database alias).
bulk_written = Signal()


def is_sync_write(fields: Iterable[str] | None) -> bool:
    """Whether a write of these columns is the sync recording its own outcome.

    Such a write changes nothing Redis holds, so it is neither marked pending nor pushed
    (pushing it would push forever). ``None`` stands for every column, a plain ``save()``.
    """
    return fields is not None and SYNC_FIELDS.issuperset(fields)


class PeriodicTaskQuerySet(models.QuerySet["PeriodicTask"]):
    """Bulk writes announce themselves (:data:`bulk_written`), so they are pushed to Redis too."""

    def update(self, **kwargs: Any) -> int:
        if is_sync_write(kwargs):
            return super().update(**kwargs)
        pks = list(self.values_list("pk", flat=True))
        names = list(self.values_list("name", flat=True)) if "name" in kwargs else []
        count = super().update(**{**kwargs, "sync_status": "pending"})
        bulk_written.send(PeriodicTask, pks=pks, names=[], removed=names, using=self.db)
        return count

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[PeriodicTask]:
        created = super().bulk_create(objs, *args, **kwargs)
        names = [o.name for o in created]
        bulk_written.send(PeriodicTask, pks=[], names=names, removed=[], using=self.db)
        return created

    # bulk_update() goes through update(), so it is pushed too.


class PeriodicTask(models.Model):
    """A periodic task edited in the admin and pushed to Redis as a ``django`` entry."""

    name = models.CharField(_("name"), max_length=200, unique=True)
    task = models.CharField(_("task"), max_length=255, help_text=_("Registered Celery task name"))
    args = models.JSONField(_("positional arguments"), default=list, blank=True)
    kwargs = models.JSONField(_("keyword arguments"), default=dict, blank=True)

    queue = models.CharField(_("queue"), max_length=200, blank=True)
    exchange = models.CharField(_("exchange"), max_length=200, blank=True)
    routing_key = models.CharField(_("routing key"), max_length=200, blank=True)
    priority = models.PositiveSmallIntegerField(
        _("priority"), null=True, blank=True, validators=[MaxValueValidator(255)]
    )
    headers = models.JSONField(_("message headers"), default=dict, blank=True)
    expire_seconds = models.PositiveIntegerField(
        _("expires after (seconds)"),
        null=True,
        blank=True,
        help_text=_("A message no worker has started within this many seconds is discarded."),
    )
    expire_at_end = models.BooleanField(
        _("messages expire at the end"),
        default=False,
        help_text=_(
            "Each message expires at the end date: one no worker has started by then is "
            "discarded (as django-celery-beat does with its expires)."
        ),
    )

    kind = models.CharField(
        _("schedule"), max_length=16, choices=Kind.choices, default=Kind.INTERVAL
    )
    every = models.PositiveIntegerField(
        _("every"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    period = models.CharField(
        _("period"), max_length=12, choices=Period.choices, default=Period.SECONDS
    )
    minute = models.CharField(_("minute"), max_length=240, default="*")
    hour = models.CharField(_("hour"), max_length=96, default="*")
    day_of_week = models.CharField(_("day of week"), max_length=64, default="*")
    day_of_month = models.CharField(_("day of month"), max_length=124, default="*")
    month_of_year = models.CharField(_("month of year"), max_length=64, default="*")
    cron_expression = models.CharField(
        _("cron string"),
        max_length=200,
        blank=True,
        help_text=_("Five fields, or six with seconds first, e.g. '*/15 9-17 * * mon-fri'."),
    )
    timezone = models.CharField(
        _("time zone"),
        max_length=64,
        blank=True,
        help_text=_("For crontab and cron schedules; empty means the Celery time zone."),
    )
    dst_gap = models.CharField(
        _("time skipped by DST"),
        max_length=8,
        blank=True,
        choices=DstGap.choices,
        help_text=_(
            "A run whose wall time the spring-forward change skips (02:30 in Europe). "
            "Empty means the deployment's redisbeat_dst_gap (shift)."
        ),
    )
    dst_fold = models.CharField(
        _("time repeated by DST"),
        max_length=8,
        blank=True,
        choices=DstFold.choices,
        help_text=_(
            "A run whose wall time the fall-back change repeats. "
            "Empty means the deployment's redisbeat_dst_fold (once)."
        ),
    )
    clocked_at = models.DateTimeField(_("run at"), null=True, blank=True)
    solar_event = models.CharField(
        _("solar event"), max_length=24, blank=True, choices=SOLAR_CHOICES
    )
    latitude = models.DecimalField(
        _("latitude"), max_digits=9, decimal_places=6, null=True, blank=True
    )
    longitude = models.DecimalField(
        _("longitude"), max_digits=9, decimal_places=6, null=True, blank=True
    )

    enabled = models.BooleanField(_("enabled"), default=True, db_index=True)
    one_off = models.BooleanField(
        _("one-off"), default=False, help_text=_("Run once, then stay stored but never again.")
    )
    max_runs = models.PositiveIntegerField(
        _("at most this many runs"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Then it leaves the schedule, and its live state says why. Empty: no limit."),
    )
    start_at = models.DateTimeField(_("start at"), null=True, blank=True)
    end_at = models.DateTimeField(_("end at"), null=True, blank=True)
    catch_up = models.CharField(
        _("after downtime"), max_length=8, choices=CatchUp.choices, default=CatchUp.ONCE
    )
    overlap = models.CharField(
        _("while the previous run goes on"),
        max_length=10,
        choices=Overlap.choices,
        default=Overlap.ALLOW,
        help_text=_(
            "What a run falling due does while the previous one still runs on a worker. "
            "Needs the worker hook (redisbeat_track_runs); without it every run is sent."
        ),
    )
    jitter = models.FloatField(
        _("jitter (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text=_(
            "Delays each run by a stable amount up to this many seconds, never past the "
            "next run, so tasks due at the same time do not all start at once. Empty: none."
        ),
    )
    grace_seconds = models.PositiveIntegerField(
        _("grace (seconds)"),
        null=True,
        blank=True,
        help_text=_("The most a run may be late and still be sent; empty means the default."),
    )
    description = models.TextField(_("description"), blank=True)

    sync_status = models.CharField(
        _("sync"),
        max_length=8,
        choices=SyncStatus.choices,
        default=SyncStatus.PENDING,
        db_index=True,
        editable=False,
    )
    sync_error = models.TextField(_("sync error"), blank=True, editable=False)
    synced_at = models.DateTimeField(_("synced at"), null=True, blank=True, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("changed"), auto_now=True)

    objects = PeriodicTaskQuerySet.as_manager()

    class Meta:
        ordering = ("name",)
        verbose_name = _("periodic task")
        verbose_name_plural = _("periodic tasks")

    source: str = SOURCE
    #: The name this row had when it was loaded, so a rename removes the old entry.
    _loaded_name: str | None = None

    def __str__(self) -> str:
        return self.name

    @classmethod
    def from_db(cls, *args: Any, **kwargs: Any) -> Any:
        row = super().from_db(*args, **kwargs)
        row._loaded_name = row.__dict__.get("name")
        return row

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if not is_sync_write(update_fields):
            self.sync_status = "pending"  # until the push after commit succeeds
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "sync_status"}
        super().save(*args, **kwargs)

    def to_entry(self) -> Any:
        """This row as a :class:`redisbeat.Entry` (raises ``InvalidEntry``)."""
        return to_entry(self)

    def clean(self) -> None:
        super().clean()
        try:
            self.to_entry()
        except InvalidEntry as exc:
            raise ValidationError({form_field(self, exc.field): exc.message}) from None


class CallKind:
    """The calls the outbox holds (plain strings: compared and stored as they are)."""

    DELAY = "delay"
    RESCHEDULE = "reschedule"
    CANCEL = "cancel"
    CANCEL_OWNER = "cancel_owner"
    choices = (
        (DELAY, _("delay")),
        (RESCHEDULE, _("reschedule")),
        (CANCEL, _("cancel")),
        (CANCEL_OWNER, _("cancel owner")),
    )


class DelayedCall(models.Model):
    """A delayed-task call waiting to reach Redis: the outbox of :mod:`redisbeat_django.delayed`.

    Written in the caller's transaction, so it exists exactly when the caller's own writes
    do; pushed in ``id`` order once that commits, and deleted when Redis has taken it. A
    call Redis refuses for good keeps its row, with ``error``, and is not pushed again.
    """

    op = models.CharField(_("call"), max_length=16, choices=CallKind.choices)
    #: The task's key (the owner, for ``cancel_owner``).
    key = models.CharField(_("key or owner"), max_length=200)
    #: The call's arguments, checked when it was made (see :mod:`redisbeat_django.outbox`).
    arguments = models.JSONField(_("arguments"), default=dict, blank=True)
    made_at = models.DateTimeField(_("made"), default=now, editable=False)
    attempts = models.PositiveIntegerField(_("attempts"), default=0, editable=False)
    error = models.TextField(_("refused because"), blank=True, editable=False)

    class Meta:
        ordering = ("id",)
        verbose_name = _("delayed call waiting for Redis")
        verbose_name_plural = _("delayed calls waiting for Redis")

    def __str__(self) -> str:
        return f"{self.op} {self.key}"


class DelayedTask(models.Model):
    """No table: gives the admin's "Delayed tasks" page (read from Redis) its place,
    its name and its view and change permissions."""

    key = models.CharField(_("key"), max_length=200, primary_key=True)

    class Meta:
        managed = False
        default_permissions = ("view", "change")
        verbose_name = _("delayed task")
        verbose_name_plural = _("delayed tasks")


class Entry(models.Model):
    """No table: the admin's "Entries" page (every entry, whatever its source) and its
    permissions: view, and control (enable, pause, run now, backfill, release, ...)."""

    name = models.CharField(_("name"), max_length=200, primary_key=True)

    class Meta:
        managed = False
        default_permissions = ("view",)
        permissions = (("control_entry", "Can control entries (pause, run now, ...)"),)
        verbose_name = _("entry")
        verbose_name_plural = _("entries")
