"""Delayed tasks from Django code: written with the transaction, pushed after it commits,
kept in the outbox while Redis is down and pushed in order when it is back."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

import pytest
from celery.beat import Service
from django.db import connection, transaction
from django.utils import timezone
from polling import once_unlocked, polled

from redisbeat import InvalidEntry, StoreError
from redisbeat.schedule.clock import to_ms
from redisbeat_django import delayed, outbox
from redisbeat_django.models import CallKind, DelayedCall
from redisbeat_django.signals import _beat_started
from redisbeat_django.tasks import reconcile as reconcile_task
from redisbeat_testkit.djangosite.celery_app import app
from redisbeat_testkit.ports import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quick_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox.retrier, "min_seconds", 0.1)
    monkeypatch.setattr(outbox.retrier, "max_seconds", 0.3)


@polled
def outbox_empty() -> bool:
    """No call waits (read while the background retry pushes)."""
    return not DelayedCall.objects.exists()


def soon(seconds: float) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def test_a_delay_reaches_redis_when_the_transaction_commits(rb_store):
    eta = soon(600)
    with transaction.atomic():
        key = delayed.delay("reports.daily", [7], {"full": True}, eta=eta, owner="user:7")
        assert rb_store.get_delayed(key) is None  # not before the commit
        assert DelayedCall.objects.count() == 1
    task = rb_store.get_delayed(key)
    assert task is not None and task.state == "pending"
    assert (task.task, task.args, task.kwargs, task.owner) == (
        "reports.daily",
        (7,),
        {"full": True},
        "user:7",
    )
    assert to_ms(task.eta) == to_ms(eta)
    assert not DelayedCall.objects.exists()


def test_a_rolled_back_transaction_delays_nothing(rb_store):
    with pytest.raises(RuntimeError), transaction.atomic():
        key = delayed.delay("reports.daily", countdown=60, key="order:1:expire")
        raise RuntimeError("the order was not saved")
    assert rb_store.get_delayed(key) is None
    assert not DelayedCall.objects.exists()
    assert rb_store.count_pending() == 0


def test_calls_in_one_transaction_are_pushed_once_in_order(rb_store):
    with transaction.atomic():
        delayed.delay("reports.daily", countdown=3600, key="meal", owner="pet:1")
        delayed.delay("reports.daily", countdown=3600, key="walk", owner="pet:1")
        delayed.reschedule("meal", by=timedelta(hours=-2))
        delayed.cancel("walk")
        delayed.delay("reports.daily", countdown=60, key="nap")
        queued = [
            item for item in connection.run_on_commit if item[1] is outbox._PUSHERS["default"]
        ]
        assert len(queued) == 1
    meal = rb_store.get_delayed("meal")
    assert meal is not None
    assert abs(to_ms(meal.eta) - to_ms(soon(3600 - 7200))) < 5000
    assert rb_store.get_delayed("walk") is None
    assert [t.key for t in rb_store.pending("pet:1")] == ["meal"]
    assert rb_store.get_delayed("nap") is not None
    assert not DelayedCall.objects.exists()


def test_calls_made_while_redis_is_down_are_pushed_in_order_once_it_is_back(
    own_store, own_redis, quick_retry, caplog
):
    delayed.delay("reports.daily", countdown=3600, key="reminder", owner="user:1")
    assert own_store.get_delayed("reminder") is not None
    with caplog.at_level(logging.WARNING, logger="redisbeat_django"):
        with transaction.atomic():
            delayed.delay("reports.daily", countdown=3600, key="invoice", owner="user:1")
            delayed.reschedule("invoice", by=timedelta(minutes=-30))
            delayed.cancel("reminder")
            delayed.delay("reports.daily", countdown=60, key="gone")
            delayed.cancel("gone")
            own_redis.stop()  # Redis goes away before the transaction commits
        assert "delayed calls wait for Redis" in caplog.text
    kept = once_unlocked(lambda: list(DelayedCall.objects.values_list("op", "key")), "the rows")
    assert kept == [
        (CallKind.DELAY, "invoice"),
        (CallKind.RESCHEDULE, "invoice"),
        (CallKind.CANCEL, "reminder"),
        (CallKind.DELAY, "gone"),
        (CallKind.CANCEL, "gone"),
    ]
    own_redis.start()
    wait_until(outbox_empty, 20, "the outbox pushed")
    invoice = own_store.get_delayed("invoice")
    assert invoice is not None
    assert abs(to_ms(invoice.eta) - to_ms(soon(3600 - 1800))) < 10_000
    assert own_store.get_delayed("reminder") is None
    assert own_store.get_delayed("gone") is None
    assert [t.key for t in own_store.pending("user:1")] == ["invoice"]


def test_a_countdown_runs_from_when_the_call_was_made(own_store, own_redis, quick_retry):
    own_redis.stop()
    key = delayed.delay("reports.daily", countdown=600)
    made = once_unlocked(lambda: DelayedCall.objects.get(key=key), "the row")
    # The call waited 5 minutes for Redis (as after an outage of that length).
    waited = made.made_at - timedelta(minutes=5)
    once_unlocked(lambda: DelayedCall.objects.filter(pk=made.pk).update(made_at=waited), "it")
    own_redis.start()
    wait_until(outbox_empty, 20, "the outbox pushed")
    task = own_store.get_delayed(key)
    assert task is not None
    assert abs(to_ms(task.eta) - to_ms(made.made_at + timedelta(minutes=5))) < 5000


def test_bad_calls_are_refused_where_they_are_made_and_name_the_field(rb_store):
    cases = [
        (lambda: delayed.delay("reports.daily", eta=datetime(2030, 1, 1)), "eta"),
        (lambda: delayed.delay("reports.daily", eta=soon(5), countdown=5), "eta"),
        (lambda: delayed.delay("reports.daily"), "eta"),
        (lambda: delayed.delay("reports.dialy", countdown=5), "task"),
        (lambda: delayed.delay("reports.daily", [object()], countdown=5), "args"),
        (lambda: delayed.delay("reports.daily", countdown=5, key="k" * 201), "key"),
        (lambda: delayed.delay("reports.daily", countdown=5, owner="o" * 201), "owner"),
        (lambda: delayed.reschedule("k", countdown=5, by=timedelta(1)), "eta"),
        (lambda: delayed.reschedule("k", by=5), "by"),
        (lambda: delayed.cancel(""), "key"),
    ]
    for call, field in cases:
        with pytest.raises(InvalidEntry) as raised:
            call()
        assert raised.value.field == field, (field, raised.value)
    assert not DelayedCall.objects.exists()


def test_without_on_commit_a_call_goes_to_redis_at_once(rb_store):
    with transaction.atomic():
        key = delayed.delay("reports.daily", countdown=600, owner="u", on_commit=False)
        assert rb_store.get_delayed(key) is not None
        moved = delayed.reschedule(key, by=timedelta(minutes=-5), on_commit=False)
        assert moved is not None and moved == rb_store.get_delayed(key).eta
        assert delayed.cancel(key, on_commit=False) is True
        assert delayed.cancel(key, on_commit=False) is False
        delayed.delay("reports.daily", countdown=600, owner="u", on_commit=False)
        assert delayed.cancel_owner("u", on_commit=False) == 1
    assert not DelayedCall.objects.exists()


def test_without_on_commit_an_outage_raises(own_store, own_redis):
    own_redis.stop()
    with pytest.raises(StoreError):
        delayed.delay("reports.daily", countdown=600, on_commit=False)
    assert not DelayedCall.objects.exists()


def test_a_call_refused_for_good_is_kept_with_its_error_and_the_rest_go_on(rb_store):
    rows = [
        DelayedCall(op=CallKind.DELAY, key="a", arguments={"task": "reports.daily", "at_ms": 1}),
        DelayedCall(op=CallKind.DELAY, key="b", arguments={"task": "", "at_ms": 1}),
        DelayedCall(op=CallKind.RESCHEDULE, key="a", arguments={"at": "tomorrow"}),
        DelayedCall(op=CallKind.DELAY, key="c", arguments={"task": "reports.daily", "at_ms": 2}),
    ]
    DelayedCall.objects.bulk_create(rows)
    pushed = outbox.push()
    assert (pushed.pushed, pushed.refused) == (2, 2)
    refused = dict(DelayedCall.objects.values_list("key", "error"))
    assert set(refused) == {"a", "b"}
    assert "task" in refused["b"] and "'at'" in refused["a"]
    assert {t.key for t in rb_store.upcoming()} == {"a", "c"}
    assert outbox.push().pushed == 0  # refused calls are not pushed again


def test_calls_left_by_a_process_that_died_are_pushed_by_a_beat_start_and_the_task(
    rb_store, quick_retry
):
    def left_behind(key: str) -> None:
        # Written and committed, but the process died before its push after commit.
        arguments = {"task": "reports.daily", "countdown_ms": 60_000}
        DelayedCall.objects.bulk_create([DelayedCall(op="delay", key=key, arguments=arguments)])

    left_behind("first")
    _beat_started(sender=Service(app, scheduler_cls="redisbeat.RedisScheduler"))
    wait_until(lambda: rb_store.get_delayed("first") is not None, 20, "pushed at beat start")
    wait_until(outbox_empty, 20, "the outbox emptied")
    # The beat start's push reads the outbox until it is empty: once it has ended, only the
    # task can find "second".
    busy = {"redisbeat-django-sync", f"redisbeat-django-{outbox.retrier.name}"}
    wait_until(lambda: not busy & {t.name for t in threading.enumerate()}, 20, "the start's work")
    left_behind("second")
    assert reconcile_task()["delayed_calls"] == 1
    assert rb_store.get_delayed("second") is not None


def test_a_push_counts_the_cancels_and_reschedules_that_came_too_late(rb_store):
    rb_store.delay("reports.daily", countdown=600, key="kept")
    rows = [
        DelayedCall(op=CallKind.CANCEL, key="never-delayed"),
        DelayedCall(op=CallKind.RESCHEDULE, key="never-delayed", arguments={"by": 1000}),
        DelayedCall(op=CallKind.RESCHEDULE, key="kept", arguments={"by": -1000}),
    ]
    DelayedCall.objects.bulk_create(rows)
    pushed = outbox.push()
    assert (pushed.pushed, pushed.too_late, pushed.refused) == (3, 2, 0)
    assert not DelayedCall.objects.exists()
