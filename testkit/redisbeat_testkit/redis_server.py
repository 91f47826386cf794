"""Private redis-servers on free ports, and clients a test leaves for its fixtures to close."""

from __future__ import annotations

import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from .ports import free_port, wait_until
from .processes import stop_process

#: Clients a test made and may not close itself; the tests' conftest closes them after each
#: test, so no socket is left for the garbage collector to warn about.
OPENED: list[redis.Redis] = []


def tracked(client: redis.Redis) -> redis.Redis:
    OPENED.append(client)
    return client


def wait_for_ping(client: redis.Redis, process: subprocess.Popen[bytes], what: str) -> None:
    """Wait up to 10 s for ``client`` to answer PING (failing at once if ``process`` dies),
    then close it."""

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            assert process.poll() is None, f"{what} died"
            return False

    try:
        wait_until(answers, 10, what)
    finally:
        client.close()


def redis_server_binary() -> str | None:
    """The redis-server on the PATH, or None."""
    return shutil.which("redis-server")


def redis_server_argv(binary: str, port: int, directory: Path) -> list[str]:
    """A redis-server on 127.0.0.1:``port`` in the foreground, with no RDB snapshots."""
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]


@dataclass
class RedisServer:
    """A private redis-server on a free port, optionally with an append-only file."""

    directory: Path
    persistent: bool = False
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    #: More redis-server options, e.g. ``["--maxmemory", "10mb"]``; later ones win.
    extra_args: list[str] = field(default_factory=list)
    #: Keyword arguments for the client that checks the server is up (e.g. TLS options).
    client_kwargs: dict[str, Any] = field(default_factory=dict)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it)")
        args = redis_server_argv(binary, self.port, self.directory)
        args += ["--save", "", "--logfile", "redis.log", "--daemonize", "no"]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        args += self.extra_args
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5, **self.client_kwargs)
        wait_for_ping(client, self.process, f"redis-server on port {self.port}")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_process(self.process, sig)
        self.process = None
