"""When a :class:`~.cluster.ClusterRig` has settled: what every running node must say at once.

Clients and the rig's own waits rely on it after a start, a failover, a kill or a slot move.
"""

from __future__ import annotations

import redis

from .cluster_process import ClusterProcess
from .cluster_view import SLOTS, ClusterView


def settled(nodes: list[ClusterProcess]) -> bool:
    """Whether every running node says ``cluster_state:ok`` with every slot served, knows
    every node, agrees with the others on roles and slots, suspects no running node, and
    whether every slot is served by a running master whose running replicas are in sync."""
    running = [n for n in nodes if n.running]
    ports = {n.port for n in running}
    try:
        if not all(info_ok(n.info(), len(nodes)) for n in running):
            return False
        views = [n.view() for n in running]
        if len({v.shape() for v in views}) != 1:
            return False
        if any(not v.node(port).healthy for v in views for port in ports):
            return False
        view = views[0]
        if any(n.is_master and n.slots and n.port not in ports for n in view.nodes):
            return False
        return all(linked(n, view, ports) for n in running)
    except (redis.RedisError, KeyError):
        return False


def info_ok(info: dict[str, str], known_nodes: int) -> bool:
    """``CLUSTER INFO`` of a node that serves requests and has met every node."""
    return (
        info.get("cluster_state") == "ok"
        and info.get("cluster_slots_ok") == str(SLOTS)
        and info.get("cluster_known_nodes") == str(known_nodes)
    )


def linked(node: ClusterProcess, view: ClusterView, running: set[int]) -> bool:
    """A replica of a running master has its replication link up; a master needs nothing."""
    master = view.port_of(view.node(node.port).master_id)
    if master is None or master not in running:
        return True
    info = node.replication()
    return info.get("master_port") == master and info.get("master_link_status") == "up"
