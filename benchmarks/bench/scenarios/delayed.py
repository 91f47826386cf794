"""The delayed-task scenarios: one-off tasks pending by the million with 1,000 a second
falling due (delayed), and Celery's own answer, ``countdown``, for comparison (countdown).

Only redisbeat has delayed tasks of its own: celery-redbeat and django-celery-beat leave
one-off delays to Celery's ``countdown``/``eta``, which the countdown scenario measures with
a real worker on the same broker.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from itertools import islice
from typing import Any

import redis

from redisbeat import ScheduleStore
from redisbeat.schedule.clock import from_ms
from redisbeat.schedule.delayed import Delay

from ..adapters import RedisbeatAdapter, Spec, now_ms
from ..harness import Rig, wait_for
from ..judging import judge, rounded
from .measure import sleep_until
from .profiles import REDISBEAT, START_S, Profile, Table
from .worker import countdown_rows

TASK = "bench.tick"
#: Pending tasks per owner.
PER_OWNER = 100
#: pending(owner) calls timed per step.
OWNER_SAMPLES = 200
#: A one-off spec's period: longer than any run, so each task has one occurrence.
ONCE_S = 10**7

COLUMNS = [
    "pending at start",
    "load/s",
    "Redis bytes / pending",
    "of which arguments",
    "sustained/s",
    "missed",
    "doubles",
    "late p50 ms",
    "late p99 ms",
    "beat RSS MiB",
    "pending(owner) p99 ms",
]


def delayed(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    title = f"Delayed tasks: pending by the million, {profile.delayed_rate:,} due each second"
    table = Table("delayed", title, COLUMNS)
    if REDISBEAT not in schedulers:
        table.notes.append("redisbeat was not benchmarked in this run.")
        return table
    adapter = rig.adapter(REDISBEAT)
    assert isinstance(adapter, RedisbeatAdapter)
    store = adapter._store()
    for pending in profile.delayed_pending:
        adapter.clear()
        rig.drain()
        table.rows.append(_step(rig, profile, store, pending))
        adapter.clear()
    table.notes += _targets(table.rows)
    table.notes.append(
        "One beat at default settings. Every task due while measuring is loaded at the start, "
        "so the smallest step holds as many as the seconds measured need. Pending tasks are "
        "loaded with `delay_many` (keys, an "
        f'owner per {PER_OWNER} tasks, kwargs `{{"entry": key}}`), all but the due ones '
        "a day ahead; Redis bytes are `used_memory` grown by the load, per task. "
        f"`pending(owner)` returns one owner's {PER_OWNER} tasks."
    )
    return table


def _step(rig: Rig, profile: Profile, store: ScheduleStore, pending: int) -> dict[str, Any]:
    rate = profile.delayed_rate
    hot_count = int(rate * (profile.window + 2 * START_S))
    cold = max(0, pending - hot_count)
    memory0 = _used_memory(rig)
    began = time.monotonic()
    # A day from now, a millisecond apart.
    base = now_ms() + 86_400_000
    load_delayed(store, ((f"d{i:07d}", base + i) for i in range(cold)))
    load_s = time.monotonic() - began
    per_task = (_used_memory(rig) - memory0) / cold if cold else None
    # The due ones: ``rate`` a second from about when the beat starts, past the window.
    start = now_ms() + int(START_S * 1000) + 1500
    hot = [Spec(f"h{i:07d}", ONCE_S, start + i * 1000 // rate) for i in range(hot_count)]
    store.delay_many(
        {"task": TASK, "kwargs": {"entry": s.name}, "key": s.name, "eta": from_ms(s.anchor_ms)}
        for s in hot
    )
    (proc,) = rig.start_beats(rig.adapter(REDISBEAT), 1)
    w0 = start + int(START_S * 1000)  # past the beat's start-up
    w1 = w0 + int(profile.window * 1000)
    sleep_until(w1 + 1000)
    rss = proc.rss_bytes() if proc.alive() else 0
    assert rig.sink is not None
    sink = rig.sink
    wait_for(lambda: sink.count() >= hot_count or not proc.alive(), 60, "every due task sent")
    rig.stop_beats()
    fires = judge(hot, sink.arrivals(), (w0, w1))
    return {
        "pending at start": cold + hot_count,
        "load/s": round(cold / load_s) if cold else None,
        "Redis bytes / pending": round(per_task) if per_task else None,
        "of which arguments": _argument_bytes(),
        "sustained/s": round(fires.fires_per_s),
        "missed": fires.missed,
        "doubles": fires.doubles,
        "late p50 ms": rounded(fires.late(0.5), 1),
        "late p99 ms": rounded(fires.late(0.99), 1),
        "beat RSS MiB": round(rss / 2**20, 1),
        "pending(owner) p99 ms": _owner_latency(store, cold),
    }


def _argument_bytes() -> int:
    """What a task's arguments add to its stored record."""
    bare = Delay.of(TASK, key="d0000000", countdown=0).definition()
    full = Delay.of(TASK, kwargs={"entry": "d0000000"}, key="d0000000", countdown=0)
    return len(full.definition().encode()) - len(bare.encode())


def load_delayed(store: ScheduleStore, tasks: Iterable[tuple[str, int]]) -> None:
    """Delay bench.tick(entry=key) for each (key, due ms), in owners of PER_OWNER, 10,000
    to a ``delay_many`` call."""
    chunk = 10_000
    it = enumerate(tasks)
    while batch := list(islice(it, chunk)):
        store.delay_many(
            {
                "task": TASK,
                "kwargs": {"entry": key},
                "key": key,
                "owner": f"user:{i // PER_OWNER}",
                "eta": from_ms(due),
            }
            for i, (key, due) in batch
        )


def _owner_latency(store: ScheduleStore, cold: int) -> float | None:
    owners = cold // PER_OWNER
    if not owners:
        return None
    times = []
    for owner in random.Random(7).choices(range(owners), k=OWNER_SAMPLES):
        began = time.perf_counter()
        page = store.pending(f"user:{owner}", PER_OWNER)
        times.append((time.perf_counter() - began) * 1000)
        assert len(page) == PER_OWNER, (owner, len(page))
    times.sort()
    return round(times[int(0.99 * (len(times) - 1))], 2)


def _used_memory(rig: Rig) -> int:
    client = redis.Redis(port=rig.store.port)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


def _targets(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, met or not, from the smallest and the largest step."""
    if len(rows) < 2:
        return []
    small, large = rows[0], rows[-1]
    notes = []
    p_small, p_large = small["late p99 ms"], large["late p99 ms"]
    if p_small is not None and p_large is not None:
        met = "met" if p_large <= p_small + 10 else "NOT met"
        notes.append(
            f"Target, p99 at {large['pending at start']:,} pending within 10 ms of "
            f"{small['pending at start']:,}: "
            f"{p_large} vs {p_small} ms, {met}."
        )
    if small["beat RSS MiB"]:
        growth = large["beat RSS MiB"] / small["beat RSS MiB"] - 1
        met = "met" if growth <= 0.10 else "NOT met"
        notes.append(
            f"Target, beat RSS flat: {small['beat RSS MiB']} -> {large['beat RSS MiB']} MiB "
            f"({growth:+.1%}), {met}."
        )
    per, args = large["Redis bytes / pending"], large["of which arguments"]
    if per is not None:
        met = "met" if per <= 300 + args else "NOT met"
        notes.append(f"Target, Redis bytes per pending task <= 300 + arguments: {per}, {met}.")
    return notes


def countdown(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """Celery's ``countdown``: ETA tasks held by a worker (see :mod:`.worker`)."""
    table = Table(
        "countdown",
        "Celery's countdown for comparison: ETA tasks held by a worker",
        [
            "pending",
            "send/s",
            "worker RSS MiB",
            "broker bytes / pending",
            "worker restart",
            "kill -9",
        ],
    )
    table.rows += countdown_rows(rig, profile.countdown_pending, profile.countdown_watch_s)
    table.notes.append(
        "A real `celery worker` (solo pool, default settings) on the benchmark's broker; tasks "
        "sent with `countdown=3600`. A worker holds every ETA task it has taken, in memory, "
        "until it is due; the broker keeps each unacknowledged in its `unacked` hash. A warm "
        "restart hands them all back and the new worker takes them all again; after kill -9 "
        "they stay with the dead worker until the visibility timeout (1 h by default) and "
        "then go to another worker, so a task due later than that runs twice."
    )
    return table
