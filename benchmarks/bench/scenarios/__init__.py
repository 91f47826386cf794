"""The benchmark scenarios: each runs every scheduler in turn on the same rig and workload.

Every scenario returns a :class:`Table`: one row per scheduler and setting, the numbers the
docs quote, and the series its chart draws.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..harness import Rig
from .backlog import backlog
from .cluster import redis_cluster
from .delayed import countdown, delayed
from .editing import edit_latency
from .failover import failover
from .overload import overload
from .profiles import DCB, FULL, PROFILES, QUICK, REDBEAT, REDISBEAT, SMOKE, Profile, Table
from .scale import scale
from .storage import idle, size
from .throughput import capacity, cold_start, instrumented, round_trips

__all__ = [
    "DCB",
    "FULL",
    "PROFILES",
    "QUICK",
    "REDBEAT",
    "REDISBEAT",
    "SCENARIOS",
    "SMOKE",
    "Profile",
    "Table",
    "run",
]

SCENARIOS = (
    "capacity",
    "cold-start",
    "instrumented",
    "round-trips",
    "scale",
    "overload",
    "backlog",
    "size",
    "edit-latency",
    "idle",
    "failover",
    "cluster",
    "delayed",
    "countdown",
)


def run(rig: Rig, profile: Profile, schedulers: list[str], only: list[str]) -> list[Table]:
    """Run the scenarios in ``only`` (all when empty) for ``schedulers``."""
    wanted = set(only or SCENARIOS)
    tables: list[Table] = []
    cap: Table | None = None
    steps: list[tuple[str, Callable[[], Table]]] = [
        ("capacity", lambda: capacity(rig, profile, schedulers)),
        ("cold-start", lambda: cold_start(rig, profile, schedulers)),
        ("instrumented", lambda: instrumented(rig, profile, schedulers)),
        ("round-trips", lambda: round_trips(rig, profile, schedulers)),
        ("scale", lambda: scale(rig, profile, schedulers, cap)),
        ("overload", lambda: overload(rig, profile, schedulers, cap)),
        ("backlog", lambda: backlog(rig, profile, schedulers)),
        ("size", lambda: size(rig, profile, schedulers)),
        ("edit-latency", lambda: edit_latency(rig, profile, schedulers)),
        ("idle", lambda: idle(rig, profile, schedulers)),
        ("failover", lambda: failover(rig, profile, schedulers)),
        ("cluster", lambda: redis_cluster(rig, profile, schedulers)),
        ("delayed", lambda: delayed(rig, profile, schedulers)),
        ("countdown", lambda: countdown(rig, profile, schedulers)),
    ]
    for name, step in steps:
        if name not in wanted:
            continue
        began = time.monotonic()
        print(f"[{name}] ...", flush=True)
        table = step()
        if name == "capacity":
            cap = table
        table.notes.append(f"Scenario time: {time.monotonic() - began:.0f} s.")
        tables.append(table)
        print(f"[{name}] done in {time.monotonic() - began:.0f} s", flush=True)
    return tables
