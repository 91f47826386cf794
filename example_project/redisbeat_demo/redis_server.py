"""The demo's Redis: a private redis-server on a free port, or the one ``REDIS_URL`` names."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from redisbeat_testkit.ports import free_port
from redisbeat_testkit.redis_server import redis_server_argv, redis_server_binary

from .processes import Child, Children


class DemoError(Exception):
    """Something the demo needs is missing or broken; the message says what to do."""


class PrivateRedis:
    """A redis-server with no persistence in a temporary directory, removed at the end."""

    def __init__(self, children: Children, log: Path) -> None:
        self.children = children
        self.log = log
        self.directory: Path | None = None
        self.child: Child | None = None

    def start(self, interrupted: Callable[[], bool]) -> str:
        binary = redis_server_binary()
        if binary is None:
            raise DemoError(
                "redis-server is not installed. Install it (Debian/Ubuntu: sudo apt-get install "
                "redis-server, macOS: brew install redis; `make redis-server` does it as root), "
                "or set REDIS_URL to a Redis server you run."
            )
        self.directory = Path(tempfile.mkdtemp(prefix="redisbeat-demo-redis-"))
        port = free_port()
        argv = redis_server_argv(binary, port, self.directory)
        argv += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        self.child = self.children.start("redis", argv, self.log)
        url = f"redis://127.0.0.1:{port}/0"
        wait_for_redis(url, 10.0, interrupted, self.child)
        return url

    def remove(self) -> None:
        """Delete the data directory (the process is stopped with the other children)."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


def wait_for_redis(
    url: str, timeout: float, interrupted: Callable[[], bool], child: Child | None = None
) -> None:
    """Return once Redis at ``url`` answers PING; raise DemoError after ``timeout`` seconds."""
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=2)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.ping()
                return
            except redis.RedisError as exc:
                if child is not None and not child.alive():
                    raise DemoError(f"redis-server exited:\n{child.tail()}") from None
                if time.monotonic() > deadline or interrupted():
                    raise DemoError(f"Redis at {url} does not answer: {exc}") from None
            time.sleep(0.05)
    finally:
        client.close()
