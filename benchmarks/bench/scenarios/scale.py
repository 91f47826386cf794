"""The scale scenario: how far more redisbeat beats go, on one Redis and on a Redis Cluster,
with entries due every second and every ten. Each beat count is offered more than it can
send, so a row's rate is what those beats sustain, and its bottleneck column says what
bounded it: the Redis core, the beats' cores, or the machine they share."""

from __future__ import annotations

from typing import Any

from ..adapters import RedisbeatAdapter
from ..harness import Rig
from ..judging import Fires, rounded
from .cluster import Store, deployment, on_cluster, one_redis, redis_ceiling
from .measure import CORES, keeps_up, measure_rate, one_beat_estimate, own_window
from .profiles import REDISBEAT, Profile, Table

#: Offered per beat, in multiples of what one beat is estimated to send.
OFFER = 2
#: redisbeat_shards on the cluster: four per master.
CLUSTER_SHARDS = 12
#: A share of a core (or of the cores one has) counted as saturated.
BUSY = 0.9
OVER = "overload"
KEEP_UP = "keep-up"
COLUMNS = [
    "run",
    "store",
    "shards",
    "every s",
    "beats",
    "offered/s",
    "sustained/s",
    "vs one beat",
    "projected/s",
    "late p99 ms",
    "missed",
    "doubles",
    "beat CPU ms / message",
    "Redis CPU µs / fire",
    "store cmds / fire",
    "Redis core %",
    "beats' cores %",
    "machine %",
    "bottleneck",
]


def beat_counts(profile: Profile) -> list[int]:
    """The profile's beat counts, and with ``scale_to_cores`` doublings up to the cores."""
    counts = list(profile.scale_beats)
    while profile.scale_to_cores and counts[-1] * 2 <= CORES:
        counts.append(counts[-1] * 2)
    return counts


def scale(rig: Rig, profile: Profile, schedulers: list[str], capacity: Table | None) -> Table:
    table = Table(
        "scale",
        "Scale: redisbeat beats offered more than they can send, on one Redis and on a cluster",
        COLUMNS,
        axes=("beats", "sustained fires/s"),
    )
    if REDISBEAT not in schedulers:
        return table
    run = own_window(profile)
    estimate = one_beat_estimate(capacity, profile)
    store = one_redis(rig)
    with deployment(rig, store, 1) as adapter:
        fires, cost = measure_rate(
            rig, adapter, profile.scale_keep_up, 1, run, store.ports, period=1
        )
        table.rows.append(_row(KEEP_UP, store, 1, 1, profile.scale_keep_up, fires, cost))
        _beat_counts(rig, run, table, adapter, store, estimate)
    with on_cluster(rig) as cluster, deployment(rig, cluster, CLUSTER_SHARDS) as adapter:
        _beat_counts(rig, run, table, adapter, cluster, estimate)
    table.notes.append(_how(profile, run, estimate))
    return table


def _beat_counts(
    rig: Rig,
    profile: Profile,
    table: Table,
    adapter: RedisbeatAdapter,
    store: Store,
    estimate: int,
) -> None:
    """Each period and beat count on one store, offered ``OFFER`` times what that many beats
    could send at one beat's ``estimate`` each (at most the profile's entries per period)."""
    for every in profile.scale_periods:
        rows = []
        for beats in beat_counts(profile):
            rate = int(min(profile.scale_max_entries / every, OFFER * beats * estimate))
            fires, cost = measure_rate(
                rig, adapter, rate, beats, profile, store.ports, period=every, ahead=False
            )
            rows.append(_row(OVER, store, every, beats, rate, fires, cost))
            series = f"{store.label}, every {every:g} s"
            table.series.setdefault(series, []).append((beats, fires.fires_per_s))
        table.rows += rows
        note = _project(rows, store)
        if note:
            table.notes.append(note)


def _project(rows: list[dict[str, Any]], store: Store) -> str | None:
    """Each row's ratio to one beat and what N beats project to: N times one beat's rate, up
    to the fires/s at which the store's Redis cores saturate (one core's second over the
    cheapest Redis CPU per fire measured, times the masters the shards spread over); and the
    note that says so."""
    one = rows[0]["sustained/s"]
    costs = [r["Redis CPU µs / fire"] for r in rows if r["Redis CPU µs / fire"]]
    us = min(costs, default=0.0)
    masters = min(store.masters, rows[0]["shards"])
    ceiling = redis_ceiling(us, masters)
    for row in rows:
        row["vs one beat"] = round(row["sustained/s"] / one, 2) if one else None
        row["projected/s"] = round(min(row["beats"] * one, ceiling))
    if not one or not us:
        return None
    return (
        f"Projected, {store.label}, every {rows[0]['every s']:g} s: one Redis core sustains "
        f"1,000,000 / {us:g} µs per fire = {redis_ceiling(us, 1):,.0f} fires/s, x "
        f"{masters} master(s) = {ceiling:,.0f}; N beats project to N x {one:,} fires/s "
        f"(one beat's) up to that, which {ceiling / one:,.1f} beats reach."
    )


def _row(
    run: str,
    store: Store,
    every: float,
    beats: int,
    rate: int,
    fires: Fires,
    cost: dict[str, float],
) -> dict[str, Any]:
    shards = CLUSTER_SHARDS if store.url else 1
    return {
        "run": run,
        "store": store.label,
        "shards": shards,
        "every s": every,
        "beats": beats,
        "offered/s": rate,
        "sustained/s": round(fires.fires_per_s),
        "late p99 ms": rounded(fires.late(0.99), 1),
        "missed": fires.missed,
        "doubles": fires.doubles,
        "beat CPU ms / message": round(cost["cpu_per_1000"], 3),
        "Redis CPU µs / fire": round(cost["store_cpu_ms_per_1000"], 1),
        "store cmds / fire": round(cost["store_cmds_per_fire"], 2),
        "Redis core %": round(cost["redis_busy"] * 100),
        "beats' cores %": round(cost["beats_busy"] * 100),
        "machine %": round(cost["machine_busy"] * 100),
        "bottleneck": bottleneck(fires, rate, cost),
    }


def bottleneck(fires: Fires, rate: int, cost: dict[str, float]) -> str:
    """What bounded a run: "kept up" when the offer did; else a store redis-server busy on
    its one core, the beats busy on the cores they can use (one each), or the machine."""
    if keeps_up(fires, rate):
        return "kept up"
    if cost["redis_busy"] >= BUSY:
        return "redis"
    if cost["beats_busy"] >= BUSY:
        return "beats"
    return "machine" if cost["machine_busy"] >= BUSY else "—"


def _how(profile: Profile, run: Profile, estimate: int) -> str:
    return (
        f"Each beat count is offered {OFFER} x beats x {estimate:,} fires/s (one beat's "
        "estimate: the most it sustained in this run's capacity scenario, else the profile's "
        f"top rate), at most {profile.scale_max_entries:,} entries per period; measured over "
        f"{run.window:g} s from the steady state. The keep-up row offers "
        f"{profile.scale_keep_up:,} entries due every second to one beat. On the cluster "
        f"the {CLUSTER_SHARDS} shards spread over its masters. Redis CPU (`used_cpu_sys` + "
        "`used_cpu_user`) and commands are summed over every master, per message; 'Redis "
        "core %' is the busiest master's share of its one core, 'beats' cores %' the beats' "
        "CPU over the cores they can use (one each, at most the machine's), 'machine %' all "
        f"cores busy (/proc/stat, every process's). Bottleneck: 'kept up' when the offer was "
        f"the limit, else the first of these at {BUSY:.0%} or more (redis, beats, machine). "
        f"Machine: {CORES} cores, shared by the beats, the redis-servers and the sink."
    )
