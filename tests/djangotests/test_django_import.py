"""manage.py redisbeat_import copies django-celery-beat's tasks into the table and Redis."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from io import StringIO
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_celery_beat import models as dcb

from redisbeat import Entry
from redisbeat.schedule.kinds import Clocked, Crontab, Interval, Solar
from redisbeat_django.conversion import IMPORTED_FIELDS, convert, zone_name
from redisbeat_django.importer import NOT_INSTALLED
from redisbeat_django.models import PeriodicTask, SyncStatus

pytestmark = pytest.mark.django_db(transaction=True)

AT = datetime(2031, 5, 4, 12, 30, tzinfo=timezone.utc)
START = datetime(2030, 1, 1, tzinfo=timezone.utc)
END = datetime(2032, 1, 1, tzinfo=timezone.utc)


def run(*args: str, differs: bool = False) -> list[str]:
    """The command's lines; without ``differs``, each without how its first send differs
    from django-celery-beat's (which depends on the release of it installed)."""
    out = StringIO()
    call_command("redisbeat_import", *args, stdout=out, no_color=True)
    lines = out.getvalue().splitlines()
    return lines if differs else [line.split(" (differs: ")[0] for line in lines]


def source(name: str, task: str = "reports.daily", **fields: Any) -> dcb.PeriodicTask:
    if not any(k in fields for k in ("interval", "crontab", "solar", "clocked")):
        fields["interval"] = dcb.IntervalSchedule.objects.create(every=30, period="seconds")
    return dcb.PeriodicTask.objects.create(name=name, task=task, **fields)


def every(n: int, period: str) -> dcb.IntervalSchedule:
    return dcb.IntervalSchedule.objects.create(every=n, period=period)


def crontab(**fields: Any) -> dcb.CrontabSchedule:
    return dcb.CrontabSchedule.objects.create(**fields)


@pytest.fixture
def sources() -> None:
    """One source task of every kind and option, and some that cannot be imported."""
    source(
        "interval",
        args='[1, "a"]',
        kwargs='{"k": true}',
        queue="reports",
        exchange="ex",
        routing_key="rk",
        priority=5,
        headers='{"h": "v"}',
        expire_seconds=60,
        description="every half minute",
    )
    source("fast", interval=every(500_000, "microseconds"))
    source(
        "paris",
        crontab=crontab(minute="0", hour="9", day_of_week="mon-fri", timezone="Europe/Paris"),
        start_time=START,
        expires=END,
    )
    sunrise = dcb.SolarSchedule.objects.create(
        event="sunrise", latitude=Decimal("40.712800"), longitude=Decimal("-74.006000")
    )
    source("sunrise", solar=sunrise)
    source("once", clocked=dcb.ClockedSchedule.objects.create(clocked_time=AT), one_off=True)
    source("off", enabled=False)
    source("celery.backend_cleanup", "celery.backend_cleanup", crontab=crontab(minute="0"))
    source("bad-json", kwargs="{'single': 'quotes'}")
    source("bad-minute", crontab=crontab(minute="99"))
    source("odd-micro", interval=every(1500, "microseconds"))


def test_every_schedule_kind_becomes_a_row_and_reaches_redis(sources, rb_store):
    run()
    row = PeriodicTask.objects.get(name="interval")
    assert (row.kind, row.every, row.period) == ("interval", 30, "seconds")
    assert row.args == [1, "a"] and row.kwargs == {"k": True}
    assert (row.queue, row.exchange, row.routing_key, row.priority) == ("reports", "ex", "rk", 5)
    assert row.headers == {"h": "v", "periodic_task_name": "interval"}
    assert row.expire_seconds == 60 and not row.expire_at_end
    assert row.description == "every half minute"
    stored = rb_store.get("interval")
    assert stored.schedule == Interval(30.0) and stored.source == "django"
    assert stored.args == (1, "a") and stored.kwargs == {"k": True}
    assert stored.options == {
        "queue": "reports",
        "exchange": "ex",
        "routing_key": "rk",
        "priority": 5,
        "headers": {"h": "v", "periodic_task_name": "interval"},
        "expires": 60,
    }

    fast = PeriodicTask.objects.get(name="fast")
    assert (fast.every, fast.period) == (500, "milliseconds")
    assert rb_store.get("fast").schedule == Interval(0.5)

    paris = PeriodicTask.objects.get(name="paris")
    assert (paris.kind, paris.timezone) == ("crontab", "Europe/Paris")
    assert (paris.start_at, paris.end_at) == (START, END)
    stored = rb_store.get("paris")
    assert stored.schedule == Crontab(
        minute="0", hour="9", day_of_week="mon-fri", tz="Europe/Paris"
    )
    assert (stored.start_at, stored.end_at) == (START, END)

    assert rb_store.get("sunrise").schedule == Solar("sunrise", 40.7128, -74.006)
    once = rb_store.get("once")
    assert once.schedule == Clocked(AT) and once.one_off
    assert not rb_store.get("off").enabled
    assert all(r.sync_status == SyncStatus.SYNCED for r in PeriodicTask.objects.all())


def test_each_task_gets_a_report_line_and_failures_are_not_saved(sources, rb_store):
    lines = run()
    # The rest of this message is Celery's crontab parser's.
    assert lines.pop(1).startswith("bad-minute: failed: field 'crontab.minute': invalid field '99'")
    assert lines == [
        "bad-json: failed: field 'kwargs': is not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        "celery.backend_cleanup: skipped: redisbeat's beat_schedule sync already provides it",
        "fast: imported",
        "interval: imported",
        "odd-micro: failed: field 'interval.every': 1500 microseconds is not a whole number "
        "of milliseconds, the smallest interval redisbeat schedules",
        "off: imported",
        "once: imported",
        "paris: imported",
        "sunrise: imported",
        "6 imported, 0 updated, 0 unchanged, 1 skipped, 3 failed",
    ]
    saved = set(PeriodicTask.objects.values_list("name", flat=True))
    assert saved == {"fast", "interval", "off", "once", "paris", "sunrise"}
    for name in ("bad-json", "bad-minute", "odd-micro", "celery.backend_cleanup"):
        assert name not in rb_store


def test_a_second_run_reports_everything_unchanged_and_writes_nothing(sources, rb_store):
    run()
    before = dict(PeriodicTask.objects.values_list("name", "updated_at"))
    with CaptureQueriesContext(connection) as queries:
        lines = run()
    writes = [q["sql"] for q in queries if q["sql"].startswith(("INSERT", "UPDATE", "DELETE"))]
    assert writes == []
    assert "interval: unchanged" in lines and "paris: unchanged" in lines
    assert lines[-1] == "0 imported, 0 updated, 6 unchanged, 1 skipped, 3 failed"
    assert dict(PeriodicTask.objects.values_list("name", "updated_at")) == before


def test_a_changed_source_task_is_updated_and_pushed(rb_store):
    task = source("report")
    run()
    task.interval = None
    task.crontab = crontab(minute="15", timezone="Asia/Tokyo")
    task.args = "[2]"
    task.save()
    assert run() == ["report: updated", "0 imported, 1 updated, 0 unchanged, 0 skipped, 0 failed"]
    row = PeriodicTask.objects.get(name="report")
    assert (row.kind, row.minute, row.timezone, row.every, row.args) == (
        "crontab",
        "15",
        "Asia/Tokyo",
        None,
        [2],
    )
    stored = rb_store.get("report")
    assert stored.schedule == Crontab(minute="15", tz="Asia/Tokyo") and stored.args == (2,)


def test_an_update_keeps_the_settings_only_redisbeat_has(rb_store):
    task = source("report")
    run()
    PeriodicTask.objects.filter(name="report").update(
        catch_up="skip", grace_seconds=5, overlap="buffer_one", jitter=2.5
    )
    task.description = "changed"
    task.save()
    assert run()[0] == "report: updated"
    row = PeriodicTask.objects.get(name="report")
    assert (row.description, row.catch_up, row.grace_seconds) == ("changed", "skip", 5)
    assert (row.overlap, row.jitter) == ("buffer_one", 2.5)
    stored = rb_store.get("report")
    assert (stored.description, stored.overlap, stored.jitter) == ("changed", "buffer_one", 2.5)


def test_a_dry_run_reports_but_writes_nothing(sources, rb_store):
    lines = run("--dry-run", "--disable-source")
    assert "interval: imported" in lines
    assert "django-celery-beat: would disable 5: fast, interval, once, paris, sunrise" in lines
    assert lines[-1] == (
        "6 imported, 0 updated, 0 unchanged, 1 skipped, 3 failed (dry run: nothing was written)"
    )
    assert not PeriodicTask.objects.exists()
    assert "interval" not in rb_store
    assert dcb.PeriodicTask.objects.get(name="interval").enabled


def test_disable_source_disables_the_imported_source_tasks_only(sources, rb_store):
    lines = run("--disable-source")
    assert "django-celery-beat: disabled 5: fast, interval, once, paris, sunrise" in lines
    enabled = set(dcb.PeriodicTask.objects.filter(enabled=True).values_list("name", flat=True))
    assert enabled == {"bad-json", "bad-minute", "odd-micro", "celery.backend_cleanup"}
    # The imported rows keep the state the source had before it was disabled.
    assert PeriodicTask.objects.get(name="interval").enabled
    assert rb_store.get("interval").enabled
    assert dcb.PeriodicTasks.last_change() is not None


def test_only_imports_the_named_tasks_and_reports_unknown_names(sources, rb_store):
    lines = run("--only", "paris", "--only", "nope")
    assert lines == [
        "nope: failed: no django-celery-beat task",
        "paris: imported",
        "1 imported, 0 updated, 0 unchanged, 0 skipped, 1 failed",
    ]
    assert list(PeriodicTask.objects.values_list("name", flat=True)) == ["paris"]


def test_strict_exits_non_zero_when_a_task_failed(rb_store):
    source("bad-json", kwargs="[")
    source("good")
    with pytest.raises(CommandError, match=r"1 task\(s\) could not be imported"):
        run("--strict")
    assert PeriodicTask.objects.filter(name="good").exists()
    source("other")
    dcb.PeriodicTask.objects.filter(name="bad-json").delete()
    assert run("--strict")[-1] == "1 imported, 0 updated, 1 unchanged, 0 skipped, 0 failed"


def test_a_name_redis_holds_for_another_source_is_reported(rb_store):
    rb_store.upsert(Entry("report", "reports.daily", Interval(10.0), source="config"))
    source("report")
    lines = run()
    assert lines[0] == "report: imported"
    assert lines[1].startswith("report: not in Redis yet: ")
    assert "'config'" in lines[1]
    assert rb_store.get("report").source == "config"
    assert run()[:2] == ["report: unchanged", lines[1]]


def test_without_django_celery_beat_installed_the_command_says_so(settings):
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django_celery_beat"]
    with pytest.raises(CommandError) as raised:
        run()
    assert str(raised.value) == NOT_INSTALLED
    assert NOT_INSTALLED == (
        "django-celery-beat is not installed (add 'django_celery_beat' to INSTALLED_APPS "
        "to import from it)"
    )


@pytest.mark.parametrize(
    ("tz", "name"),
    [
        (ZoneInfo("Europe/Paris"), "Europe/Paris"),
        (SimpleNamespace(zone="America/New_York"), "America/New_York"),  # a pytz zone
        ("Asia/Tokyo", "Asia/Tokyo"),
        (None, ""),
    ],
)
def test_zone_name_gives_the_iana_name_of_any_zone(tz, name):
    assert zone_name(tz) == name


def test_convert_writes_exactly_the_imported_columns():
    task = source("report")
    assert sorted(convert(task)) == sorted(IMPORTED_FIELDS)


def test_an_imported_task_sends_every_option_django_celery_beat_puts_on_its_messages(rb_store):
    from django_celery_beat.schedulers import ModelEntry

    from redisbeat_testkit.djangosite.celery_app import app as celery_app

    task = source(
        "paris-report",
        crontab=crontab(minute="0", hour="9", timezone="Europe/Paris"),
        queue="reports",
        exchange="ex",
        routing_key="rk",
        priority=3,
        headers='{"h": "v"}',
        expires=END,
    )
    theirs = ModelEntry(task, app=celery_app).options
    run()
    ours = rb_store.get("paris-report").options
    # The message expires when the schedule ends, as django-celery-beat's do.
    assert datetime.fromisoformat(ours["expires"]) == theirs["expires"] == END
    assert {k: v for k, v in ours.items() if k != "expires"} == {
        k: v for k, v in theirs.items() if k != "expires"
    }
    assert PeriodicTask.objects.get(name="paris-report").expire_at_end


def test_the_report_says_per_task_where_its_first_send_differs_from_django_celery_beat(
    rb_store,
):
    # Never run with a start time that passed: django-celery-beat sends it at once (it
    # back-dates the last run); redisbeat at the next occurrence. A task that ran 10 s ago
    # every 30 s: django-celery-beat next sends it 30 s after that run; redisbeat schedules
    # from the definition. A task that never ran and has no start time: the same both ways.
    now = datetime.now(timezone.utc)
    daily = crontab(minute="0", hour="4", timezone="UTC")
    source("backdated", crontab=daily, start_time=now - timedelta(days=2))
    source("ran", interval=every(30, "seconds"), last_run_at=now - timedelta(seconds=10))
    source("plain", interval=every(30, "seconds"))
    lines = {line.split(":")[0]: line for line in run(differs=True)}
    assert (
        "first sent at" in lines["backdated"]
        and "at once by django-celery-beat" in (lines["backdated"])
    ), lines["backdated"]
    assert "(differs: " in lines["ran"] and "by django-celery-beat" in lines["ran"], lines["ran"]
    assert "differs" not in lines["plain"], lines["plain"]
