"""What one node of a Redis Cluster says about the cluster, parsed from ``CLUSTER NODES``.

Pure parsing, no sockets: the rig (:mod:`.cluster`) compares the views of every node to know
when they agree on roles and on who serves each slot.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Every slot of a cluster.
SLOTS = 16384

#: Flags that mean a node is not (yet, or no longer) a healthy member.
UNHEALTHY = frozenset({"fail", "fail?", "handshake", "noaddr"})

SlotRange = tuple[int, int]


@dataclass(frozen=True)
class NodeLine:
    """One line of ``CLUSTER NODES``: a node as the answering node sees it."""

    node_id: str
    port: int
    flags: frozenset[str]
    #: The node id of its master; None for a master.
    master_id: str | None
    #: The slot ranges it serves (inclusive), in the order printed; migrations are left out.
    slots: tuple[SlotRange, ...]

    @property
    def is_master(self) -> bool:
        return "master" in self.flags

    @property
    def healthy(self) -> bool:
        return not self.flags & UNHEALTHY

    def serves(self, slot: int) -> bool:
        return any(start <= slot <= end for start, end in self.slots)


def parse_line(line: str) -> NodeLine:
    """One line: ``id ip:port@cport[,hostname] flags master ping pong epoch link slot...``."""
    fields = line.split()
    address = fields[1].split("@", 1)[0]
    slots: list[SlotRange] = []
    # "[slot->-id]" / "[slot-<-id]" mark a slot migrating or importing: not served by it (yet).
    for token in (t for t in fields[8:] if not t.startswith("[")):
        start, _, end = token.partition("-")
        slots.append((int(start), int(end or start)))
    return NodeLine(
        node_id=fields[0],
        port=int(address.rsplit(":", 1)[1] or 0),
        flags=frozenset(fields[2].split(",")),
        master_id=None if fields[3] == "-" else fields[3],
        slots=tuple(slots),
    )


def parse_info(text: str) -> dict[str, str]:
    """``CLUSTER INFO``'s ``key:value`` lines as a dict."""
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


@dataclass(frozen=True)
class ClusterView:
    """Every node as one node sees it."""

    nodes: tuple[NodeLine, ...]

    @classmethod
    def parse(cls, text: str) -> ClusterView:
        return cls(tuple(parse_line(line) for line in text.splitlines() if line.strip()))

    @property
    def myself(self) -> NodeLine:
        return next(n for n in self.nodes if "myself" in n.flags)

    def node(self, port: int) -> NodeLine:
        found = [n for n in self.nodes if n.port == port]
        if not found:
            raise KeyError(f"no node on port {port} in this view")
        return found[0]

    def port_of(self, node_id: str | None) -> int | None:
        return next((n.port for n in self.nodes if n.node_id == node_id), None)

    def owner(self, slot: int) -> int | None:
        """The port of the master serving ``slot`` (None: nobody)."""
        return next((n.port for n in self.nodes if n.is_master and n.serves(slot)), None)

    def replicas_of(self, port: int) -> list[int]:
        master_id = self.node(port).node_id
        return sorted(n.port for n in self.nodes if n.master_id == master_id)

    def shape(self) -> frozenset[tuple[int, bool, int | None, tuple[SlotRange, ...]]]:
        """Who is master, whose replica and serving which slots: what every node must agree
        on. Flags such as ``fail?`` are left out, as each node suspects on its own clock."""
        return frozenset(
            (n.port, n.is_master, self.port_of(n.master_id), tuple(sorted(n.slots)))
            for n in self.nodes
        )
