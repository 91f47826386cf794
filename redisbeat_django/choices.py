"""The choices of PeriodicTask's columns, kept apart so the model module stays readable."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from redisbeat.schedule.kinds import SOLAR_EVENTS


class Kind(models.TextChoices):
    INTERVAL = "interval", _("Interval")
    CRONTAB = "crontab", _("Crontab fields")
    CRON = "cron", _("Cron string")
    CLOCKED = "clocked", _("Once, at a time")
    SOLAR = "solar", _("Solar event")


class Period(models.TextChoices):
    DAYS = "days", _("days")
    HOURS = "hours", _("hours")
    MINUTES = "minutes", _("minutes")
    SECONDS = "seconds", _("seconds")
    MILLISECONDS = "milliseconds", _("milliseconds")


class CatchUp(models.TextChoices):
    ONCE = "once", _("Send one run for the runs missed")
    SKIP = "skip", _("Skip missed runs")
    ALL = "all", _("Send every missed run, oldest first")


class Overlap(models.TextChoices):
    """What a run falling due does while the previous one still runs on a worker."""

    ALLOW = "allow", _("Send it anyway")
    SKIP = "skip", _("Skip it")
    BUFFER_ONE = "buffer_one", _("Send it when the previous run ends (at most one waits)")


class DstGap(models.TextChoices):
    SHIFT = "shift", _("Run when the clocks have gone forward")
    SKIP = "skip", _("No run that day")


class DstFold(models.TextChoices):
    ONCE = "once", _("Run once, before the clocks go back")
    TWICE = "twice", _("Run in both passes")


class SyncStatus(models.TextChoices):
    SYNCED = "synced", _("Synced")
    PENDING = "pending", _("Waiting for Redis")
    ERROR = "error", _("Not accepted")


SOLAR_CHOICES = [(e, e.replace("_", " ")) for e in sorted(SOLAR_EVENTS)]
