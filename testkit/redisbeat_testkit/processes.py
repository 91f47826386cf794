"""Stopping processes, and ``celery beat`` and ``celery worker`` processes running the kit's
Celery app."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: The Celery app the beats run (:mod:`redisbeat_testkit.proj`).
BEAT_APP = "redisbeat_testkit.proj"


def stop_process(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    """Signal a process and reap it; kill it if it is still there after 10 s."""
    if process is not None and process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def environ_without_django() -> dict[str, str]:
    """This process's environment less ``DJANGO_SETTINGS_MODULE``.

    pytest-django exports it, and a child that inherits it has Celery set up the tests'
    Django project inside a plain beat; a child that needs Django is given its own."""
    return {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}


@dataclass
class Beat:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Beats:
    """``celery -A redisbeat_testkit.proj beat -S redisbeat.RedisScheduler`` processes."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.directory = directory
        self.env = env
        self.beats: list[Beat] = []
        #: Pass ``-S redisbeat.RedisScheduler`` (else the app's beat_scheduler setting decides).
        self.scheduler_flag = True
        #: The Python that runs them (another venv's runs another release of redisbeat).
        self.python = sys.executable

    def start(self, count: int = 1, **extra_env: str) -> list[Beat]:
        started = []
        for _ in range(count):
            scheduler = ["-S", "redisbeat.RedisScheduler"] if self.scheduler_flag else []
            unused = str(self.directory / "unused-schedule")
            args = ["beat", *scheduler, "--pidfile", "", "--schedule", unused]
            started.append(self._run(f"beat-{len(self.beats)}.log", args, extra_env))
        return started

    def start_worker(
        self, concurrency: int = 2, queues: str | None = None, **extra_env: str
    ) -> Beat:
        """A ``celery worker`` (prefork) on the same app, broker and settings; ``queues``:
        the queues it consumes (``-Q``), else Celery's default one."""
        name = f"worker{len(self.beats)}@test"
        args = ["worker", "-c", str(concurrency), "-n", name, "--without-gossip"]
        args += ["--without-mingle", "--without-heartbeat"]
        args += ["-Q", queues] if queues else []
        return self._run(f"worker-{len(self.beats)}.log", args, extra_env)

    def _run(self, log_name: str, args: list[str], extra_env: dict[str, str]) -> Beat:
        log = self.directory / log_name
        env = {**environ_without_django(), **self.env, **extra_env}
        handle = log.open("wb")
        process = subprocess.Popen(
            [self.python, "-m", "celery", "-A", BEAT_APP, *args, "--loglevel", "INFO"],
            cwd=self.directory,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        handle.close()
        beat = Beat(process, log)
        self.beats.append(beat)
        return beat

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
