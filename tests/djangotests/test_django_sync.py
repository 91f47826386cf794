"""PeriodicTask rows reach Redis after commit; a reconcile fixes every difference."""

from __future__ import annotations

import io
import logging

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from polling import polled

from redisbeat import Entry
from redisbeat.schedule.kinds import Cron, Interval
from redisbeat_django import sync
from redisbeat_django.models import PeriodicTask, SyncStatus
from redisbeat_django.sync import reconcile
from redisbeat_testkit.ports import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def make(name: str = "report", **fields: object) -> PeriodicTask:
    values: dict[str, object] = {"task": "reports.daily", "kind": "interval", "every": 30}
    values.update(fields)
    return PeriodicTask.objects.create(name=name, **values)


def test_a_saved_row_is_pushed_after_commit(rb_store):
    row = make(args=[1, "a"], kwargs={"k": True}, queue="reports")
    stored = rb_store.get("report")
    assert stored.task == "reports.daily"
    assert stored.schedule == Interval(30.0)
    assert stored.args == (1, "a") and stored.kwargs == {"k": True}
    assert stored.options == {"queue": "reports"}
    assert stored.source == "django"
    row.refresh_from_db()
    assert row.sync_status == SyncStatus.SYNCED and row.synced_at is not None


def test_nothing_is_pushed_before_the_transaction_commits(rb_store):
    with transaction.atomic():
        make()
        assert "report" not in rb_store
    assert "report" in rb_store


def test_a_rolled_back_save_never_reaches_redis(rb_store):
    with pytest.raises(RuntimeError), transaction.atomic():
        make()
        raise RuntimeError("abort")
    assert "report" not in rb_store


def test_an_edit_is_pushed_and_a_description_change_keeps_the_next_run(rb_store):
    row = make(every=60)
    due = rb_store.state("report").next_run_at
    row.description = "daily numbers"
    row.save()
    assert rb_store.get("report").description == "daily numbers"
    assert rb_store.state("report").next_run_at == due
    row.every = 10
    row.save()
    assert rb_store.get("report").schedule == Interval(10.0)


def test_a_rows_dst_policies_are_pushed_and_empty_ones_are_the_deployments(rb_store):
    make("berlin", kind="cron", cron_expression="*/30 * * * *", timezone="Europe/Berlin")
    assert rb_store.get("berlin").schedule == Cron("*/30 * * * *", tz="Europe/Berlin")
    row = PeriodicTask.objects.get(name="berlin")
    row.dst_gap, row.dst_fold = "skip", "twice"
    row.save()
    assert rb_store.get("berlin").schedule == Cron(
        "*/30 * * * *", tz="Europe/Berlin", dst_gap="skip", dst_fold="twice"
    )


def test_a_renamed_row_replaces_its_old_entry(rb_store):
    row = make(name="old")
    row = PeriodicTask.objects.get(pk=row.pk)
    row.name = "new"
    row.save()
    assert "old" not in rb_store and "new" in rb_store


def test_deleting_a_row_removes_its_entry(rb_store):
    make().delete()
    assert "report" not in rb_store


def test_a_disabled_row_leaves_the_schedule(rb_store):
    row = make()
    assert rb_store.state("report").next_run_at is not None
    row.enabled = False
    row.save()
    assert rb_store.get("report").enabled is False
    assert rb_store.state("report").next_run_at is None


def test_bulk_update_create_and_delete_are_pushed(rb_store):
    PeriodicTask.objects.bulk_create(
        [
            PeriodicTask(name=f"t{i}", task="reports.daily", kind="interval", every=5)
            for i in range(5)
        ]
    )
    assert rb_store.names("django") == {f"t{i}" for i in range(5)}
    PeriodicTask.objects.filter(name__in=["t0", "t1"]).update(enabled=False)
    assert [rb_store.get(n).enabled for n in ("t0", "t1", "t2")] == [False, False, True]
    rows = list(PeriodicTask.objects.filter(name__in=["t2", "t3"]))
    for row in rows:
        row.every = 7
    PeriodicTask.objects.bulk_update(rows, ["every"])
    assert rb_store.get("t3").schedule == Interval(7.0)
    PeriodicTask.objects.filter(name="t4").update(name="t4-renamed")
    assert "t4" not in rb_store and "t4-renamed" in rb_store
    PeriodicTask.objects.filter(name__startswith="t").delete()
    assert rb_store.names("django") == set()
    assert set(PeriodicTask.objects.values_list("sync_status", flat=True)) <= {SyncStatus.SYNCED}


def test_a_name_owned_by_another_source_is_refused_and_left_alone(rb_store):
    theirs = Entry("nightly", "reports.daily", Interval(60.0), source="config")
    rb_store.upsert(theirs)
    row = make(name="nightly", every=5)
    row.refresh_from_db()
    assert row.sync_status == SyncStatus.ERROR
    assert "'name'" in row.sync_error and "'config'" in row.sync_error
    assert rb_store.get("nightly") == theirs.with_default_tz("UTC")
    row.delete()
    assert rb_store.get("nightly").source == "config"


def test_a_row_made_invalid_outside_the_form_keeps_its_last_good_version(rb_store):
    make(kind="cron", cron_expression="*/5 * * * *")
    PeriodicTask.objects.filter(name="report").update(cron_expression="0 0 31 2 *")
    row = PeriodicTask.objects.get(name="report")
    assert row.sync_status == SyncStatus.ERROR
    assert "field 'cron_expression': never fires" in row.sync_error
    assert rb_store.get("report").schedule == Cron("*/5 * * * *", tz="UTC")
    result = reconcile()
    assert "report" in result.rejected and "report" in rb_store


def test_reconcile_fixes_every_difference_and_leaves_other_sources_alone(rb_store, client):
    make(name="edited-by-sql", every=30)
    make(name="lost-from-redis", every=30)
    make(name="deleted-by-sql", every=30)
    rb_store.upsert(Entry("from-config", "x", Interval(5.0), source="config"))
    rb_store.upsert(Entry("from-api", "x", Interval(5.0)))
    from django.db import connection

    with connection.cursor() as cursor:
        table = PeriodicTask._meta.db_table
        cursor.execute(f"UPDATE {table} SET every = 45 WHERE name = 'edited-by-sql'")
        cursor.execute(f"DELETE FROM {table} WHERE name = 'deleted-by-sql'")
    rb_store.remove("lost-from-redis")
    result = reconcile()
    assert result.added == ["lost-from-redis"]
    assert result.updated == ["edited-by-sql"]
    assert result.removed == ["deleted-by-sql"]
    assert rb_store.get("edited-by-sql").schedule == Interval(45.0)
    assert {"from-config", "from-api"} <= set(rb_store.names("config") | rb_store.names("api"))
    assert reconcile().changed is False


def test_the_sync_command_prints_what_it_changed(rb_store):
    make(name="a")
    rb_store.remove("a")
    out, err = io.StringIO(), io.StringIO()
    call_command("redisbeat_sync", stdout=out, stderr=err)
    assert "added: a" in out.getvalue()
    assert "1 added, 0 updated, 0 removed, 0 unchanged, 0 not accepted" in out.getvalue()


def test_the_sync_command_fails_clearly_when_redis_is_down(own_store, own_redis):
    own_redis.stop()
    with pytest.raises(CommandError, match="Redis unavailable"):
        call_command("redisbeat_sync", stdout=io.StringIO())


def test_changes_made_while_redis_is_down_are_pushed_once_it_is_back(
    own_store, own_redis, monkeypatch
):
    monkeypatch.setattr(sync.retrier, "max_seconds", 0.5)
    monkeypatch.setattr(sync.retrier, "min_seconds", 0.2)
    make(name="kept", every=30)
    make(name="to-delete", every=30)
    own_redis.stop()
    edited = PeriodicTask.objects.get(name="kept")
    edited.every = 90
    edited.save()
    make(name="added-while-down", every=30)
    PeriodicTask.objects.get(name="to-delete").delete()
    pending = dict(PeriodicTask.objects.values_list("name", "sync_status"))
    assert pending == {"kept": SyncStatus.PENDING, "added-while-down": SyncStatus.PENDING}
    assert "Redis unavailable" in PeriodicTask.objects.get(name="kept").sync_error
    own_redis.start()
    wait_until(all_synced, timeout=20, what="rows synced after Redis came back")
    assert own_store.get("kept").schedule == Interval(90.0)
    assert own_store.names("django") == {"kept", "added-while-down"}


def test_row_validation_names_the_model_field():
    cases = [
        ({"kind": "interval", "every": None}, "every"),
        ({"kind": "cron", "cron_expression": "0 0 31 2 *"}, "cron_expression"),
        ({"kind": "cron", "cron_expression": "not cron"}, "cron_expression"),
        ({"kind": "crontab", "minute": "99"}, "minute"),
        ({"kind": "crontab", "timezone": "Mars/Olympus"}, "timezone"),
        ({"kind": "crontab", "dst_gap": "later"}, "dst_gap"),
        ({"kind": "cron", "cron_expression": "* * * * *", "dst_fold": "thrice"}, "dst_fold"),
        ({"kind": "clocked"}, "clocked_at"),
        ({"kind": "solar", "solar_event": "sunrise", "latitude": 50}, "longitude"),
        ({"kind": "solar", "solar_event": "sunrise", "latitude": 91, "longitude": 0}, "latitude"),
        ({"args": {"not": "a list"}}, "args"),
        ({"kwargs": [1]}, "kwargs"),
        ({"headers": [1]}, "headers"),
        ({"overlap": "sometimes"}, "overlap"),
        ({"jitter": -1}, "jitter"),
    ]
    for fields, field in cases:
        values: dict[str, object] = {"name": "r", "task": "t", "kind": "interval", "every": 5}
        values.update(fields)
        with pytest.raises(ValidationError) as info:
            PeriodicTask(**values).full_clean()
        assert field in info.value.message_dict, (fields, info.value.message_dict)


def test_a_beat_start_brings_redis_up_to_date(rb_store):
    from celery.beat import Service

    from redisbeat_django.signals import _beat_started
    from redisbeat_testkit.djangosite.celery_app import app

    make(name="a")
    rb_store.remove("a")
    _beat_started(sender=Service(app, scheduler_cls="redisbeat.RedisScheduler"))
    wait_until(lambda: "a" in rb_store, timeout=10, what="entry pushed at beat start")


def test_the_migrations_describe_the_models_exactly():
    # A model change without its migration would fail a user's migrate, not this suite.
    call_command("makemigrations", "redisbeat_django", "--check", "--dry-run", verbosity=0)


@polled
def all_synced() -> bool:
    """Every row synced (read while the background retry writes)."""
    return set(PeriodicTask.objects.values_list("sync_status", flat=True)) == {SyncStatus.SYNCED}


def test_the_background_retry_outlives_a_database_error_when_redis_comes_back(
    own_store, own_redis, monkeypatch, caplog
):
    monkeypatch.setattr(sync.retrier, "max_seconds", 0.5)
    monkeypatch.setattr(sync.retrier, "min_seconds", 0.2)
    make(name="kept", every=30)
    own_redis.stop()
    edited = PeriodicTask.objects.get(name="kept")
    edited.every = 90
    edited.save()
    assert PeriodicTask.objects.get(name="kept").sync_status == SyncStatus.PENDING
    table = PeriodicTask._meta.db_table
    with caplog.at_level(logging.WARNING, logger="redisbeat_django"):
        # The table is out of reach (as in a lock, a failover, a migration): the retry's
        # reconcile fails on the database, with Redis back.
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
        try:
            own_redis.start()
            wait_until(lambda: "failed on the database, will retry" in caplog.text, 20, "an error")
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    wait_until(all_synced, timeout=20, what="rows synced once the database answers")
    assert own_store.get("kept").schedule == Interval(90.0)
