"""A worker started before a reshard writes its runs where the entries live after it: running
markers, outcomes and histories in the new shards, nothing more in the old ones."""

from __future__ import annotations

from typing import Any

from test_reshard import where_stored

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.schedule.clock import to_ms
from redisbeat.store.keys import shard_of
from redisbeat.store.reshard import Reshard
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer

#: Names whose shard changes from 1 shard to 4 (and back), and one that runs for a while.
QUICK = [n for n in (f"quick{i}" for i in range(40)) if shard_of(n, 4) != 0][:6]
SLOW = next(n for n in (f"slow{i}" for i in range(40)) if shard_of(n, 4) != 0)


def test_a_worker_started_before_a_reshard_writes_its_runs_where_the_entries_now_live(
    redis_server: RedisServer, prefix: str, beats_for: Any, stores: Any
) -> None:
    store: ScheduleStore = stores(redis_server, prefix)
    store.history_size = 20
    entries = [Entry(n, "proj.ping", Interval(1)) for n in QUICK]
    store.upsert_many([*entries, Entry(SLOW, "proj.sleep", Interval(1), args=(1.5,))])
    procs = beats_for(
        redis_server, prefix, TEST_TRACK_RUNS="1", TEST_HISTORY="20", TEST_HEARTBEAT="0.5"
    )
    procs.start_worker(concurrency=2)
    procs.start(1)
    # The worker's processes read the layout with their first runs: 1 shard.
    ran_since(store, 0, "the first runs")
    for shards in (4, 1):
        Reshard(store, say=lambda _: None).run(shards)
        ended = store.now_ms()
        ran_since(store, ended, f"runs recorded after the reshard to {shards}")
        marked_since(store, ended)
        for name in [*QUICK, SLOW]:
            home = shard_of(name, shards)
            assert where_stored(store, name) == [home], (name, shards)
            state = store.state(name)
            assert state.last_outcome is not None and state.last_outcome.task_id


def ran_since(store: ScheduleStore, since_ms: int, what: str) -> None:
    """Until every entry's history (and run state), read where the layout puts it, holds an
    outcome of a run that ended after ``since_ms``."""

    def ended_after(name: str) -> bool:
        runs = [r for r in store.history(name, 20) if r.outcome and r.ended]
        last = store.state(name).last_outcome
        return any(r.ended and to_ms(r.ended) > since_ms for r in runs) and bool(
            last and last.at and to_ms(last.at) > since_ms
        )

    wait_until(lambda: all(ended_after(n) for n in [*QUICK, SLOW]), 40, what)


def marked_since(store: ScheduleStore, since_ms: int) -> None:
    """Until the slow entry's running marker, read where the layout puts it, is of a run
    that started after ``since_ms``."""

    def marked() -> bool:
        marker = store.running([SLOW], store.now_ms()).get(SLOW)
        return bool(marker and marker.started and to_ms(marker.started) > since_ms)

    wait_until(marked, 30, "a run marked running")
