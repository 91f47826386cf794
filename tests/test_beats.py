"""Real ``celery beat -S redisbeat.RedisScheduler`` processes, checked by reading the queue."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path

import redis

from redisbeat import Entry, Interval, ScheduleStore, occurrence_id
from redisbeat_testkit.messages import Sent, read_queue
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer, tracked

SECOND = 1000


def store_for(server: RedisServer, prefix: str) -> ScheduleStore:
    client = tracked(redis.Redis.from_url(server.url(0), decode_responses=True))
    return ScheduleStore(client, prefix=prefix)


def broker(server: RedisServer) -> redis.Redis:
    return tracked(redis.Redis.from_url(server.url(1), decode_responses=True))


def add_interval_entries(
    store: ScheduleStore, count: int, periods: list[float], start_ms: int
) -> dict[str, tuple[int, int]]:
    """Entries anchored at known times; returns name -> (anchor ms, period ms)."""
    from redisbeat.schedule.timing import from_ms

    plan = {}
    entries = []
    for i in range(count):
        period = int(periods[i % len(periods)] * SECOND)
        anchor = start_ms + (i * 37) % period
        plan[f"e{i}"] = (anchor, period)
        entries.append(
            Entry(f"e{i}", "proj.ping", Interval(period / SECOND), start_at=from_ms(anchor))
        )
    store.upsert_many(entries)
    return plan


def expected(plan: dict[str, tuple[int, int]], start: int, end: int) -> set[tuple[str, int]]:
    out = set()
    for name, (anchor, period) in plan.items():
        due = anchor
        while due < end:
            if due >= start:
                out.add((name, due))
            due += period
    return out


def assert_exactly_once(sent: list[Sent], want: set[tuple[str, int]], prefix: str) -> None:
    counts = Counter((s.entry, s.due_ms) for s in sent)
    missing = want - set(counts)
    doubled = {k: n for k, n in counts.items() if n > 1}
    assert not missing, f"{len(missing)} occurrences never sent, e.g. {sorted(missing)[:3]}"
    assert not doubled, f"{len(doubled)} occurrences sent more than once: {list(doubled)[:3]}"
    for s in sent:
        assert s.task_id == occurrence_id(prefix, s.entry, s.due_ms)


def test_three_beats_send_every_occurrence_exactly_once_and_share_the_work(
    redis_server, prefix, beats_for
):
    store = store_for(redis_server, prefix)
    beats = beats_for(redis_server, prefix, TEST_BATCH="20")
    beats.start(3)
    wait_until(lambda: len(store.beats()) == 3, 30, "three beats to register")
    start = store.now_ms() + 1 * SECOND
    plan = add_interval_entries(store, 200, [1, 1.5, 2], start)
    end = start + 20 * SECOND
    wait_until(lambda: store.now_ms() > end + 2 * SECOND, 40, "the window to pass")
    beats.stop_all()
    sent = read_queue(broker(redis_server))
    want = expected(plan, start, end)
    assert len(want) > 2500
    in_window = [s for s in sent if start <= s.due_ms < end]
    assert_exactly_once(in_window, want, prefix)
    senders = Counter(s.beat for s in in_window)
    assert len(senders) == 3, senders
    assert all(b.process.returncode == 0 for b in beats.beats)


def test_a_beat_killed_mid_batch_loses_nothing_and_repeats_only_with_the_same_task_id(
    redis_server, prefix, beats_for, tmp_path: Path
):
    store = store_for(redis_server, prefix)
    beats = beats_for(redis_server, prefix, TEST_LEASE="2")
    marker = tmp_path / "frozen"
    victim = beats.start(1, TEST_FREEZE_MARKER=str(marker), TEST_FREEZE_AFTER="3")[0]
    wait_until(lambda: len(store.beats()) == 1, 30, "the first beat to register")
    start = store.now_ms() + 1 * SECOND
    plan = {name: (start, 5 * SECOND) for name in (f"e{i}" for i in range(30))}
    store.upsert_many(Entry(n, "proj.ping", Interval(5), start_at=_dt(start)) for n in plan)
    wait_until(marker.exists, 20, "the victim to freeze mid-batch")
    survivors = beats.start(2)
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait()
    end = start + 15 * SECOND
    wait_until(lambda: store.now_ms() > end + 3 * SECOND, 40, "the window to pass")
    beats.stop_all()
    sent = read_queue(broker(redis_server))
    frozen_id = json.loads(marker.read_text())["id"]
    by_occurrence = defaultdict(list)
    for s in sent:
        by_occurrence[(s.entry, s.due_ms)].append(s)
    repeats = {k: v for k, v in by_occurrence.items() if len(v) > 1}
    assert repeats, "the occurrence sent before the kill should have been sent again"
    assert frozen_id in {v[0].task_id for v in repeats.values()}
    for occurrence, copies in repeats.items():
        assert len({c.task_id for c in copies}) == 1, occurrence
    missing = expected(plan, start, end) - set(by_occurrence)
    assert not missing, sorted(missing)[:3]
    late = [s for s in sent if s.beat != _beat_of(victim, sent)]
    assert late and all(b.process.returncode == 0 for b in survivors)


def _beat_of(beat, sent: list[Sent]) -> str:
    pid = str(beat.process.pid)
    return next((s.beat for s in sent if s.beat.split(":")[1] == pid), "")


def _dt(ms: int):
    from redisbeat.schedule.timing import from_ms

    return from_ms(ms)


def test_a_sigterm_stops_a_beat_at_once_and_the_others_carry_on_without_gaps(
    redis_server, prefix, beats_for
):
    store = store_for(redis_server, prefix)
    beats = beats_for(redis_server, prefix)
    first, _ = beats.start(2)
    wait_until(lambda: len(store.beats()) == 2, 30, "two beats to register")
    start = store.now_ms() + 1 * SECOND
    plan = add_interval_entries(store, 50, [1], start)
    wait_until(lambda: store.now_ms() > start + 4 * SECOND, 20, "some sends")
    t0 = time.monotonic()
    first.process.send_signal(signal.SIGTERM)
    assert first.process.wait(10) == 0
    assert time.monotonic() - t0 < 5
    wait_until(lambda: len(store.beats()) == 1, 5, "the stopped beat to deregister")
    end = start + 10 * SECOND
    wait_until(lambda: store.now_ms() > end + 2 * SECOND, 30, "the window to pass")
    beats.stop_all()
    sent = [s for s in read_queue(broker(redis_server)) if start <= s.due_ms < end]
    assert_exactly_once(sent, expected(plan, start, end), prefix)
    assert store.client.hlen(store.keys.inflight) == 0


def test_a_redis_restart_mid_run_neither_loses_nor_doubles_an_occurrence(
    own_redis, prefix, beats_for
):
    store = store_for(own_redis, prefix)
    beats = beats_for(own_redis, prefix, TEST_LEASE="3")
    beats.start(2)
    wait_until(lambda: len(store.beats()) == 2, 30, "two beats to register")
    start = store.now_ms() + 1 * SECOND
    plan = add_interval_entries(store, 20, [1], start)
    wait_until(lambda: store.now_ms() > start + 3 * SECOND, 20, "some sends")
    own_redis.stop()
    down_from = int(time.time() * 1000)
    time.sleep(1.5)  # an outage of a known length, not a wait for a result
    own_redis.start()
    up_at = int(time.time() * 1000)
    store = store_for(own_redis, prefix)
    end = up_at + 8 * SECOND
    wait_until(lambda: store.now_ms() > end + 2 * SECOND, 40, "the window to pass")
    beats.stop_all()
    sent = [s for s in read_queue(broker(own_redis)) if start <= s.due_ms < end]
    counts = Counter((s.entry, s.due_ms) for s in sent)
    # What is promised (docs/guarantees.md#redis-outages): a claim a beat held across the
    # outage may be finished by it or, if its lease ran out meanwhile, taken over and sent
    # again by another beat, under the same task id. Only occurrences due within a lease
    # of the outage can be in that state; every other one is sent exactly once.
    around = (down_from - 3 * SECOND, up_at + 3 * SECOND)
    repeated = {k for k, n in counts.items() if n > 1}
    assert all(around[0] <= due <= around[1] for _, due in repeated), sorted(repeated)[:3]
    for s in sent:
        assert s.task_id == occurrence_id(prefix, s.entry, s.due_ms)
    # Outside the outage every occurrence is sent; inside it they coalesce (catch_up="once").
    # A beat tries Redis every 0.2 s while it is down and is back within a fraction of a
    # second of it; allow 2 s for the reconnects of a loaded machine.
    resumed = up_at + 2 * SECOND
    want = expected(plan, start, down_from - SECOND) | expected(plan, resumed, end)
    assert not want - set(counts), sorted(want - set(counts))
    for beat in beats.beats:
        assert "unavailable" in beat.output() and "available again" in beat.output()


def test_static_beat_schedule_is_synced_at_start_without_touching_other_sources(
    redis_server, prefix, beats_for
):
    store = store_for(redis_server, prefix)
    store.upsert(Entry("api-owned", "proj.ping", Interval(3600)))
    store.upsert(Entry("shared-name", "proj.ping", Interval(3600)))
    first = {
        "kept": {"task": "proj.ping", "schedule": 3600},
        "dropped": {"task": "proj.ping", "schedule": 3600},
        "shared-name": {"task": "proj.fail", "schedule": 60},
    }
    beats = beats_for(redis_server, prefix)
    beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(first))
    wait_until(lambda: "kept" in store and "dropped" in store, 30, "the config to sync")
    beats.stop_all()
    assert store.get("shared-name").task == "proj.ping"
    assert "owned by another source" in beats.beats[0].output()
    second = {"kept": {"task": "proj.ping", "schedule": 1800, "args": [1]}}
    beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(second))
    wait_until(lambda: "dropped" not in store, 30, "the removed entry to go")
    assert store.get("kept").args == (1,) and store.get("kept").schedule == Interval(1800)
    # celery.backend_cleanup: Celery's own default entry, added as Celery's beat does.
    assert {e.name for e in store} == {"kept", "api-owned", "shared-name", "celery.backend_cleanup"}


def test_an_edit_wakes_a_sleeping_beat_in_well_under_a_second(redis_server, prefix, beats_for):
    store = store_for(redis_server, prefix)
    beats = beats_for(redis_server, prefix, TEST_MAX_INTERVAL="60", TEST_HEARTBEAT="60")
    beats.start(2)
    wait_until(lambda: len(store.beats()) == 2, 30, "two beats to register")
    store.upsert(Entry("far", "proj.ping", Interval(3600)))
    queue = broker(redis_server)
    time.sleep(0.5)  # let both beats go back to sleep (for up to 60 s)
    latencies = []
    for _ in range(5):
        t0 = time.monotonic()
        store.run_now("far")
        assert queue.brpop(["celery"], timeout=5) is not None
        latencies.append(time.monotonic() - t0)
        wait_until(lambda: not store.state("far").running, 15, "the run to finish")
    assert max(latencies) < 1.0, latencies
    store.disable("far")
    store.run_now("far")  # a disabled entry may still be run by hand
    assert queue.brpop(["celery"], timeout=15) is not None
    wait_until(lambda: not store.state("far").running, 15, "the run to finish")
    assert store.state("far").next_run_at is None
    assert store.state("far").total_run_count == 6


def test_the_beat_scheduler_setting_selects_redisbeat_without_a_command_line_flag(
    redis_server, prefix, beats_for
):
    store = store_for(redis_server, prefix)
    beats = beats_for(redis_server, prefix, TEST_SET_BEAT_SCHEDULER="1")
    beats.scheduler_flag = False
    beats.start(1)
    wait_until(lambda: len(store.beats()) == 1, 30, "the beat to register through the setting")
