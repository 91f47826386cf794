"""The worker hook's duplicate check, in-process against real Redis: which copy of a task id
runs, what a dropped copy leaves in the entry's state and history, how long marks last, and
a check that cannot reach Redis."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery import Celery
from test_dispatcher import Recorder, dispatcher, make_due

from redisbeat import ConfigurationError, Entry, Interval, ScheduleStore
from redisbeat.config import Config
from redisbeat.duplicates import Check, delivery_of, receipt_seconds
from redisbeat.store.receipts import Delivery, Receipt
from redisbeat_testkit.ports import free_port

HOLD_MS = 60_000


def sent_once(store: ScheduleStore, client: redis.Redis, name: str) -> tuple[int, str]:
    """An entry sent by a beat's tick (its run state written by the finish): due, task id."""
    store.upsert(Entry(name, "proj.ping", Interval(60)))
    make_due(client, store, name, 5)
    rec = Recorder()
    dispatcher(store, rec).tick()
    [(_, due, task_id)] = rec.sent
    return due, task_id


def copy(name: str, task_id: str, tag: str, **kw: Any) -> Delivery:
    fields: dict[str, Any] = {"lane": "periodic", "name": name, "task_id": task_id}
    fields.update(retries=0, due_ms=None, tag=tag, redelivered=False, worker="w1")
    return Delivery(**{**fields, **kw})


def test_the_first_copy_runs_and_a_later_one_is_dropped_and_recorded(store, client):
    store.history_size = 10
    due, task_id = sent_once(store, client, "e")
    assert store.receive(copy("e", task_id, "tag-a", due_ms=due), HOLD_MS) == Receipt(True)
    dropped = store.receive(copy("e", task_id, "tag-b", due_ms=due, worker="w2"), HOLD_MS)
    assert dropped == Receipt(False, "received", "w1")
    state = store.state("e")
    assert state.duplicates == 1 and state.last_duplicate is not None
    last = state.last_duplicate
    assert (last.task_id, last.worker, last.stage, last.first) == (task_id, "w2", "received", "w1")
    assert last.due is not None and int(last.due.timestamp() * 1000) == due
    assert state.last_outcome is None  # a copy is no outcome of the run
    store.run_started("e", task_id, due, "w1")
    store.run_ended("e", task_id, due, "w1", "succeeded")
    assert not store.receive(copy("e", task_id, "tag-c", worker="w3"), HOLD_MS).run
    runs = store.history("e")
    assert [(r.result, r.outcome) for r in runs] == [
        ("duplicate", "duplicate"),
        ("duplicate", "duplicate"),
        ("sent", "succeeded"),
    ]
    assert [r.reason for r in runs[:2]] == ["already ran on w1", "already received on w1"]
    assert store.state("e").duplicates == 2
    assert store.state("e").last_outcome.outcome == "succeeded"


@pytest.mark.parametrize(
    ("stage", "again", "runs"),
    [
        ("received", {"tag": "tag-a", "redelivered": True}, True),  # given back unrun
        ("received", {"tag": "tag-a"}, True),  # the same message: only a redelivery
        ("started", {"tag": "tag-a", "redelivered": True}, True),  # its worker died mid-run
        ("ended", {"tag": "tag-a", "redelivered": True}, False),  # it ran: the ack was lost
        ("received", {"tag": "tag-b"}, False),  # a copy
        ("started", {"tag": "tag-b", "redelivered": True}, False),  # a copy, given back
        ("received", {"tag": "", "redelivered": True}, True),  # no lasting tags: the flag
        ("received", {"tag": ""}, False),
        ("ended", {"tag": "tag-b", "retries": 1}, True),  # a retry is a run of its own
    ],
)
def test_a_redelivery_of_the_same_message_runs_unless_it_ran_and_a_copy_never_does(
    store, client, stage, again, runs
):
    due, task_id = sent_once(store, client, "e")
    assert store.receive(copy("e", task_id, "tag-a"), HOLD_MS).run
    if stage in ("started", "ended"):
        store.run_started("e", task_id, due, "w1")
    if stage == "ended":
        store.run_ended("e", task_id, due, "w1", "succeeded")
    assert store.receive(copy("e", task_id, **again), HOLD_MS).run is runs
    assert store.state("e").duplicates == (0 if runs else 1)


def test_a_mark_lasts_until_the_start_then_the_run_then_the_window(store, client):
    store.run_expiry_ms, store.duplicate_window_ms = 3_600_000, 600_000
    due, task_id = sent_once(store, client, "e")
    mark = store.shard("e").keys.seen(task_id)
    store.receive(copy("e", task_id, "tag-a"), HOLD_MS)
    assert HOLD_MS - 1000 < client.pttl(mark) <= HOLD_MS
    assert json.loads(client.get(mark))["stage"] == "received"
    store.run_started("e", task_id, due, "w1")
    assert 3_599_000 < client.pttl(mark) <= 3_600_000
    assert json.loads(client.get(mark)) | {"at": 0} == {
        "stage": "started",
        "tag": "tag-a",
        "worker": "w1",
        "at": 0,
    }
    store.run_ended("e", task_id, due, "w1", "succeeded")
    assert 599_000 < client.pttl(mark) <= 600_000
    store.run_started("e", task_id, due, "w1", retries=1)  # a retry's try has its own mark
    assert client.exists(store.shard("e").keys.seen(task_id, 1))
    store.duplicate_window_ms = 0  # the check is off: no mark is written
    store.run_started("e", "other", due, "w1")
    assert not client.exists(store.shard("e").keys.seen("other"))


def test_a_dropped_copy_of_a_delayed_task_is_counted_in_its_record(store, client):
    store.delay("proj.ping", countdown=0, key="invoice-1")
    done = store.keys.delayed_done("invoice-1")
    record = {"task_id": "t1", "due": 1, "at": 1, "beat": "b", "outcome": "sent"}
    client.set(done, json.dumps(record), px=50_000)  # what a beat's finish writes
    delayed = {"lane": "delayed", "name": "invoice-1", "task_id": "t1"}
    assert store.receive(copy(**delayed, tag="tag-a"), HOLD_MS).run
    store.mark_run("delayed", "invoice-1", "t1", 0, "start", "w1")
    assert json.loads(client.get(store.keys.seen("t1")))["stage"] == "started"
    assert not store.receive(copy(**delayed, tag="tag-b"), HOLD_MS).run
    assert 40_000 < client.pttl(done) <= 50_000  # kept as long as it was
    assert json.loads(client.get(done))["duplicates"] == 1
    store.mark_run("delayed", "invoice-1", "t1", 0, "end", "w1")
    assert json.loads(client.get(store.keys.seen("t1")))["stage"] == "ended"


def test_the_window_is_zero_or_at_least_two_leases_and_a_receipt_ends_before_redelivery():
    assert Config("redis://x", duplicate_window_seconds=0).duplicate_window_seconds == 0
    for bad in (-1, 9.9, "600", None):
        with pytest.raises(ConfigurationError, match="redisbeat_duplicate_window_seconds"):
            Config("redis://x", lease_seconds=5, duplicate_window_seconds=bad)  # type: ignore[arg-type]
    assert receipt_seconds(600, {}) == 600
    assert receipt_seconds(600, {"visibility_timeout": 300}) == 150
    assert receipt_seconds(600, {"visibility_timeout": 7200}) == 600


def message(headers: dict[str, Any], tag: Any = "tag-a", redelivered: bool = False) -> Any:
    return SimpleNamespace(
        headers={"task": "proj.ping", **headers},
        delivery_tag=tag,
        delivery_info={"redelivered": redelivered},
    )


def test_only_messages_a_beat_sent_are_checked():
    assert delivery_of(message({"id": "t1"}), "w") is None
    assert delivery_of(SimpleNamespace(headers=None), "w") is None
    entry = delivery_of(message({"id": "t1", "redisbeat_entry": "e", "redisbeat_due": 5}), "w")
    assert entry == Delivery("periodic", "e", "t1", 0, 5, "tag-a", False, "w")
    key = delivery_of(message({"id": "t1", "redisbeat_key": "k", "retries": 2}, 7, True), "w")
    assert key == Delivery("delayed", "k", "t1", 2, None, "", True, "w")


def test_a_check_that_cannot_reach_redis_runs_every_message_and_says_so_once(monkeypatch, caplog):
    app = Celery(set_as_current=False)
    app.conf.redisbeat_redis_url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens
    check = Check.for_app(app, "w1")
    ran: list[str] = []
    strategy = check.wrap(lambda message, *args: ran.append(message.headers["id"]), ())
    acked: list[Any] = []
    clock = [1000.0]
    check.clock = lambda: clock[0]
    with caplog.at_level(logging.WARNING, logger="redisbeat.duplicates"):
        for i in range(5):
            strategy(
                message({"id": f"t{i}", "redisbeat_entry": "e"}), None, acked.append, None, None
            )
        clock[0] += 10  # past RETRY_SECONDS: checked, and failing, again
        strategy(message({"id": "t9", "redisbeat_entry": "e"}), None, acked.append, None, None)
    assert ran == ["t0", "t1", "t2", "t3", "t4", "t9"] and acked == []
    assert check.unchecked == 6 and check.skipped == 0
    warnings = [r for r in caplog.records if "cannot check" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    check.store.close()


def test_a_check_drops_a_copy_with_the_ack_celery_gave_it(redis_server, prefix, store, client):
    due, task_id = sent_once(store, client, "e")
    app = Celery(set_as_current=False)
    app.conf.redisbeat_redis_url = redis_server.url()
    app.conf.redisbeat_key_prefix = prefix
    check = Check.for_app(app, "w1")
    ran: list[str] = []
    acks: list[tuple[Any, ...]] = []
    strategy = check.wrap(lambda message, *args: ran.append(message.delivery_tag), "errors")
    headers = {"id": task_id, "redisbeat_entry": "e", "redisbeat_due": due}
    for tag in ("tag-a", "tag-b"):
        strategy(message(headers, tag), None, lambda *a: acks.append(a), None, None)
    assert ran == ["tag-a"] and len(acks) == 1 and acks[0][1] == "errors"
    assert (check.skipped, check.unchecked) == (1, 0)
    assert store.state("e").duplicates == 1
    check.store.close()
