"""Redis outages under real beats: a blip shorter than an entry's period costs lateness only."""

from __future__ import annotations

import signal
import time
from collections import Counter

import redis
from test_beats import SECOND, add_interval_entries, expected

from redisbeat_testkit.messages import read_queue
from redisbeat_testkit.ports import wait_until


def test_a_store_redis_killed_and_restarted_from_its_aof_costs_no_occurrence(
    own_redis, redis_server, prefix, beats_for, stores
):
    store = stores(own_redis, prefix)
    # The broker lives elsewhere: this is an outage of the schedule's Redis alone.
    beats = beats_for(own_redis, prefix, TEST_BROKER_URL=redis_server.url(2))
    queue = redis.Redis.from_url(redis_server.url(2), decode_responses=True)
    queue.delete("celery")
    beats.start(3)
    wait_until(lambda: len(store.beats()) == 3, 30, "three beats to register")
    start = store.now_ms() + 2 * SECOND
    plan = add_interval_entries(store, 500, [2], start)
    wait_until(lambda: store.now_ms() > start + 4 * SECOND, 30, "some sends")
    own_redis.stop(signal.SIGKILL)
    down = time.monotonic()
    time.sleep(1.0)  # an outage of a known length, not a wait for a result
    own_redis.start()
    down_for = time.monotonic() - down
    store = stores(own_redis, prefix)
    end = store.now_ms() + 6 * SECOND
    wait_until(lambda: store.now_ms() > end + 3 * SECOND, 40, "the window to pass")
    beats.stop_all()
    sent = [s for s in read_queue(queue) if start <= s.due_ms < end]
    queue.close()
    counts = Counter((s.entry, s.due_ms) for s in sent)
    want = expected(plan, start, end)
    missing = want - set(counts)
    assert down_for < 2 * SECOND / 1000
    assert not missing, f"{len(missing)} occurrences lost, e.g. {sorted(missing)[:3]}"
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1][:3]
    for beat in beats.beats:
        assert "unavailable" in beat.output() and "available again" in beat.output()
