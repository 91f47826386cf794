"""The storage scenarios: what many stored entries cost a beat when few are due (size), and
what a beat costs the store while nothing is due (idle)."""

from __future__ import annotations

import time
from typing import Any

from ..adapters import Adapter, Spec, now_ms
from ..harness import Rig, specs_for, wait_for
from ..judging import judge, rounded
from .measure import asleep, cold_specs, fresh, lead_ms, sleep_until
from .profiles import DCB, IDLE_MAX_INTERVAL, START_S, Profile, Table


def size(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """Many stored entries, few due: memory, start-up and per-fire cost should stay flat."""
    table = Table(
        "size",
        "Size: stored entries of which 50 are due each second",
        [
            "scheduler",
            "stored",
            "load s",
            "start-up to first send s",
            "beat RSS MiB",
            "sustained/s",
            "late p99 ms",
            "store cmds / fire",
        ],
        axes=("stored entries", "beat RSS MiB"),
        log_axes=True,
    )
    for name in schedulers:
        adapter = rig.adapter(name)
        for stored in profile.sizes.get(name, ()):
            row, rss = _size_of(rig, profile, adapter, stored)
            table.rows.append(row)
            table.series.setdefault(name, []).append((stored, rss / 2**20))
        adapter.clear()
    table.notes.append(
        "Start-up counts from starting the `celery beat` process (Python and Celery imports "
        "included) to the first message on the queue; RSS is read after the window."
    )
    return table


def _load_size(adapter: Adapter, stored: int) -> tuple[list[Spec], int, float]:
    """Store ``stored`` cold entries and 50 hot ones due every second from start-up: the hot
    ones, when they start, and how long loading both took."""
    cold = cold_specs(stored)
    began = time.monotonic()
    adapter.load(cold)
    hot_start = now_ms() + lead_ms(adapter, 50) - int(START_S * 1000) + 1000
    hot = specs_for(50, 1, hot_start, prefix="h")
    adapter.load(hot)
    return hot, hot_start, time.monotonic() - began


def _size_of(
    rig: Rig, profile: Profile, adapter: Adapter, stored: int
) -> tuple[dict[str, Any], int]:
    """One step's row, and the beat's RSS in bytes after the window."""
    name = adapter.name
    adapter.clear()
    rig.drain()
    hot, hot_start, load_s = _load_size(adapter, stored)
    sleep_until(hot_start)
    (proc,) = rig.start_beats(adapter, 1)
    assert rig.sink is not None
    sink = rig.sink
    wait_for(lambda s=sink, p=proc: s.count() > 0 or not p.alive(), 120, f"{name} sends")
    first = min(a.arrived_ms for a in sink.arrivals())
    startup = (first - proc.started_ms) / 1000
    w0 = now_ms() + 2000
    sleep_until(w0)
    cmds0 = rig.store_commands()
    w1 = w0 + int(profile.window * 1000)
    sleep_until(w1)
    cmds1 = rig.store_commands()
    rss = proc.rss_bytes() if proc.alive() else 0
    sleep_until(w1 + 2000)
    rig.stop_beats()
    fires = judge(hot, sink.arrivals(), (w0, w1))
    sent = max(1, fires.arrived_in_window)
    row = {
        "scheduler": name,
        "stored": stored,
        "load s": round(load_s, 1),
        "start-up to first send s": round(startup, 2),
        "beat RSS MiB": round(rss / 2**20, 1),
        "sustained/s": round(fires.fires_per_s),
        "late p99 ms": rounded(fires.late(0.99), 1),
        "store cmds / fire": round((cmds1.total() - cmds0.total()) / sent, 2),
    }
    return row, rss


def idle(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    table = Table(
        "idle",
        "Idle: 1,000 entries due in an hour, beats asleep",
        ["scheduler", "beats", "seconds", "store commands / s / beat"],
    )
    for name in schedulers:
        adapter = fresh(rig, name)
        beats = asleep(adapter)
        # Celery's default loop interval: what a beat costs left alone.
        rig.start_beats(adapter, beats, BENCH_MAX_INTERVAL=str(IDLE_MAX_INTERVAL))
        time.sleep(START_S + 2)
        before = rig.store_commands()
        time.sleep(profile.idle_seconds)
        spent = rig.store_commands() - before
        rig.stop_beats()
        per = spent.total() / profile.idle_seconds / beats
        table.rows.append(
            {
                "scheduler": name,
                "beats": beats,
                "seconds": profile.idle_seconds,
                "store commands / s / beat": round(per, 2) if name != DCB else "PostgreSQL",
            }
        )
        adapter.clear()
    table.notes.append(
        f"Every scheduler with Celery's default `beat_max_loop_interval` ({IDLE_MAX_INTERVAL} "
        "s) and its own defaults: redisbeat's heartbeat every 60 s. Commands run by scripts "
        "count one each, as INFO commandstats counts them. django-celery-beat's schedule is "
        "in PostgreSQL, so it runs no Redis command."
    )
    return table
