"""The schedule on a Redis Cluster for a chaos run: three masters with a replica each, and the
faults only a cluster has (a replica promoted, a slot moved to another master)."""

from __future__ import annotations

import random
import time
from pathlib import Path

from redis.crc import key_slot

from redisbeat.store.keys import Keys
from redisbeat_testkit.cluster import ClusterRig

#: Masters, and replicas of each: a failover needs a replica to promote.
MASTERS = 3
REPLICAS_PER_MASTER = 1


class StoreCluster:
    """A :class:`ClusterRig` holding the schedule; the faults say what they did."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.rig = ClusterRig(
            masters=MASTERS, replicas_per_master=REPLICAS_PER_MASTER, parent=directory
        )
        #: Which kind of fault comes next (odd: a failover), once the first is drawn.
        self._turn: int | None = None
        #: Whether the next failover is a graceful one, once the first is drawn.
        self._graceful: bool | None = None

    def start(self) -> None:
        self.rig.start()

    @property
    def url(self) -> str:
        return self.rig.url

    def stop(self) -> None:
        self.rig.stop()

    # -- faults -------------------------------------------------------------------------------

    def failover(self, rng: random.Random) -> str:
        """Promote the replica of a random master, in turn (the first drawn at random) by
        ``CLUSTER FAILOVER`` (the replica catches up first, nothing is lost) and by ``kill -9``
        of the master, its replica promoted once the cluster finds it down and the old master
        back (empty, no persistence) as the new master's replica. Returns once every node
        agrees and the replicas are in sync."""
        port = rng.choice(self.rig.masters())
        graceful = rng.random() < 0.5 if self._graceful is None else self._graceful
        self._graceful = not graceful
        if graceful:
            replica = self.rig.failover(port)
            return f"CLUSTER FAILOVER: {replica} took over from {port}"
        replica = self.rig.kill_master_and_wait_promotion(port)
        self.rig.restart(port)  # waits until it follows the new master, in sync
        return f"kill -9 master {port}: {replica} took over, {port} back as its replica"

    def migrate_shard(self, keys: Keys, shards: int, rng: random.Random) -> str:
        """Move the slot of a random shard's keys to another master, a few keys at a time with
        pauses between, so that the beats meet ASK and TRYAGAIN while the slot is split and
        MOVED after it."""
        shard = rng.randrange(shards)
        key = keys.of_shard(shard).schedule
        slot = key_slot(key.encode())
        source = self.rig.node_for_key(key)
        target = rng.choice([p for p in self.rig.masters() if p != source])
        self.rig.begin_migration(slot, target)
        moved = 0
        while True:
            # A pause with the slot split: keys already moved are answered with ASK, scripts
            # over moved and unmoved keys with TRYAGAIN.
            time.sleep(rng.uniform(0.1, 0.3))
            count = self.rig.migrate_keys(slot, target, count=rng.randint(1, 3))
            if not count:
                break
            moved += count
        self.rig.end_migration(slot, target)
        return f"slot {slot} (shard {shard}, {moved} keys) moved from {source} to {target}"

    def alternate(self, keys: Keys, shards: int, rng: random.Random) -> str:
        """A failover and a slot migration in turn, the first chosen at random."""
        if self._turn is None:
            self._turn = rng.randrange(2)
        self._turn += 1
        if self._turn % 2:
            return self.failover(rng)
        return self.migrate_shard(keys, shards, rng)
