"""Delayed one-off tasks with real ``celery beat`` processes: sent exactly once by several
beats, and a cancel racing the send either wins or says it came too late, checked from the
broker queue."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import redis
from test_beats import broker

from redisbeat import ScheduleStore, occurrence_id
from redisbeat.schedule.clock import from_ms, to_ms
from redisbeat.store.keys import DELAYED_MARK
from redisbeat_testkit.messages import Sent, read_queue
from redisbeat_testkit.ports import wait_until


def running(
    redis_server: Any, prefix: str, beats_for: Any, stores: Any, count: int, **env: str
) -> tuple[ScheduleStore, redis.Redis, Any]:
    """A store, the broker queue (emptied) and ``count`` registered beats."""
    store = stores(redis_server, prefix)
    queue = broker(redis_server)
    queue.delete("celery")
    beats = beats_for(redis_server, prefix, **env)
    beats.start(count)
    wait_until(lambda: len(store.beats()) == count, 30, f"{count} beat(s) to register")
    return store, queue, beats


def sent_once_stopped(
    queue: redis.Redis, beats: Any, enough: Callable[[list[Sent]], bool]
) -> list[Sent]:
    """What the beats sent: read until ``enough``, then everything once they stopped (a
    stopped beat has finished its claims, so nothing it sent can arrive later)."""
    sent: list[Sent] = []
    wait_until(lambda: sent.extend(read_queue(queue)) or enough(sent), 30, "the sends")
    beats.stop_all()
    return sent + read_queue(queue)


def sent_by_key(sent: list[Sent]) -> Counter[tuple[str, int]]:
    return Counter((s.key or "", s.due_ms) for s in sent if s.key is not None)


def test_three_beats_send_every_delayed_task_once_at_its_time_cancelled_ones_never(
    redis_server, prefix, beats_for, stores
):
    store, queue, beats = running(redis_server, prefix, beats_for, stores, 3)
    start = store.now_ms() + 1000
    items = [
        {"task": "proj.ping", "key": f"t{i}", "owner": f"o{i % 10}", "eta": from_ms(start + i * 7)}
        for i in range(400)
    ]
    store.delay_many(items)
    cancelled = {f"t{i}" for i in range(0, 400, 5)}
    assert all(store.cancel(key) for key in cancelled)
    moved = {f"t{i}": store.reschedule(f"t{i}", by=timedelta(seconds=1)) for i in range(1, 400, 5)}
    assert all(moved.values())
    want = {
        (item["key"], to_ms(moved.get(item["key"]) or item["eta"]))
        for item in items
        if item["key"] not in cancelled
    }
    sent = sent_once_stopped(queue, beats, lambda sent: len(sent) >= len(want))
    counts = sent_by_key(sent)
    assert set(counts) == want and max(counts.values()) == 1
    for s in sent:
        assert s.task_id == occurrence_id(prefix, DELAYED_MARK + (s.key or ""), s.due_ms)
    assert len({s.beat for s in sent}) >= 2, "the beats share the work"
    assert all(store.pending(f"o{i}") == [] for i in range(10))


def test_a_beat_killed_mid_send_loses_no_delayed_task_and_repeats_only_under_its_task_id(
    redis_server, prefix, beats_for, stores, tmp_path
):
    store, queue, beats = running(redis_server, prefix, beats_for, stores, 0, TEST_LEASE="2")
    marker = tmp_path / "frozen"
    victim = beats.start(1, TEST_FREEZE_MARKER=str(marker), TEST_FREEZE_AFTER="3")[0]
    wait_until(lambda: len(store.beats()) == 1, 30, "the first beat to register")
    start = store.now_ms() + 1000
    dues = {f"k{i}": start + i * 20 for i in range(40)}
    store.delay_many([{"task": "proj.ping", "key": k, "eta": from_ms(d)} for k, d in dues.items()])
    wait_until(marker.exists, 20, "the victim to freeze mid-batch")
    beats.start(2)
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait()

    def all_sent(sent: list[Sent]) -> bool:
        # Every key at the broker, and each recorded sent: the killed beat's claims only
        # once its lease has run out and another beat has taken them over.
        return {s.key for s in sent} >= set(dues) and all(
            store.get_delayed(k).state == "sent" for k in dues
        )

    sent = sent_once_stopped(queue, beats, all_sent)
    copies = sent_by_key(sent)
    assert set(copies) == {(k, d) for k, d in dues.items()}
    ids = {(s.key, s.task_id) for s in sent}
    assert len(ids) == len(dues), "a repeat is only ever the same task under the same id"
    frozen_id = json.loads(marker.read_text())["id"]
    assert frozen_id in {s.task_id for s in sent}


def test_a_cancel_racing_the_send_either_wins_or_comes_too_late_never_both(
    redis_server, prefix, beats_for, stores
):
    store, queue, beats = running(redis_server, prefix, beats_for, stores, 2)
    start = store.now_ms() + 1500
    dues = {f"r{i}": start + i * 10 for i in range(150)}
    store.delay_many([{"task": "proj.ping", "key": k, "eta": from_ms(d)} for k, d in dues.items()])
    rng = random.Random(7)
    # Each cancel aimed at its task's due time, from 40 ms before to 60 ms after, on the
    # Redis clock (this host's clock, set to it once).
    targets = {key: due + rng.randint(-40, 60) for key, due in dues.items()}
    offset_ms = store.now_ms() - time.time() * 1000

    def cancel_at(key: str) -> bool:
        time.sleep(max(0.0, (targets[key] - offset_ms) / 1000 - time.time()))
        return store.cancel(key)

    with ThreadPoolExecutor(max_workers=16) as pool:
        won = dict(zip(dues, pool.map(cancel_at, dues), strict=True))
    lost = sum(not w for w in won.values())
    sent = sent_once_stopped(queue, beats, lambda sent: len(sent) >= lost)
    counts = sent_by_key(sent)
    for key, cancelled in won.items():
        n = counts.get((key, dues[key]), 0)
        assert n == (0 if cancelled else 1), (key, cancelled, n)
    assert 0 < sum(won.values()) < len(won), "the trials hit both sides of the race"
