"""The processes of one chaos run: the store, the broker, the beats, and per-beat faults."""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from redisbeat import ScheduleStore
from redisbeat.config import Config
from redisbeat.store.keys import Keys
from redisbeat.store.records import BeatInfo
from redisbeat_testkit.faketime import libfaketime
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beat, Beats
from redisbeat_testkit.proxy import TcpProxy
from redisbeat_testkit.redis_server import RedisServer
from redisbeat_testkit.sentinel import SentinelGroup

from .store_cluster import StoreCluster
from .workload import STEADY


def _beats_or_none(store: ScheduleStore) -> list[BeatInfo]:
    try:
        return store.beats()
    except redis.RedisError:
        return []


@dataclass
class Settings:
    lease_seconds: float = 5.0
    heartbeat_seconds: float = 2.0
    batch_size: int = 100
    prefix: str = "chaos"
    #: Hold the schedule in a Sentinel group (a master, a replica, three sentinels).
    sentinel: bool = False
    #: redisbeat_wait_replicas for the beats and the workload's writes.
    wait_replicas: int = 0
    #: Hold the schedule in a Redis Cluster (three masters, a replica each).
    cluster: bool = False
    #: redisbeat_shards for the beats and the workload: the count a new deployment records.
    shards: int = 1


@dataclass
class Cluster:
    """A persistent store redis-server (or a Sentinel group, or a Redis Cluster), a broker
    redis-server and the beats between them."""

    directory: Path
    settings: Settings
    store_server: RedisServer = field(init=False)
    sentinel: SentinelGroup | None = field(init=False, default=None)
    store_cluster: StoreCluster | None = field(init=False, default=None)
    broker_server: RedisServer = field(init=False)
    beats: Beats = field(init=False)
    #: Beat -> the proxy between it and the store, for the beats that have one.
    proxies: dict[int, TcpProxy] = field(default_factory=dict)
    #: Beat -> the proxy between it and the broker, for the beats that have one.
    broker_proxies: dict[int, TcpProxy] = field(default_factory=dict)
    #: Beat -> its clock offset, for the beats whose clock is skewed.
    skews: dict[int, str] = field(default_factory=dict)
    #: Beats killed with kill -9 so far (the fault alternates how it catches them).
    kills: int = 0

    def __post_init__(self) -> None:
        (self.directory / "store").mkdir(parents=True, exist_ok=True)
        (self.directory / "broker").mkdir(exist_ok=True)
        (self.directory / "freeze").mkdir(exist_ok=True)
        self.store_server = RedisServer(self.directory / "store", persistent=True)
        self.broker_server = RedisServer(self.directory / "broker")
        s = self.settings
        env = {
            "TEST_BROKER_URL": self.broker_server.url(0),
            "TEST_STORE_URL": self.store_server.url(0),
            "TEST_PREFIX": s.prefix,
            "TEST_LEASE": str(s.lease_seconds),
            "TEST_HEARTBEAT": str(s.heartbeat_seconds),
            "TEST_BATCH": str(s.batch_size),
            "TEST_MAX_INTERVAL": "5",
            "TEST_WAIT_REPLICAS": str(s.wait_replicas),
            "TEST_SHARDS": str(s.shards),
            "TEST_FREEZE_DIR": str(self.directory / "freeze"),
            "TEST_FREEZE_ONLY": STEADY,
        }
        if s.sentinel:
            self.sentinel = SentinelGroup(self.directory / "sentinel")
        if s.cluster:
            self.store_cluster = StoreCluster(self.directory / "store-cluster")
        self.beats = Beats(self.directory, env)
        #: Slot -> index in self.beats.beats of the process now in that slot.
        self.slots: list[int] = []

    def start_servers(self) -> None:
        # The ports of the sentinels and the cluster's nodes are known once they run.
        if self.sentinel is not None:
            self.sentinel.start()
            self.beats.env.update(TEST_SENTINEL_MASTER="mymaster")
        elif self.store_cluster is not None:
            self.store_cluster.start()
        else:
            self.store_server.start()
        self.beats.env.update(TEST_STORE_URL=self.store_url)
        self.broker_server.start()

    @property
    def store_url(self) -> str:
        """The schedule's URL: the server's, the sentinels' or the cluster's seed nodes."""
        if self.sentinel is not None:
            return self.sentinel.url(0)
        if self.store_cluster is not None:
            return self.store_cluster.url
        return self.store_server.url(0)

    @property
    def store_port(self) -> int:
        """The port of the one store redis-server (what a proxy to the store forwards to)."""
        if self.sentinel is not None or self.store_cluster is not None:
            raise ValueError("the store is no single redis-server: no proxy can stand for it")
        return self.store_server.port

    @property
    def keys(self) -> Keys:
        return Keys(self.settings.prefix)

    def store(self) -> ScheduleStore:
        """A store client of the workload and the harness, through Sentinel or the cluster
        when there is one."""
        s = self.settings
        config = Config(
            redis_url=self.store_url,
            key_prefix=s.prefix,
            sentinel_master="mymaster" if self.sentinel is not None else None,
            wait_replicas=s.wait_replicas,
            shards=s.shards,
            redis_options={"socket_timeout": 5, "socket_connect_timeout": 5},
        )
        return ScheduleStore.from_config(config)

    # -- beats --------------------------------------------------------------------------------

    def start_beats(self, count: int) -> None:
        for slot in range(count):
            self.slots.append(-1)
            self.start_beat(slot)

    def start_beat(self, slot: int) -> None:
        env: dict[str, str] = {}
        if slot in self.proxies:
            env["TEST_STORE_URL"] = self.proxies[slot].url(0)
        if slot in self.broker_proxies:
            env["TEST_BROKER_URL"] = self.broker_proxies[slot].url(0)
        if slot in self.skews:
            env.update(
                LD_PRELOAD=libfaketime(),
                FAKETIME=self.skews[slot],
                # The monotonic clock is shifted too (durations are unchanged): with it left
                # alone, libfaketime 0.9.10 makes Python's time.sleep() fail with EINVAL.
                FAKETIME_NO_CACHE="1",
            )
        (beat,) = self.beats.start(1, **env)
        self.slots[slot] = self.beats.beats.index(beat)
        store = self.store()
        try:
            wait_until(
                lambda: beat.process.pid in {b.pid for b in _beats_or_none(store)},
                60,
                f"beat {slot} (pid {beat.process.pid}) to register",
                interval=0.1,
            )
        finally:
            store.close()

    def beat(self, slot: int) -> Beat:
        return self.beats.beats[self.slots[slot]]

    def live_slots(self) -> list[int]:
        return [s for s in range(len(self.slots)) if self.beat(s).process.poll() is None]

    def freeze_holding_claims(self, slot: int, rng: random.Random, tries: int = 300) -> bool:
        """SIGSTOP the beat at a moment it holds claims (True), or give up and leave it running."""
        process = self.beat(slot).process
        store = self.store()
        try:
            for _ in range(tries):
                process.send_signal(signal.SIGSTOP)
                holders = [
                    claim
                    for shard in store.all_shards()
                    for claim in store.client.hvals(shard.keys.inflight)
                ]
                if any(f":{process.pid}:" in str(claim) for claim in holders):
                    return True
                process.send_signal(signal.SIGCONT)
                time.sleep(rng.uniform(0.005, 0.03))
            return False
        finally:
            store.close()

    def freeze_after_send(self, slot: int, seconds: float = 10) -> bool:
        """Make the beat hang right after it next publishes a batch, before it records it
        (True), or give up after ``seconds`` and leave it running (the proj's hook)."""
        pid = self.beat(slot).process.pid
        (self.directory / "freeze" / f"{pid}.freeze").touch()
        frozen = self.directory / "freeze" / f"{pid}.frozen"
        deadline = time.monotonic() + seconds
        while not frozen.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return frozen.exists()

    def kill(self, slot: int, sig: int) -> None:
        process = self.beat(slot).process
        process.send_signal(sig)
        process.wait(30)

    def restart_store(self) -> None:
        """kill -9 the store's redis-server and start it again from its append-only file."""
        if self.sentinel is not None or self.store_cluster is not None:
            raise ValueError("the store is no single redis-server to restart")
        self.store_server.stop(signal.SIGKILL)
        self.store_server.start()

    def random_slot(self, rng: random.Random) -> int:
        return rng.choice(self.live_slots())

    # -- the end ------------------------------------------------------------------------------

    def stop(self) -> None:
        self.beats.stop_all()
        for proxy in [*self.proxies.values(), *self.broker_proxies.values()]:
            proxy.stop()
        if self.sentinel is not None:
            self.sentinel.stop()
        if self.store_cluster is not None:
            self.store_cluster.stop()
        self.store_server.stop()
        self.broker_server.stop()

    def beat_logs(self) -> str:
        return "\n".join(b.output() for b in self.beats.beats)

    def exit_codes(self) -> list[int | None]:
        return [b.process.poll() for b in self.beats.beats]
