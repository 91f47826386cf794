"""Real processes for the tests: private redis-servers and celery beats, always cleaned up."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).parent


#: Clients a test made and may not close itself; the conftest closes them after each test,
#: so no socket is left for the garbage collector to warn about.
OPENED: list[redis.Redis] = []


def tracked(client: redis.Redis) -> redis.Redis:
    OPENED.append(client)
    return client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02
) -> Any:
    """Poll until ``predicate()`` is truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def stop_process(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    """Signal a process and reap it; kill it if it is still there after 10 s."""
    if process is not None and process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it)")
        args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--logfile",
            "redis.log",
            "--daemonize",
            "no",
        ]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        args += self.extra_args
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5, **self.client_kwargs)
        wait_until(lambda: self._ping(client), 10, f"redis-server on port {self.port}")
        client.close()
        return self

    def _ping(self, client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            assert self.process is not None and self.process.poll() is None, "redis-server died"
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_process(self.process, sig)
        self.process = None


@dataclass
class Beat:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Beats:
    """``celery -A proj beat -S redisbeat.RedisScheduler`` processes for one test."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.directory = directory
        self.env = env
        self.beats: list[Beat] = []
        #: Pass ``-S redisbeat.RedisScheduler`` (else the app's beat_scheduler setting decides).
        self.scheduler_flag = True

    def start(self, count: int = 1, **extra_env: str) -> list[Beat]:
        started = []
        for _ in range(count):
            log = self.directory / f"beat-{len(self.beats)}.log"
            # pytest-django exports DJANGO_SETTINGS_MODULE, which would make Celery set up
            # the tests' Django project inside a plain beat.
            inherited = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
            env = {**inherited, **self.env, **extra_env, "PYTHONPATH": str(HERE)}
            handle = log.open("wb")
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "proj",
                    "beat",
                    *(["-S", "redisbeat.RedisScheduler"] if self.scheduler_flag else []),
                    "--loglevel",
                    "INFO",
                    "--pidfile",
                    "",
                    "--schedule",
                    str(self.directory / "unused-schedule"),
                ],
                cwd=self.directory,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
            handle.close()
            beat = Beat(process, log)
            self.beats.append(beat)
            started.append(beat)
        return started

    def stop_all(self) -> None:
        for beat in self.beats:
            if beat.process.poll() is None:
                beat.process.send_signal(signal.SIGTERM)
        for beat in self.beats:
            try:
                beat.process.wait(15)
            except subprocess.TimeoutExpired:
                beat.process.kill()
                beat.process.wait()


@dataclass(frozen=True)
class Sent:
    """One message a beat put on the broker queue."""

    entry: str
    due_ms: int
    task_id: str
    task: str
    beat: str


def read_queue(client: redis.Redis, queue: str = "celery") -> list[Sent]:
    """Pop every message kombu's Redis transport holds for ``queue``, oldest first."""
    out = []
    while (raw := client.rpop(queue)) is not None:
        headers = json.loads(raw)["headers"]
        out.append(
            Sent(
                headers["redisbeat_entry"],
                int(headers["redisbeat_due"]),
                headers["id"],
                headers["task"],
                headers["redisbeat_beat"],
            )
        )
    return out
