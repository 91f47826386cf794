"""One cluster-enabled redis-server of a :class:`~.cluster.ClusterRig`, and its admin client."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .cluster_view import ClusterView, parse_info
from .ports import free_port
from .processes import stop_process
from .redis_server import redis_server_argv, redis_server_binary, wait_for_ping

HOST = "127.0.0.1"


class PortTaken(RuntimeError):
    """A port found free was taken before redis-server bound it: start again on others."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (the OS may hand the same one out twice in a row)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


@dataclass
class ClusterProcess:
    """A redis-server with ``--cluster-enabled yes``; its node id lives in its nodes file, so
    a restart brings the same node back."""

    directory: Path
    port: int
    #: The cluster bus port, chosen free too: the default (port + 10000) can be past 65535.
    bus_port: int
    node_timeout_ms: int
    process: subprocess.Popen[bytes] | None = None
    admin: redis.Redis | None = None

    @property
    def log(self) -> Path:
        return self.directory / f"redis-{self.port}.log"

    @property
    def running(self) -> bool:
        return self.process is not None

    def argv(self) -> list[str]:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it)")
        return [
            *redis_server_argv(binary, self.port, self.directory),
            *("--cluster-enabled", "yes"),
            *("--cluster-config-file", str(self.directory / f"nodes-{self.port}.conf")),
            *("--cluster-port", str(self.bus_port)),
            *("--cluster-node-timeout", str(self.node_timeout_ms)),
            # A replica may take over however long ago it last heard its master: a loaded
            # machine must not leave a killed master's slots without a server.
            *("--cluster-replica-validity-factor", "0"),
            # A replica (re)syncs at once, not after waiting 5 s for others to share it.
            *("--repl-diskless-sync-delay", "0"),
            *("--appendonly", "no", "--save", ""),
            *("--logfile", str(self.log), "--daemonize", "no"),
        ]

    def start(self) -> ClusterProcess:
        """Start it and wait for PING; :class:`PortTaken` if either port was taken."""
        self.process = subprocess.Popen(
            self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        # Whatever holds a taken port may accept and never answer: no waiting on it, no retry.
        client = redis.Redis(
            HOST,
            self.port,
            socket_connect_timeout=0.5,
            socket_timeout=0.5,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            wait_for_ping(client, self.process, f"cluster node on port {self.port}")
        except AssertionError:
            self.stop(signal.SIGKILL)
            if self.log.exists() and "Address already in use" in self.log.read_text():
                raise PortTaken(f"port {self.port} or {self.bus_port} was taken") from None
            raise
        self.admin = redis.Redis(
            HOST, self.port, decode_responses=True, socket_timeout=2, socket_connect_timeout=1
        )
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop it (SIGKILL: as if it crashed) and close its admin client; idempotent."""
        if self.admin is not None:
            self.admin.close()
            self.admin = None
        stop_process(self.process, sig)
        self.process = None

    def command(self, *args: Any) -> Any:
        """A command on this node alone, answered unparsed."""
        if self.admin is None:
            raise RuntimeError(f"cluster node on port {self.port} is not running")
        return self.admin.execute_command(*args)  # type: ignore[no-untyped-call]

    def view(self) -> ClusterView:
        return ClusterView.parse(str(self.command("CLUSTER", "NODES")))

    def info(self) -> dict[str, str]:
        return parse_info(str(self.command("CLUSTER", "INFO")))

    def replication(self) -> dict[str, Any]:
        info: dict[str, Any] = self.admin.info("replication") if self.admin else {}
        return info
