"""A private Redis Cluster for tests: masters and replicas on loopback ports, always cleaned up.

Nodes are identified by port throughout::

    from redisbeat_testkit.cluster import ClusterRig

    with ClusterRig(masters=3, replicas_per_master=1) as rig:
        client = rig.client()           # a redis.cluster.RedisCluster, closed by stop()
        rig.url                         # "redis-cluster://127.0.0.1:p1,127.0.0.1:p2,..."
        port = rig.node_for_key("k")    # the master serving k's slot
        port = rig.failover(port)       # CLUSTER FAILOVER on its replica; the replica's port
        rig.kill_master_and_wait_promotion(port)  # kill -9; returns once a replica serves
        rig.migrate_slot(slot, to_port)  # the slot and its keys move: clients see MOVED
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from .cluster_health import settled
from .cluster_process import HOST, ClusterProcess, PortTaken, free_ports
from .cluster_view import ClusterView
from .ports import wait_until

Address = tuple[str, int]

#: How many times :meth:`ClusterRig.start` picks new ports when one was taken meanwhile.
START_ATTEMPTS = 3


class ClusterRig:
    """``masters`` x (1 + ``replicas_per_master``) cluster nodes in a directory of their own."""

    def __init__(
        self,
        masters: int = 3,
        replicas_per_master: int = 0,
        node_timeout_ms: int = 1000,
        parent: Path | None = None,
    ) -> None:
        self.masters_count = masters
        self.replicas_per_master = replicas_per_master
        self.node_timeout_ms = node_timeout_ms
        self.parent = parent
        self.directory: Path | None = None
        self.nodes: list[ClusterProcess] = []
        #: The masters the cluster was created with; clients start from them.
        self.seeds: list[Address] = []
        self._clients: list[RedisCluster | redis.Redis] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> ClusterRig:
        """Start the nodes, create the cluster, and return once every node agrees on it."""
        self.directory = Path(tempfile.mkdtemp(prefix="redis-cluster-", dir=self.parent))
        try:
            for attempt in range(1, START_ATTEMPTS + 1):
                try:
                    self._start_nodes(self.directory)
                    break
                except PortTaken:
                    self._stop_nodes()
                    if attempt == START_ATTEMPTS:
                        raise
            self._create()
            self.wait_settled(timeout)
            self.seeds = [(HOST, port) for port in self.masters()]
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close every client handed out, kill every node, remove the directory; idempotent."""
        while self._clients:
            self._clients.pop().close()
        self._stop_nodes()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> ClusterRig:
        return self if self.directory is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start_nodes(self, directory: Path) -> None:
        count = self.masters_count * (1 + self.replicas_per_master)
        ports = free_ports(2 * count)
        self.nodes = [
            ClusterProcess(directory, port, bus_port, self.node_timeout_ms)
            for port, bus_port in zip(ports[:count], ports[count:], strict=True)
        ]
        for node in self.nodes:
            node.start()

    def _stop_nodes(self) -> None:
        for node in self.nodes:
            node.stop(signal.SIGKILL)

    def _create(self) -> None:
        """``redis-cli --cluster create``: assign the slots and the replicas, join the nodes."""
        binary = shutil.which("redis-cli")
        if binary is None:
            raise RuntimeError("redis-cli is not installed (it comes with redis-server)")
        result = subprocess.run(
            [
                binary,
                *("--cluster", "create", *(f"{HOST}:{n.port}" for n in self.nodes)),
                *("--cluster-replicas", str(self.replicas_per_master), "--cluster-yes"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0 or "[ERR]" in result.stdout:
            raise RuntimeError(
                f"redis-cli --cluster create failed:\n{result.stdout}{result.stderr}"
            )

    # -- addresses, clients and roles -----------------------------------------------------------

    @property
    def url(self) -> str:
        return "redis-cluster://" + ",".join(f"{host}:{port}" for host, port in self.seeds)

    @property
    def pids(self) -> list[int]:
        return [n.process.pid for n in self.nodes if n.process is not None]

    def client(self, **kwargs: Any) -> RedisCluster:
        """A cluster client starting from the seeds (``decode_responses=True`` unless given),
        closed by :meth:`stop`."""
        options: dict[str, Any] = {"decode_responses": True, **kwargs}
        seeds = [ClusterNode(h, p) for h, p in self.seeds]  # type: ignore[no-untyped-call]
        client = RedisCluster(startup_nodes=seeds, **options)
        self._clients.append(client)
        return client

    def node_client(self, port: int, **kwargs: Any) -> redis.Redis:
        """A plain client of one node (e.g. to WAIT on the connection that wrote), closed by
        :meth:`stop`."""
        client = redis.Redis(HOST, port, **{"decode_responses": True, **kwargs})
        self._clients.append(client)
        return client

    def masters(self) -> list[int]:
        """The running nodes that are masters now."""
        view = self._view()
        return sorted(n.port for n in view.nodes if n.is_master and self._running(n.port))

    def replicas(self) -> list[int]:
        """The running nodes that are replicas now."""
        view = self._view()
        return sorted(n.port for n in view.nodes if not n.is_master and self._running(n.port))

    def node_for_key(self, key: str) -> int:
        """The master serving ``key``'s slot."""
        return self._owner(self.slot_of(key))

    def slot_of(self, key: str) -> int:
        """``key``'s hash slot, as the cluster computes it."""
        return int(self._any_running().command("CLUSTER", "KEYSLOT", key))

    # -- faults ---------------------------------------------------------------------------------

    def kill(self, port: int) -> None:
        """kill -9 one node, as if it crashed."""
        self._node(port).stop(signal.SIGKILL)

    def restart(self, port: int, timeout: float = 30.0) -> None:
        """Start a killed node again (same node id, from its nodes file); wait until settled."""
        self._node(port).start()
        self.wait_settled(timeout)

    def failover(self, master_port: int, timeout: float = 30.0) -> int:
        """``CLUSTER FAILOVER`` on a replica of ``master_port``; the replica's port, once every
        node sees it as the master and the old master as its replica."""
        replica = self._replica_of(master_port)
        self._node(replica).command("CLUSTER", "FAILOVER")

        def promoted() -> bool:
            if not self._settled():
                return False
            view = self._view()
            return view.node(replica).is_master and not view.node(master_port).is_master

        wait_until(promoted, timeout, f"node {replica} to take over from {master_port}", 0.05)
        return replica

    def kill_master_and_wait_promotion(self, port: int, timeout: float = 30.0) -> int:
        """kill -9 a master; the port of the replica that took over, once every running node
        sees it serve the slots and the cluster is ok."""
        replicas = set(self._running_replicas_of(port))
        slots = self._view().node(port).slots
        if not replicas or not slots:
            raise ValueError(f"node {port} is no master with slots and a running replica")
        self.kill(port)

        def promoted() -> int | None:
            owner = self._view().owner(slots[0][0]) if self._settled() else None
            return owner if owner in replicas else None

        new: int = wait_until(promoted, timeout, f"a replica of {port} to take over", 0.05)
        return new

    # -- slot migration -------------------------------------------------------------------------

    def migrate_slot(self, slot: int, to_port: int, timeout: float = 30.0) -> None:
        """Move ``slot`` and its keys to the master ``to_port``; return once every node agrees.
        Its three steps are public too: between them clients meet ASK."""
        if self._view().owner(slot) == to_port:
            return
        self.begin_migration(slot, to_port)
        while self.migrate_keys(slot, to_port):
            pass
        self.end_migration(slot, to_port, timeout)

    def begin_migration(self, slot: int, to_port: int) -> int:
        """Mark ``slot`` importing on ``to_port``, migrating on its owner; the owner's port."""
        source = self._view().owner(slot)
        if source is None or not self._view().node(to_port).is_master:
            raise ValueError(f"slot {slot} has no owner or node {to_port} is no master")
        target, origin = self._node(to_port), self._node(source)
        target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", origin.view().myself.node_id)
        origin.command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.view().myself.node_id)
        return source

    def migrate_keys(self, slot: int, to_port: int, count: int = 100) -> int:
        """MIGRATE up to ``count`` keys of ``slot`` from its owner to ``to_port``; how many."""
        origin = self._node(self._owner(slot))
        keys = origin.command("CLUSTER", "GETKEYSINSLOT", slot, count)
        if keys:
            origin.command("MIGRATE", HOST, to_port, "", 0, 5000, "KEYS", *keys)
        return len(keys)

    def end_migration(self, slot: int, to_port: int, timeout: float = 30.0) -> None:
        """``SETSLOT NODE`` on the target, the old owner, then every other master; wait until
        every node sees ``to_port`` serve the slot. Keys still on the old owner would be lost
        to clients, so they must have moved first."""
        target = self._node(to_port)
        target_id = target.view().myself.node_id
        origin = self._node(self._owner(slot))
        left = int(origin.command("CLUSTER", "COUNTKEYSINSLOT", slot))
        if left and origin is not target:
            raise ValueError(f"{left} keys left in slot {slot} on node {origin.port}")
        others = [self._node(p) for p in self.masters() if p not in (to_port, origin.port)]
        for node in (target, origin, *others):
            node.command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

        def moved() -> bool:
            return self._settled() and self._view().owner(slot) == to_port

        wait_until(moved, timeout, f"every node to see slot {slot} on {to_port}", 0.05)

    # -- waiting --------------------------------------------------------------------------------

    def wait_settled(self, timeout: float = 30.0) -> None:
        """Wait until every running node says ``cluster_state:ok``, every slot is served by a
        running master, and every node agrees on roles and slots and their replicas sync."""
        wait_until(self._settled, timeout, "the cluster to settle", 0.05)

    def _settled(self) -> bool:
        return settled(self.nodes)

    # -- lookups --------------------------------------------------------------------------------

    def _node(self, port: int) -> ClusterProcess:
        found = [n for n in self.nodes if n.port == port]
        if not found:
            raise KeyError(f"no node of this cluster on port {port}")
        return found[0]

    def _running(self, port: int) -> bool:
        return any(n.running for n in self.nodes if n.port == port)

    def _any_running(self) -> ClusterProcess:
        return next(n for n in self.nodes if n.running)

    def _view(self) -> ClusterView:
        return self._any_running().view()

    def _owner(self, slot: int) -> int:
        owner = self._view().owner(slot)
        if owner is None:
            raise AssertionError(f"no master serves slot {slot}")
        return owner

    def _running_replicas_of(self, port: int) -> list[int]:
        return [p for p in self._view().replicas_of(port) if self._running(p)]

    def _replica_of(self, port: int) -> int:
        replicas = self._running_replicas_of(port)
        if not replicas:
            raise ValueError(f"node {port} has no running replica")
        return replicas[0]
