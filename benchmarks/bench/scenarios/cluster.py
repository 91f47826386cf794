"""The Redis Cluster and shards scenario: redisbeat with one beat and more, one shard and
several, at the same offered rates, on the suite's one store redis-server and on a private
3-master Redis Cluster; what each fire costs Redis in commands and CPU, summed over every
master, and the ceiling that cost projects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redisbeat_testkit.cluster import ClusterRig

from ..adapters import RedisbeatAdapter
from ..harness import Rig
from ..judging import Fires
from .measure import keeps_up, measure_rate, rate_row
from .profiles import REDISBEAT, Profile, Table

ONE_REDIS = "one Redis"
MASTERS = 3
ON_CLUSTER = f"cluster, {MASTERS} masters"
COLUMNS = [
    "store",
    "shards",
    "beats",
    "offered/s",
    "sustained/s",
    "late p50 ms",
    "late p99 ms",
    "Redis cmds / fire",
    "Redis CPU ms / 1000 fires",
]


def redis_cluster(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """redisbeat on one Redis, then on a cluster the scenario starts (and always stops)."""
    table = Table(
        "cluster",
        f"Redis Cluster and shards: redisbeat on one Redis and on {MASTERS} masters",
        COLUMNS,
        axes=("offered fires/s", "Redis CPU ms per 1,000 fires"),
    )
    if REDISBEAT not in schedulers:
        return table
    _on_store(rig, profile, table, ONE_REDIS, None, [rig.store.port])
    nodes = ClusterRig(masters=MASTERS, parent=rig.directory)
    try:
        nodes.start()
        _on_store(rig, profile, table, ON_CLUSTER, nodes.url, nodes.masters())
    finally:
        rig.stop_beats()
        nodes.stop()
    table.notes += ceilings(table)
    table.notes.append(
        f"redisbeat only, entries every {profile.period:g} s, measured over {profile.window:g} "
        "s from the steady state as in the capacity run; the broker is the suite's plain "
        f"redis-server either way. On the cluster ({MASTERS} masters, no replicas) one shard "
        "is one hash tag, so one master; more shards spread over the masters. Redis "
        "commands are `INFO commandstats` calls and Redis CPU is `used_cpu_sys` + "
        "`used_cpu_user` from `INFO cpu`, each summed over every master (the one store, or "
        "all the cluster's: their own upkeep included) over the window, per message that "
        "arrived in it."
    )
    return table


def _on_store(
    rig: Rig,
    profile: Profile,
    table: Table,
    store: str,
    store_url: str | None,
    ports: Sequence[int],
) -> None:
    """Each shard count and beat count at the profile's rising rates on one store, until a
    rate falls behind."""
    for shards in profile.cluster_shards:
        workdir = rig.directory / f"redisbeat-{'cluster' if store_url else 'one-redis'}-{shards}"
        adapter = RedisbeatAdapter(
            workdir, rig.store.url(0), store_url=store_url, admin=False, shards=shards
        )
        workdir.mkdir(parents=True, exist_ok=True)
        adapter.setup()
        try:
            for beats in profile.cluster_beats:
                for rate in profile.cluster_rates:
                    fires, cost = measure_rate(rig, adapter, rate, beats, profile, ports)
                    row = _row(store, shards, rate, beats, fires, cost)
                    table.rows.append(row)
                    series = f"{store}, {shards} shard(s), {beats} beat(s)"
                    cpu = row["Redis CPU ms / 1000 fires"]
                    table.series.setdefault(series, []).append((rate, cpu))
                    if not keeps_up(fires, rate):
                        table.notes.append(f"{series} falls behind at {rate:,} fires/s offered.")
                        break
            adapter.clear()
        finally:
            adapter.teardown()


def ceilings(table: Table) -> list[str]:
    """Per store and shard count, the fires/s its measured Redis CPU per fire projects: one
    Redis core's second divided by the cheapest CPU per fire measured, times the masters the
    shards spread over. Upkeep (Redis's own cron) is in the cost, so the projection is low."""
    notes = []
    for store, masters in ((ONE_REDIS, 1), (ON_CLUSTER, MASTERS)):
        for shards in sorted({r["shards"] for r in table.rows if r["store"] == store}):
            rows = [r for r in table.rows if r["store"] == store and r["shards"] == shards]
            cpu = min(r["Redis CPU ms / 1000 fires"] for r in rows)
            used = min(masters, shards)
            if cpu > 0:
                per_core = 1_000_000 / cpu
                notes.append(
                    f"Projected ceiling, {store}, {shards} shard(s): {per_core:,.0f} fires/s per "
                    f"Redis core ({cpu:g} ms per 1,000 fires) x {used} master(s) = "
                    f"{per_core * used:,.0f} fires/s."
                )
    return notes


def _row(
    store: str, shards: int, rate: int, beats: int, fires: Fires, cost: dict[str, float]
) -> dict:
    """The rate row (every number of it, for the JSON), its store commands named as Redis's."""
    row: dict[str, Any] = rate_row(REDISBEAT, rate, beats, fires, cost)
    commands = row.pop("store cmds / fire")
    return {
        "store": store,
        "shards": shards,
        **row,
        "Redis cmds / fire": commands,
        "Redis CPU ms / 1000 fires": round(cost["store_cpu_ms_per_1000"], 1),
    }
