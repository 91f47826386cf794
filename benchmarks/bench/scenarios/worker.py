"""Celery's ``countdown`` measured: a real worker takes ETA tasks off the benchmark's broker
and holds them until due; what that costs, and what a restart or a kill -9 does to them.

The tasks go to a queue of their own (:data:`QUEUE`), so the sink, which pops the default
queue, never sees them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from redisbeat_testkit.processes import environ_without_django, stop_process

from ..harness import Rig, rss_of

QUEUE = "bench-countdown"
TASK = "bench.tick"
#: The longest a worker may take to take every ETA task.
TAKE_TIMEOUT_S = 300.0


class Worker:
    """One ``celery worker`` process on the benchmark's app, solo pool, default settings."""

    def __init__(self, broker_url: str, log: Path) -> None:
        self._out = log.open("ab")
        command = [sys.executable, "-m", "celery", "-A", "benchmarks.bench.app", "worker"]
        command += ["-Q", QUEUE, "--pool", "solo", "--loglevel", "WARNING"]
        command += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        self.process = subprocess.Popen(
            command,
            env={**environ_without_django(), "BENCH_BROKER_URL": broker_url},
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def rss_bytes(self) -> int:
        return rss_of(self.process.pid)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if sig == signal.SIGKILL:
            self.process.kill()
            self.process.wait(30)
        else:
            stop_process(self.process)
        self._out.close()


def countdown_rows(rig: Rig, counts: tuple[int, ...], watch_s: float) -> list[dict[str, Any]]:
    """A row per count: the worker given that many ETA tasks, restarted, then killed and
    replaced by one watched for ``watch_s``."""
    return [_countdown(rig, count, watch_s) for count in counts]


def _countdown(rig: Rig, count: int, watch_s: float) -> dict[str, Any]:
    broker = redis.Redis(port=rig.broker.port)
    log = rig.directory / "countdown-worker.log"
    try:
        _clear(broker)
        memory0 = int(broker.info("memory")["used_memory"])
        send_s = _send(rig.broker.url(0), count)
        worker = Worker(rig.broker.url(0), log)
        took_s = _wait_taken(broker, count)
        rss = worker.rss_bytes()
        per_task = (int(broker.info("memory")["used_memory"]) - memory0) / count
        began = time.monotonic()
        worker.stop()  # a warm shutdown hands the tasks back to the queue
        worker = Worker(rig.broker.url(0), log)
        _wait_taken(broker, count)
        retaken_s = time.monotonic() - began
        worker.stop(signal.SIGKILL)
        worker = Worker(rig.broker.url(0), log)
        time.sleep(watch_s)  # an observation window: what comes back within it
        back = int(broker.llen(QUEUE))
        held = int(broker.hlen("unacked"))
        worker.stop()
    finally:
        _clear(broker)
        broker.close()
    return {
        "pending": count,
        "send/s": round(count / send_s),
        "worker RSS MiB": round(rss / 2**20, 1),
        "broker bytes / pending": round(per_task),
        "worker restart": f"all {count:,} handed back and taken again in {retaken_s:.1f} s "
        f"(first take {took_s:.1f} s)",
        "kill -9": f"{held:,} held by the dead worker, {back:,} back in the queue "
        f"{watch_s:g} s later",
    }


def _send(broker_url: str, count: int) -> float:
    app = Celery("bench-countdown", broker=broker_url, set_as_current=False)
    began = time.monotonic()
    with app.producer_or_acquire() as producer:
        for i in range(count):
            app.send_task(
                TASK,
                kwargs={"entry": f"c{i:07d}"},
                countdown=3600,
                queue=QUEUE,
                producer=producer,
            )
    return time.monotonic() - began


def _wait_taken(broker: redis.Redis, count: int) -> float:
    """Seconds until a worker holds all ``count`` tasks: the queue empty, all unacknowledged."""
    began = time.monotonic()
    deadline = began + TAKE_TIMEOUT_S
    while time.monotonic() < deadline:
        if broker.llen(QUEUE) == 0 and broker.hlen("unacked") >= count:
            return time.monotonic() - began
        time.sleep(0.2)
    raise TimeoutError(f"a worker took {broker.hlen('unacked')} of {count} ETA tasks")


def _clear(broker: redis.Redis) -> None:
    broker.delete(QUEUE, "unacked", "unacked_index", "unacked_mutex")
