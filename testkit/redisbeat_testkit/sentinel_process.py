"""One ``redis-server --sentinel`` process of a Sentinel group, with its own config file."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import redis

from .ports import free_port
from .processes import stop_process
from .redis_server import redis_server_binary, wait_for_ping

Address = tuple[str, int]

HOST = "127.0.0.1"


@dataclass
class SentinelProcess:
    """One ``redis-server --sentinel`` process with its own (writable) config file."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> Address:
        return (HOST, self.port)

    def start(self, lines: list[str]) -> SentinelProcess:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it)")
        self.directory.mkdir(parents=True, exist_ok=True)
        conf = self.directory / "sentinel.conf"
        # Sentinel rewrites this file as it learns the group, so it must be writable.
        conf.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    f"bind {HOST}",
                    "daemonize no",
                    f"dir {self.directory}",
                    f"logfile {self.directory / 'sentinel.log'}",
                    *lines,
                ]
            )
            + "\n"
        )
        self.process = subprocess.Popen(
            [binary, str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_ping(self.client(), self.process, f"sentinel on port {self.port}")
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(HOST, self.port, decode_responses=True, socket_timeout=5)

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
