"""The Redis Cluster and shards scenario: redisbeat with one beat and more, one shard and
several, at the same offered rates, on the suite's one store redis-server and on a private
3-master Redis Cluster; what each fire costs Redis in commands and CPU, summed over every
master, and the ceiling that cost projects. Also the stores and deployments the scale
scenario measures on."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Store:
    """Where a scenario's redisbeat deployment keeps its schedule."""

    label: str
    #: Its ``redisbeat_redis_url`` (None: database 1 of the rig's store).
    url: str | None
    #: The redis-servers whose commands and CPU it costs: the store, or every master.
    ports: list[int]
    masters: int


def one_redis(rig: Rig) -> Store:
    return Store(ONE_REDIS, None, [rig.store.port], 1)


@contextmanager
def on_cluster(rig: Rig) -> Iterator[Store]:
    """A private Redis Cluster, started for the block and always stopped after it."""
    nodes = ClusterRig(masters=MASTERS, parent=rig.directory)
    try:
        nodes.start()
        yield Store(ON_CLUSTER, nodes.url, nodes.masters(), MASTERS)
    finally:
        rig.stop_beats()
        nodes.stop()


@contextmanager
def deployment(rig: Rig, store: Store, shards: int) -> Iterator[RedisbeatAdapter]:
    """A redisbeat adapter with ``shards`` shards on ``store``, cleared after the block."""
    workdir = rig.directory / f"redisbeat-{'cluster' if store.url else 'one-redis'}-{shards}"
    adapter = RedisbeatAdapter(
        workdir, rig.store.url(0), store_url=store.url, admin=False, shards=shards
    )
    workdir.mkdir(parents=True, exist_ok=True)
    adapter.setup()
    try:
        yield adapter
        adapter.clear()
    finally:
        adapter.teardown()


def redis_ceiling(us_per_fire: float, masters: int) -> float:
    """The fires/s at which the Redis CPU one fire costs saturates a core on each of
    ``masters``; Redis's own upkeep is in the cost, so the projection is low."""
    return 1_000_000 / us_per_fire * masters if us_per_fire > 0 else math.inf


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
    _on_store(rig, profile, table, one_redis(rig))
    with on_cluster(rig) as store:
        _on_store(rig, profile, table, store)
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


def _on_store(rig: Rig, profile: Profile, table: Table, store: Store) -> None:
    """Each shard count and beat count at the profile's rising rates on one store, until a
    rate falls behind."""
    for shards in profile.cluster_shards:
        with deployment(rig, store, shards) as adapter:
            for beats in profile.cluster_beats:
                for rate in profile.cluster_rates:
                    fires, cost = measure_rate(rig, adapter, rate, beats, profile, store.ports)
                    row = _row(store.label, shards, rate, beats, fires, cost)
                    table.rows.append(row)
                    series = f"{store.label}, {shards} shard(s), {beats} beat(s)"
                    cpu = row["Redis CPU ms / 1000 fires"]
                    table.series.setdefault(series, []).append((rate, cpu))
                    if not keeps_up(fires, rate):
                        table.notes.append(f"{series} falls behind at {rate:,} fires/s offered.")
                        break


def ceilings(table: Table) -> list[str]:
    """Per store and shard count, the fires/s its measured Redis CPU per fire projects: one
    Redis core's second divided by the cheapest CPU per fire measured, times the masters the
    shards spread over."""
    notes = []
    for store, masters in ((ONE_REDIS, 1), (ON_CLUSTER, MASTERS)):
        for shards in sorted({r["shards"] for r in table.rows if r["store"] == store}):
            rows = [r for r in table.rows if r["store"] == store and r["shards"] == shards]
            cpu = min(r["Redis CPU ms / 1000 fires"] for r in rows)
            used = min(masters, shards)
            if cpu > 0:
                per_core = redis_ceiling(cpu, 1)
                notes.append(
                    f"Projected ceiling, {store}, {shards} shard(s): {per_core:,.0f} fires/s per "
                    f"Redis core ({cpu:g} ms per 1,000 fires) x {used} master(s) = "
                    f"{redis_ceiling(cpu, used):,.0f} fires/s."
                )
    return notes


def _row(
    store: str, shards: int, rate: int, beats: int, fires: Fires, cost: dict[str, float]
) -> dict[str, Any]:
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
