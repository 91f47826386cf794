"""Delayed one-off tasks, the store's API: delay, replace, reschedule, cancel, list by owner,
and bad input, against real Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
import redis
from celery import Celery
from test_reshard import redisbeat_command

from redisbeat import InvalidEntry, ScheduleStore
from redisbeat.errors import RedisBeatError
from redisbeat.schedule.clock import MAX_MS, from_ms, to_ms
from redisbeat.schedule.delayed import Delay
from redisbeat.store.runner import Call
from redisbeat.store.scripts import CLAIM
from redisbeat_testkit.redis_server import RedisServer

UTC = timezone.utc


@pytest.fixture(params=[1, 4], ids=["1 shard", "4 shards"])
def store(
    request: pytest.FixtureRequest, redis_server: RedisServer, prefix: str
) -> Iterator[ScheduleStore]:
    c = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    s = ScheduleStore(c, prefix=prefix, shards=request.param)
    yield s
    s.close()


def in_seconds(store: ScheduleStore, seconds: float) -> datetime:
    return from_ms(store.now_ms() + int(seconds * 1000))


def claim_delayed(store: ScheduleStore, key: str, ahead_ms: int = 0) -> list[object]:
    """What a beat's claim on the key's shard takes (the beat's claim script, on the
    delayed schedule)."""
    k = store.delayed_scripts(store.layout.home(key)).keys
    keys = [k.delayed, k.delayed_tasks, k.delayed_inflight, k.delayed_tasks]
    reply = store.runner.run(Call(CLAIM, keys, ["beat", 30_000, 10, MAX_MS, ahead_ms]), "none")
    return list(reply[2::5])


def test_a_delay_by_countdown_reads_back_due_by_the_redis_clock(store):
    before = store.now_ms()
    key = store.delay("proj.remind", (7,), {"user": "u1"}, countdown=600, owner="u1")
    task = store.get_delayed(key)
    assert task is not None and len(key) == 32
    assert (task.key, task.task, task.args, task.kwargs, task.owner, task.state) == (
        key,
        "proj.remind",
        (7,),
        {"user": "u1"},
        "u1",
        "pending",
    )
    assert before + 600_000 <= to_ms(task.eta) <= store.now_ms() + 600_000


def test_a_celery_task_or_signature_is_delayed_with_its_arguments_and_options():
    app = Celery("delayapi", set_as_current=False)

    @app.task(name="proj.feed", shared=False)
    def feed(pet: str, amount: int = 1) -> None: ...

    by_task = Delay.of(feed, ("cat",), countdown=1)
    by_sig = Delay.of(feed.s("cat").set(queue="pets"), kwargs={"amount": 2}, countdown=1)
    assert (by_task.task, by_task.args) == ("proj.feed", ("cat",))
    assert (by_sig.task, by_sig.args, by_sig.kwargs, by_sig.options) == (
        "proj.feed",
        ("cat",),
        {"amount": 2},
        {"queue": "pets"},
    )


def test_delaying_again_under_a_key_replaces_the_pending_task_and_its_owner(store):
    eta = in_seconds(store, 60)
    store.delay("proj.a", key="order-1", eta=eta, owner="alice")
    store.delay("proj.b", key="order-1", eta=eta + timedelta(seconds=5), owner="bob")
    task = store.get_delayed("order-1")
    assert task is not None and (task.task, task.owner) == ("proj.b", "bob")
    assert store.pending("alice") == []
    assert [t.key for t in store.pending("bob")] == ["order-1"]


def test_reschedule_moves_a_pending_task_to_a_time_from_now_or_by_an_amount(store):
    eta = in_seconds(store, 3600)
    store.delay("proj.meal", key="meal", eta=eta, owner="pet")
    assert store.reschedule("meal", by=timedelta(hours=-2)) == eta - timedelta(hours=2)
    later = in_seconds(store, 7200)
    assert store.reschedule("meal", eta=later) == later
    moved = store.reschedule("meal", countdown=10)
    assert moved is not None and abs(to_ms(moved) - store.now_ms() - 10_000) < 1000
    assert [t.eta for t in store.pending("pet")] == [moved]
    assert store.reschedule("nothing-here", countdown=1) is None
    with pytest.raises(RedisBeatError, match="exactly one of eta, countdown and by"):
        store.reschedule("meal", countdown=1, by=timedelta(1))


def test_a_cancelled_task_is_gone_from_its_key_and_its_owners_list(store):
    store.delay("proj.cancel_order", key="order-2", countdown=600, owner="carol")
    assert store.cancel("order-2") is True
    assert store.get_delayed("order-2") is None and store.pending("carol") == []
    assert store.cancel("order-2") is False


def test_an_owners_tasks_come_in_due_order_page_by_page_ties_by_key(store):
    eta = in_seconds(store, 600)
    items = [{"task": "proj.t", "key": f"k{i:02d}", "owner": "dave", "eta": eta} for i in range(7)]
    items += [{"task": "proj.t", "key": "first", "owner": "dave", "eta": eta - timedelta(1)}]
    items += [{"task": "proj.t", "key": "other", "owner": "erin", "eta": eta}]
    store.delay_many(items)
    pages, after = [], None
    while page := store.pending("dave", limit=3, after=after):
        pages.append([t.key for t in page])
        after = page[-1]
    assert pages == [["first", "k00", "k01"], ["k02", "k03", "k04"], ["k05", "k06"]]


def test_cancel_owner_cancels_that_owners_pending_tasks_only(store):
    store.delay_many(
        [{"task": "proj.t", "owner": "frank", "countdown": 60 + i} for i in range(25)]
        + [{"task": "proj.t", "owner": "grace", "countdown": 60, "key": "kept"}]
    )
    assert store.cancel_owner("frank") == 25
    assert store.pending("frank") == []
    assert [t.key for t in store.pending("grace")] == ["kept"]


def test_a_task_a_beat_is_sending_can_no_longer_be_cancelled_or_moved(store):
    store.delay("proj.t", key="due", countdown=0, owner="hal")
    assert claim_delayed(store, "due") == ["due"]
    assert store.cancel("due") is False
    assert store.reschedule("due", countdown=60) is None
    task = store.get_delayed("due")
    assert task is not None and task.state == "sending"
    assert [t.state for t in store.pending("hal")] == ["sending"]


def test_a_task_claimed_ahead_of_its_time_is_decided_a_cancel_comes_too_late(store):
    # A beat claims up to redisbeat_claim_ahead_seconds before the due time; from then on
    # it sends the task at that time, and a cancel says it came too late.
    store.delay("proj.t", key="soon", countdown=5)
    assert claim_delayed(store, "soon", ahead_ms=10_000) == ["soon"]
    task = store.get_delayed("soon")
    assert task is not None and task.state == "sending"
    assert store.cancel("soon") is False
    assert store.get_delayed("soon") is not None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"eta": datetime(2030, 1, 1)}, "eta"),  # naive
        ({"eta": datetime(2030, 1, 1, tzinfo=UTC), "countdown": 5}, "eta"),
        ({}, "eta"),
        ({"countdown": -1}, "countdown"),
        ({"countdown": float("nan")}, "countdown"),
        ({"countdown": 1, "args": (object(),)}, "args"),
        ({"countdown": 1, "kwargs": {"x": {1, 2}}}, "kwargs"),
        ({"countdown": 1, "key": "k" * 201}, "key"),
        ({"countdown": 1, "owner": "o" * 201}, "owner"),
        ({"countdown": 1, "options": {"task_id": "mine"}}, "options"),
    ],
)
def test_bad_input_is_refused_naming_the_key_and_the_field(store, kwargs, field):
    with pytest.raises(InvalidEntry) as raised:
        store.delay("proj.t", **kwargs)
    assert raised.value.field == field


def test_delay_many_checks_every_item_before_writing_any(store):
    items = [
        {"task": "proj.t", "key": "good", "countdown": 60},
        {"task": "proj.t", "key": "bad", "countdown": 60, "when": "tomorrow"},
    ]
    with pytest.raises(InvalidEntry, match=r"'bad'.*'when'"):
        store.delay_many(items)
    assert store.get_delayed("good") is None


def test_the_command_lists_an_owners_tasks_and_cancels_by_key_or_owner(redis_server, prefix):
    url = redis_server.url()
    store = ScheduleStore(redis.Redis.from_url(url, decode_responses=True), prefix=prefix)
    store.delay_many(
        [{"task": "proj.t", "key": f"k{i}", "owner": "ivy", "countdown": 60 + i} for i in range(3)]
    )
    listed = redisbeat_command("--url", url, "--prefix", prefix, "pending", "ivy", "--json")
    assert [(t["state"], t["key"], t["task"]) for t in json.loads(listed.stdout)] == [
        ("pending", f"k{i}", "proj.t") for i in range(3)
    ]
    table = redisbeat_command("--url", url, "--prefix", prefix, "pending", "ivy").stdout
    assert all(f"k{i}" in table for i in range(3))
    cancelled = redisbeat_command("--url", url, "--prefix", prefix, "cancel", "k0", "nope")
    assert cancelled.returncode == 4  # one of the keys names no task
    assert cancelled.stdout.splitlines() == ["k0: cancelled", "nope: not cancelled (no such task)"]
    out = redisbeat_command("--url", url, "--prefix", prefix, "cancel", "--owner", "ivy").stdout
    assert out.splitlines() == ["ivy: 2 cancelled"]
    store.close()
