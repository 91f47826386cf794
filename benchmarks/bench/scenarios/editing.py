"""The editing scenario: how soon an entry stored while the beats sleep is sent, through the
scheduler's API and through its Django admin."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...common import percentile
from ..adapters import Spec, now_ms
from ..harness import Rig, wait_for
from ..judging import rounded
from .measure import asleep, fresh
from .profiles import DUE_AFTER_MS, REDBEAT, START_S, Profile, Table


def edit_latency(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """An entry due at once, stored while the beats sleep: how soon it is sent."""
    table = Table(
        "edit-latency",
        "Edit latency: a new entry due at once, beats asleep",
        ["scheduler", "path", "edits", "late p50 ms", "late p99 ms", "late max ms"],
    )
    for name in schedulers:
        adapter = fresh(rig, name)
        rig.start_beats(adapter, asleep(adapter))
        time.sleep(START_S)  # asleep: nothing is due for half an hour
        paths: list[tuple[str, Callable[[Spec], None]]] = [("API", adapter.add)]
        if name != REDBEAT:
            paths.append(("Django admin save", adapter.add_via_admin))
        for path, add in paths:
            latencies = _latencies(rig, name, path, add, profile.edits[name])
            table.rows.append(
                {
                    "scheduler": name,
                    "path": path,
                    "edits": len(latencies),
                    "late p50 ms": rounded(percentile(latencies, 0.5), 1),
                    "late p99 ms": rounded(percentile(latencies, 0.99), 1),
                    "late max ms": max(latencies),
                }
            )
        rig.stop_beats()
        adapter.clear()
    table.notes.append(
        f"Beats run with `beat_max_loop_interval` = {rig.max_interval:g} s (Celery's default "
        f"is 300 s); redisbeat ran two beats. Each new entry is due {DUE_AFTER_MS} ms after "
        "the call that stores it starts (every call returned sooner); the latency is its "
        "message's arrival on the queue minus that due time."
    )
    return table


def _latencies(
    rig: Rig, name: str, path: str, add: Callable[[Spec], None], edits: int
) -> list[int]:
    """Store ``edits`` new entries one after another through ``add``: each one's lateness."""
    latencies = []
    for i in range(edits):
        assert rig.sink is not None
        rig.sink.mark()
        # Due shortly after the call returns (every path takes well under this).
        spec = Spec(f"x-{path[0]}{i:05d}", 3600, now_ms() + DUE_AFTER_MS)
        add(spec)
        sink = rig.sink
        wait_for(lambda s=sink: s.count() > 0, 30, f"{name} to send the new entry")
        latencies.append(min(a.arrived_ms for a in sink.arrivals()) - spec.anchor_ms)
        time.sleep(0.05)
    return latencies
