"""Redis outages under real beats: a blip shorter than an entry's period costs lateness only."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter

import redis
from test_beats import SECOND, add_interval_entries, expected

from redisbeat_testkit.messages import Sent, read_queue
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.proxy import TcpProxy


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


def test_a_beat_whose_broker_link_goes_silent_lets_go_and_the_others_keep_time(
    own_redis, redis_server, prefix, beats_for, stores
):
    """A link a firewall dropped silently: no error, no reply. The beat's send gives up after
    its socket timeout (kombu would wait forever, holding the batch, its lease renewed, from
    every beat), and until a probe finds the broker answering it claims nothing."""
    store = stores(redis_server, prefix)
    proxy = TcpProxy(own_redis.port).start()
    queue = redis.Redis.from_url(own_redis.url(1), decode_responses=True)
    seen: list[Sent] = []

    def sent_by(beat: str | None, since: int = 0) -> bool:
        seen.extend(read_queue(queue))
        return any(beat in (s.beat, None) and s.due_ms >= since for s in seen)

    settings = {"TEST_BROKER_URL": own_redis.url(1), "TEST_SOCKET_TIMEOUT": "1", "TEST_BATCH": "10"}
    try:
        beats = beats_for(redis_server, prefix, **settings)
        [cut] = beats.start(1, TEST_BROKER_URL=proxy.url(1))
        beats.start(1)
        wait_until(lambda: len(store.beats()) == 2, 30, "two beats to register")
        cut_id = wait_until(lambda: _beat_id(cut.output()), 30, "the beat's id in its log")
        plan = add_interval_entries(store, 40, [1], store.now_ms() + SECOND)
        wait_until(lambda: sent_by(cut_id), 30, "a send through the link")
        proxy.blackhole()
        silent = store.now_ms()
        wait_until(lambda: store.now_ms() > silent + 10 * SECOND, 30, "ten seconds of silence")
        proxy.heal()
        healed = store.now_ms()
        wait_until(lambda: sent_by(None, healed), 30, "the other beat past the silence")
        window = [s for s in seen if silent + 3 * SECOND <= s.due_ms < healed]
        counts = Counter((s.entry, s.due_ms) for s in window)
        missing = expected(plan, silent + 3 * SECOND, healed) - set(counts)
        assert not missing, f"{len(missing)} occurrences not sent, e.g. {sorted(missing)[:3]}"
        assert max(counts.values()) == 1
        back = "the broker takes this beat's messages again"
        wait_until(lambda: back in cut.output(), 30, "the beat to say so")
        wait_until(lambda: sent_by(cut_id, healed), 30, "a send through the healed link")
    finally:
        proxy.stop()
        queue.close()
    assert cut.output().count("this beat cannot reach the broker") == 1


def _beat_id(log: str) -> str | None:
    found = re.search(r"redisbeat: beat (\S+) started on ", log)
    return found[1] if found else None
