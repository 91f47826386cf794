"""PeriodicTask rows reach Redis after commit; a reconcile fixes every difference."""

from __future__ import annotations

import pytest
from django.db import transaction

from redisbeat.schedules import Interval
from redisbeat_django.models import PeriodicTask, SyncStatus

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
