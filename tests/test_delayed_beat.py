"""Delayed one-off tasks, sent by a beat: the same claim protocol as periodic entries, one
beat's loop step in-process against real Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from test_dispatcher import Recorder, dispatcher, every

from redisbeat import ScheduleStore, occurrence_id
from redisbeat.schedule.clock import to_ms
from redisbeat.store.keys import DELAYED_MARK
from redisbeat_testkit.redis_server import RedisServer


@pytest.fixture(params=[1, 3], ids=["1 shard", "3 shards"])
def store(
    request: pytest.FixtureRequest, redis_server: RedisServer, prefix: str
) -> Iterator[ScheduleStore]:
    c = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    s = ScheduleStore(c, prefix=prefix, shards=request.param, delayed_retention=60)
    yield s
    s.close()


def test_a_due_delayed_task_is_sent_once_and_leaves_only_an_expiring_record(store, client):
    key = store.delay("proj.remind", (1,), countdown=0, key="signup-42", owner="u42")
    due = to_ms(store.get_delayed(key).eta)
    rec = Recorder()
    beat = dispatcher(store, rec)
    beat.tick()
    task_id = occurrence_id(store.keys.prefix, DELAYED_MARK + key, due)
    assert rec.sent == [(key, due, task_id)]
    beat.tick()
    assert len(rec.sent) == 1
    done = store.get_delayed(key)
    assert done is not None and (done.state, done.task_id, done.task) == (
        "sent",
        task_id,
        "proj.remind",
    )
    assert done.owner == "u42" and store.pending("u42") == []
    k = store.delayed_scripts(store.layout.home(key)).keys
    assert not client.exists(k.delayed, k.delayed_tasks, k.delayed_inflight)
    assert 0 < client.pttl(k.delayed_done(key)) <= 60_000


def test_delayed_tasks_and_periodic_entries_of_the_same_name_are_sent_apart(store, client):
    store.upsert(every("same"))
    due = store.now_ms() - 5
    client.zadd(store.shard("same").keys.schedule, {"same": due})
    store.delay("proj.other", key="same", countdown=0)
    rec = Recorder()
    dispatcher(store, rec).tick()
    ids = {task_id for _, _, task_id in rec.sent}
    assert sorted(name for name, _, _ in rec.sent) == ["same", "same"] and len(ids) == 2
    assert occurrence_id(store.keys.prefix, "same", due) in ids
    assert store.state("same").total_run_count == 1


def test_a_task_not_yet_due_is_left_and_the_beat_says_when_to_claim_again(store, client):
    store.delay("proj.later", key="later", countdown=30)
    rec = Recorder()
    wait = dispatcher(store, rec, heartbeat_seconds=100).tick()
    assert rec.sent == [] and 25 < wait <= 30.5
    assert store.get_delayed("later").state == "pending"


def test_a_broker_failure_hands_the_task_back_to_be_sent_later(store, client):
    store.delay("proj.t", key="retry", countdown=0)
    rec = Recorder()
    rec.fail = True
    beat = dispatcher(store, rec)
    beat.tick()
    assert store.get_delayed("retry").state == "pending"
    rec.fail = False
    beat.tick()
    assert [name for name, _, _ in rec.sent] == ["retry"]
    assert store.get_delayed("retry").state == "sent"


def test_a_corrupt_record_is_set_aside_and_the_others_are_sent(store, client):
    store.delay_many([{"task": "proj.t", "key": k, "countdown": 0} for k in ("bad", "good")])
    k = store.delayed_scripts(store.layout.home("bad")).keys
    client.hset(k.delayed_tasks, "bad", '{"task": 42}')
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert [name for name, _, _ in rec.sent] == ["good"]
    assert client.hexists(k.delayed_quarantine, "bad")
    assert store.get_delayed("bad") is None
