"""Private redis-servers on free ports, and clients a test leaves for its fixtures to close."""

from __future__ import annotations

import os
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
    """The redis-server every server of the kit runs (plain, Sentinel and Cluster nodes): the
    one ``REDISBEAT_TEST_REDIS_SERVER`` names (a path or a command, e.g. a Valkey server), else
    ``redis-server`` on the PATH, or None."""
    chosen = os.environ.get("REDISBEAT_TEST_REDIS_SERVER")
    if not chosen:
        return shutil.which("redis-server")
    found = shutil.which(chosen)
    if found is None:  # never fall back to another server than the one asked for
        raise RuntimeError(f"REDISBEAT_TEST_REDIS_SERVER={chosen}: no such executable")
    return found


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

    def start(self, attempts: int = 3) -> RedisServer:
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
        try:
            wait_for_ping(client, self.process, f"redis-server on port {self.port}")
        except AssertionError:
            if attempts <= 1 or not self._port_was_taken():
                raise
            # Another process bound the port between free_port() and this server: once more.
            self.port = free_port()
            return self.start(attempts - 1)
        return self

    def _port_was_taken(self) -> bool:
        if self.process is None or self.process.poll() is None:
            return False
        log = self.directory / "redis.log"
        return log.exists() and "Address already in use" in log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_process(self.process, sig)
        self.process = None
