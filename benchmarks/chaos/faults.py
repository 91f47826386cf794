"""The faults a chaos scenario injects: each blocks for its duration and says what it did."""

from __future__ import annotations

import random
import re
import signal
import time
from collections.abc import Callable

import redis

from redisbeat.store.reshard import Reshard
from redisbeat_testkit.proxy import TcpProxy

from .cluster import Cluster

Fault = Callable[[Cluster, random.Random], str]


def kill9(c: Cluster, rng: random.Random) -> str:
    # In turn: caught right after publishing a batch it has not recorded (another beat sends
    # it again, under the same task ids: copies a worker must drop), and caught holding
    # claims (another beat sends what it had not sent): the cases that test recovery.
    slot = c.random_slot(rng)
    c.kills += 1
    if c.kills % 2:
        how = " after sending" if c.freeze_after_send(slot) else ""
    else:
        how = " holding claims" if c.freeze_holding_claims(slot, rng) else ""
    c.kill(slot, signal.SIGKILL)
    c.start_beat(slot)
    return f"kill -9 beat {slot}{how}, restarted"


def sigterm(c: Cluster, rng: random.Random) -> str:
    slot = c.random_slot(rng)
    c.kill(slot, signal.SIGTERM)
    c.start_beat(slot)
    return f"SIGTERM beat {slot}, restarted"


def reshard(c: Cluster, rng: random.Random) -> str:
    """``redisbeat reshard`` to another count, while the beats send and the editor writes."""
    store = c.store()
    try:
        count = rng.choice([n for n in (1, 2, 3, 5) if n != store.layout.shards])
        report = Reshard(store).run(count)
    finally:
        store.close()
    return (
        f"reshard {report.before} -> {count} shards: {report.moved} entries and "
        f"{report.delayed} delayed tasks moved"
    )


def redis_restart(c: Cluster, rng: random.Random) -> str:
    c.restart_store()
    return "kill -9 redis-server, restarted from the AOF"


def _proxy(c: Cluster) -> TcpProxy:
    return c.proxies[0]


def partition_drop(c: Cluster, rng: random.Random) -> str:
    # Longer than the lease, so the other beats take the cut-off beat's claims over.
    seconds = c.settings.lease_seconds + rng.uniform(1, 3)
    _proxy(c).drop()
    time.sleep(seconds)
    _proxy(c).heal()
    return f"partition beat 0 (drop) {seconds:.1f} s"


def partition_stall(c: Cluster, rng: random.Random) -> str:
    # Redis runs the next claim but its reply is held past the lease (yet within the socket
    # timeout): the beat must not send what other beats have taken over meanwhile.
    seconds = c.settings.lease_seconds * rng.uniform(1.1, 1.6)
    k = c.keys
    # The claim script is the one called with the schedule key and then the entries key.
    claim = re.compile(
        re.escape(k.schedule.encode()) + rb"\r\n\$\d+\r\n" + re.escape(k.entries.encode())
    )
    _proxy(c).stall_replies(lambda request: claim.search(request) is not None)
    time.sleep(seconds)
    _proxy(c).heal()
    return f"partition beat 0 (claim reply held) {seconds:.1f} s"


def broker_stall(c: Cluster, rng: random.Random) -> str:
    # The broker takes beat 0's messages but its replies are held for longer than a lease:
    # the beat is stuck mid-batch, still alive. It renews its claims meanwhile, so no other
    # beat takes over and sends them a second time.
    seconds = c.settings.lease_seconds * rng.uniform(1.3, 1.6)
    c.broker_proxies[0].stall_replies()
    time.sleep(seconds)
    c.broker_proxies[0].heal()
    return f"broker replies to beat 0 held {seconds:.1f} s"


def partition_slow(c: Cluster, rng: random.Random) -> str:
    latency = rng.uniform(0.1, 0.4)
    _proxy(c).slow(latency)
    time.sleep(4)
    _proxy(c).heal()
    return f"slow link to beat 0 (+{latency * 1000:.0f} ms per chunk) 4 s"


def sentinel_failover(c: Cluster, rng: random.Random) -> str:
    group = c.sentinel
    assert group is not None
    if rng.random() < 0.5:
        # Sentinel refuses (NOGOODSLAVE) until its last look at the replica restored by the
        # previous fault is recent enough: ask again until it accepts.
        deadline = time.monotonic() + 30
        while True:
            try:
                group.failover()
                break
            except redis.ResponseError as exc:
                if "NOGOODSLAVE" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        what = "SENTINEL FAILOVER"
    else:
        group.kill_master()
        what = "kill -9 the master"
    group.restore(60)  # the old master back as a replica, every sentinel in agreement
    return what


def mixed(c: Cluster, rng: random.Random) -> str:
    fault = rng.choice([kill9, sigterm, redis_restart, partition_drop, partition_stall])
    return fault(c, rng)


def cluster_failover_or_migration(c: Cluster, rng: random.Random) -> str:
    """On a Redis Cluster, in turn: a random master's replica promoted (``CLUSTER FAILOVER``
    or ``kill -9`` of the master), and a random shard's slot moved to another master."""
    assert c.store_cluster is not None
    return c.store_cluster.alternate(c.keys, c.settings.shards, rng)
