"""A private Redis Sentinel group for tests and fault injection: master, replicas, sentinels.

Everything runs on loopback ports of its own, under one directory, and is stopped by
:meth:`SentinelGroup.stop`::

    from redisbeat_testkit.sentinel import SentinelGroup

    group = SentinelGroup(tmp_dir).start()
    try:
        url = group.url()              # "sentinel://127.0.0.1:p1;sentinel://127.0.0.1:p2;..."
        group.failover()               # SENTINEL FAILOVER, returns once the new master writes
        group.kill_master()            # kill -9 the master, returns once a replica took over
        group.restore()                # bring stopped servers back as replicas
    finally:
        group.stop()
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from .ports import wait_until
from .redis_server import RedisServer
from .sentinel_process import HOST, Address, SentinelProcess

#: Options of every redis-server of a group: a replica (re)syncs at once, not after the
#: default 5 s wait for more replicas to share the transfer.
SERVER_ARGS = ["--repl-diskless-sync-delay", "0"]


@dataclass
class SentinelGroup:
    """A monitored master with replicas, watched by three sentinels (quorum 2)."""

    directory: Path
    master_name: str = "mymaster"
    replica_count: int = 1
    sentinel_count: int = 3
    quorum: int = 2
    down_after_ms: int = 1000
    failover_timeout_ms: int = 5000
    #: Every redis-server of the group; which one is the master changes with failovers.
    servers: list[RedisServer] = field(default_factory=list)
    sentinels: list[SentinelProcess] = field(default_factory=list)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> SentinelGroup:
        """Start everything; return once every sentinel sees the master, replicas and peers."""
        try:
            master = self._server("server-0", [])
            master.start()
            for i in range(self.replica_count):
                replica = self._server(f"server-{i + 1}", self._replicaof(master.port))
                replica.start()
            self._wait_replicas_online(master, timeout)
            monitor = [
                f"sentinel monitor {self.master_name} {HOST} {master.port} {self.quorum}",
                f"sentinel down-after-milliseconds {self.master_name} {self.down_after_ms}",
                f"sentinel failover-timeout {self.master_name} {self.failover_timeout_ms}",
                f"sentinel parallel-syncs {self.master_name} 1",
            ]
            for i in range(self.sentinel_count):
                sentinel = SentinelProcess(self.directory / f"sentinel-{i}")
                self.sentinels.append(sentinel)
                sentinel.start(monitor)
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every sentinel and server (idempotent)."""
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in self.servers:
            server.stop()

    def _server(self, name: str, extra_args: list[str]) -> RedisServer:
        directory = self.directory / name
        directory.mkdir(parents=True, exist_ok=True)
        server = RedisServer(directory, extra_args=[*SERVER_ARGS, *extra_args])
        self.servers.append(server)
        return server

    @staticmethod
    def _replicaof(port: int) -> list[str]:
        return [*SERVER_ARGS, "--replicaof", HOST, str(port)]

    # -- addresses and clients ------------------------------------------------------------------

    def url(self, db: int = 0) -> str:
        """The ``sentinel://`` URL of every sentinel, ``;``-separated (kombu's format)."""
        return ";".join(f"sentinel://{HOST}:{s.port}/{db}" for s in self.sentinels)

    def sentinel_addresses(self) -> list[Address]:
        return [s.address for s in self.sentinels]

    def master_address(self) -> Address | None:
        """The master as the first sentinel that answers reports it."""
        return next((a for a in map(self._master_seen_by, self.sentinels) if a), None)

    def _master_seen_by(self, sentinel: SentinelProcess) -> Address | None:
        """The master's address as one sentinel reports it (None: no answer)."""
        if sentinel.process is None:
            return None
        client = sentinel.client()
        try:
            reply: Any = client.sentinel_get_master_addr_by_name(self.master_name)
        except redis.RedisError:
            return None
        finally:
            client.close()
        return (str(reply[0]), int(reply[1])) if reply else None

    def _all_agree_on(self, address: Address) -> bool:
        return all(self._master_seen_by(s) == address for s in self.sentinels)

    def master(self) -> RedisServer:
        """The server the sentinels currently report as master."""
        address = self.master_address()
        for server in self.servers:
            if address == (HOST, server.port):
                return server
        raise AssertionError(f"no server of the group is at the master address {address}")

    def replicas(self) -> list[RedisServer]:
        """Every other server of the group (running or not)."""
        master = self.master()
        return [s for s in self.servers if s is not master]

    def master_client(self, db: int = 0) -> redis.Redis:
        """A plain client of the current master (not following failovers)."""
        return redis.Redis(HOST, self.master().port, db=db, decode_responses=True)

    # -- faults ---------------------------------------------------------------------------------

    def failover(self, timeout: float = 30.0) -> RedisServer:
        """``SENTINEL FAILOVER``; returns the new master once every sentinel reports it and it
        accepts writes. The old master is demoted later, when a sentinel reconfigures it."""
        old = self.master()
        client = self.sentinels[0].client()
        try:
            client.sentinel_failover(self.master_name)
        except redis.ResponseError as exc:
            # The sentinels started one of their own (on a loaded machine a master can miss
            # down-after-milliseconds): the fault happens all the same. Its new master may
            # already be the one reported above, so wait for its end, not for another master.
            if "INPROG" not in str(exc):
                raise
            return self._wait_failover_over(timeout)
        finally:
            client.close()
        return self._wait_new_master(old, timeout)

    def kill_master(self, timeout: float = 30.0) -> RedisServer:
        """kill -9 the master; returns the replica the sentinels promoted, once it writes."""
        old = self.master()
        old.stop(signal.SIGKILL)
        return self._wait_new_master(old, timeout)

    def stop_server(self, server: RedisServer) -> None:
        """Stop one server (e.g. a replica, to see writes go unacknowledged)."""
        server.stop()

    def restore(self, timeout: float = 30.0) -> None:
        """Start every stopped server again as a replica of the current master; wait until the
        group is healthy."""
        master = self.master()
        for server in self.servers:
            if server.process is None:
                server.extra_args = self._replicaof(master.port)
                server.start()
        self.wait_healthy(timeout)

    # -- waiting --------------------------------------------------------------------------------

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until every sentinel agrees on the master, which accepts writes, and knows
        every running replica (online, link up) and every other sentinel."""
        wait_until(self._healthy, timeout, f"sentinel group {self.master_name} to be healthy", 0.1)

    def _healthy(self) -> bool:
        address = self.master_address()
        if address is None:
            return False
        running = {(HOST, s.port) for s in self.servers if s.process is not None} - {address}
        if not self._all_agree_on(address):
            return False
        for sentinel in self.sentinels:
            client = sentinel.client()
            try:
                # What a sentinel says about a replica's own link comes from an INFO it sends
                # every 10 s; the master's view of its replicas (checked below) is current.
                seen = {
                    (str(r["ip"]), int(r["port"]))
                    for r in client.sentinel_slaves(self.master_name)
                    if r.get("is_slave") and not r.get("is_sdown")
                }
                if not running <= seen:
                    return False
                peers: Any = client.sentinel_sentinels(self.master_name)
                if len(peers) < self.sentinel_count - 1:
                    return False
                # A failover that has promoted its replica but not yet ended refuses the
                # next SENTINEL FAILOVER (INPROG): healthy means it is over.
                if self._failing_over(sentinel):
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return self._writable(address) and self._replicas_online(address, len(running))

    def _wait_new_master(self, old: RedisServer, timeout: float) -> RedisServer:
        def promoted() -> RedisServer | None:
            address = self.master_address()
            if address is None or address == (HOST, old.port):
                return None
            if not self._all_agree_on(address) or not self._writable(address):
                return None
            return self.master()

        new: RedisServer = wait_until(promoted, timeout, "a new master to be promoted", 0.05)
        return new

    def _wait_failover_over(self, timeout: float) -> RedisServer:
        """Wait until no sentinel is failing the master over and every one agrees on a master
        that accepts writes; that master."""

        def over() -> RedisServer | None:
            address = self.master_address()
            if address is None or not self._all_agree_on(address):
                return None
            if any(self._failing_over(s) for s in self.sentinels) or not self._writable(address):
                return None
            return self.master()

        done: RedisServer = wait_until(over, timeout, "the failover in progress to end", 0.05)
        return done

    def _failing_over(self, sentinel: SentinelProcess) -> bool:
        """Whether one sentinel reports a failover of the master in progress (or no answer)."""
        client = sentinel.client()
        try:
            state: Any = client.sentinel_master(self.master_name)
        except redis.RedisError:
            return True
        finally:
            client.close()
        return "failover_in_progress" in str(state.get("flags", ""))

    def _wait_replicas_online(self, master: RedisServer, timeout: float) -> None:
        wait_until(
            lambda: self._replicas_online((HOST, master.port), self.replica_count),
            timeout,
            "the replicas to sync",
            0.05,
        )

    @staticmethod
    def _writable(address: Address) -> bool:
        client = redis.Redis(*address, socket_timeout=2, socket_connect_timeout=1)
        try:
            # A short-lived key: the only write the group makes of its own.
            return client.info("replication").get("role") == "master" and bool(
                client.set("sentinel-group:probe", str(time.time()), px=5000)
            )
        except redis.RedisError:
            return False
        finally:
            client.close()

    @staticmethod
    def _replicas_online(address: Address, count: int) -> bool:
        client = redis.Redis(*address, socket_timeout=2, socket_connect_timeout=1)
        try:
            info = client.info("replication")
        except redis.RedisError:
            return False
        finally:
            client.close()
        online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        return sum(1 for v in online if v.get("state") == "online") >= count
