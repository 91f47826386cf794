"""An entry off its schedule though enabled with runs left (its schedule key was deleted, a
score removed by hand) goes back on it when its definition is written again (a sync, an
import, ``enable``), and a beat finds a shard whose schedule is gone and puts every such
entry back; one that left its schedule for good (disabled, paused, spent, its runs done)
stays off it."""

from __future__ import annotations

import logging

import pytest
import redis
from test_dispatcher import Recorder, dispatcher, make_due

from redisbeat import Clocked, Entry, Interval, ScheduleStore
from redisbeat.schedule.clock import from_ms


def every(name: str, **kw: object) -> Entry:
    return Entry(name, "proj.ping", Interval(60), **kw)  # type: ignore[arg-type]


def scored(client: redis.Redis, store: ScheduleStore, name: str) -> bool:
    return client.zscore(store.keys.schedule, name) is not None


def test_writing_an_unscheduled_entry_again_puts_it_back_and_says_so_once(store, client, caplog):
    store.upsert_many(every(f"e{i}") for i in range(3))
    client.delete(store.keys.schedule)
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        assert store.upsert_many([every(f"e{i}") for i in range(3)]) == 3
    assert all(scored(client, store, f"e{i}") for i in range(3))
    lines = [r.getMessage() for r in caplog.records if "no due time in Redis" in r.getMessage()]
    assert len(lines) == 1 and "3 entries" in lines[0] and "'e0'" in lines[0]
    assert store.upsert(every("e0")) is False  # on its schedule again: nothing to write
    client.delete(store.keys.schedule)
    assert store.reschedule_lost() == 3 and store.reschedule_lost() == 0
    assert all(scored(client, store, f"e{i}") for i in range(3))


def test_enable_puts_back_an_enabled_entry_that_lost_its_due_time(store, client):
    store.upsert(every("e"))
    client.zrem(store.keys.schedule, "e")
    assert store.state("e").next_run_at is None
    store.enable("e")
    assert store.state("e").next_run_at is not None


def test_entries_off_their_schedule_for_good_stay_off_it(store, client):
    store.upsert(every("disabled", enabled=False))
    store.upsert(every("paused"))
    store.pause("paused")
    store.upsert(every("done", max_runs=1))
    at = from_ms(store.now_ms() - 1000)
    store.upsert(Entry("clocked", "proj.ping", Clocked(at)))
    store.upsert(every("one-off", one_off=True))
    make_due(client, store, "one-off", 10)
    make_due(client, store, "done", 10)
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert sorted(n for n, _, _ in rec.sent) == ["clocked", "done", "one-off"]
    names = ["disabled", "paused", "done", "clocked", "one-off"]
    # The spent index forgets other sources' entries after a while: the runs still say.
    client.delete(store.keys.spent)
    assert not any(scored(client, store, n) for n in names)
    assert store.upsert_many([store.get(n) for n in names]) == 0
    assert not any(scored(client, store, n) for n in names)


@pytest.mark.parametrize("shards", [1, 3])
def test_a_beat_puts_back_every_entry_of_a_shard_whose_schedule_is_gone(
    redis_server, prefix, sharded_stores, shards, caplog
):
    store: ScheduleStore = sharded_stores(redis_server.url(), prefix, shards)
    store.upsert_many(every(f"e{i}") for i in range(30))
    store.upsert(every("off", enabled=False))
    assert not store.schedule_lost()
    lost = store.keys.of_shard(shards - 1).schedule
    before = store.client.zcard(lost)
    store.client.delete(lost)
    assert store.schedule_lost()
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        dispatcher(store, Recorder()).tick()  # its first heartbeat does the housekeeping
    assert store.client.zcard(lost) == before and not store.schedule_lost()
    assert all(store.state(f"e{i}").next_run_at is not None for i in range(30))
    assert store.state("off").next_run_at is None
    assert sum("no due time in Redis" in r.getMessage() for r in caplog.records) == 1
