"""Scheduling policies with a real beat: catch-up of every missed occurrence, max_runs,
and a pause that ends by itself, checked from the broker queue alone."""

from __future__ import annotations

import itertools
import json

import redis

from redisbeat import Entry, Interval, occurrence_id
from redisbeat.schedule.timing import from_ms, to_ms
from redisbeat_testkit.messages import Sent, read_queue
from redisbeat_testkit.ports import wait_until

PERIOD_MS = 500


def every(name: str, **kw: object) -> Entry:
    return Entry(name, "proj.ping", Interval(PERIOD_MS / 1000), **kw)  # type: ignore[arg-type]


def dues(got: list[Sent], name: str) -> list[int]:
    return sorted(s.due_ms for s in got if s.entry == name)


def test_a_real_beat_applies_catch_up_all_max_runs_and_a_pause_until_a_time(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    store.upsert_many(
        [
            every("all", catch_up="all"),
            every("once"),
            every("limited", max_runs=2),
            every("paused"),
        ]
    )
    first = int(store.client.zscore(store.keys.schedule, "all"))
    # No beat runs while several occurrences fall due: "all" sends each, "once" one for all.
    wait_until(lambda: store.now_ms() > first + 4 * PERIOD_MS, 10, "occurrences to be missed")
    queue = redis.Redis.from_url(redis_server.url(1), decode_responses=True)
    beats = beats_for(redis_server, prefix)
    beats.start(1)
    got: list[Sent] = []
    wait_until(lambda: got.extend(read_queue(queue)) or len(dues(got, "paused")) >= 2, 30, "sends")
    pause_at = store.now_ms()
    store.pause("paused", until=from_ms(pause_at + 3_000), note="maintenance")
    wait_until(
        lambda: (
            got.extend(read_queue(queue)) or any(d >= pause_at + 3_000 for d in dues(got, "paused"))
        ),
        30,
        "the paused entry to resume by itself",
    )
    got.extend(read_queue(queue))

    caught_up = dues(got, "all")
    assert caught_up[0] == first  # the oldest missed first, then each one after it
    assert all(b - a == PERIOD_MS for a, b in itertools.pairwise(caught_up))
    once = dues(got, "once")
    assert once[0] >= first + 4 * PERIOD_MS  # the missed ones coalesced into the last
    assert len(dues(got, "limited")) == 2 and store.state("limited").stopped == "max_runs"
    paused = dues(got, "paused")
    # Nothing due inside the pause (one claimed just before it may still go out).
    assert not [d for d in paused if pause_at + PERIOD_MS < d < pause_at + 3_000]
    assert any(pause_at + PERIOD_MS < d < pause_at + 3_000 for d in dues(got, "once"))
    wait_until(lambda: store.state("paused").paused is None, 5, "the pause to end")
    # The first send after the pause takes the pause off the run state: recorded when its
    # batch is finished, a moment after the message reached the queue.
    wait_until(
        lambda: "paused" not in json.loads(store.client.hget(store.keys.state, "paused")),
        10,
        "the send after the pause to clear it from the run state",
    )
    assert len({s.task_id for s in got}) == len(got)
    queue.close()


def test_a_real_beat_sends_a_backfill_under_the_entrys_own_ids_and_due_times(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    store.upsert(every("daily", catch_up="skip"))
    now = store.now_ms()
    dues = [to_ms(d) for d in store.backfill("daily", from_ms(now - 2_900), from_ms(now - 1))]
    assert len(dues) >= 5
    queue = redis.Redis.from_url(redis_server.url(1), decode_responses=True)
    beats_for(redis_server, prefix).start(2)
    got: list[Sent] = []
    wait_until(
        lambda: got.extend(read_queue(queue)) or set(dues) <= set(dues_of(got, "daily")),
        30,
        "the backfill",
    )
    backfilled = [s for s in got if s.due_ms in dues]
    assert sorted(s.due_ms for s in backfilled) == dues  # each once, by either beat
    assert {s.task_id for s in backfilled} == {occurrence_id(prefix, "daily", d) for d in dues}
    queue.close()


def dues_of(got: list[Sent], name: str) -> list[int]:
    return [s.due_ms for s in got if s.entry == name]
