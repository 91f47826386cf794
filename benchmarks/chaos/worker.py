"""A real Celery worker with the hook (``redisbeat_track_runs``) in a chaos run.

The checker pops every message off the broker queue as it arrives and pushes it onto
:data:`QUEUE` too, which the worker consumes: the worker receives exactly what the broker
got, copies included. Its task counts each run by task id in :data:`RUNS_KEY`, so the verdict
says how many occurrences ran twice at the worker (none may, however many were sent twice),
trusting no record of redisbeat's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import redis
from celery import Celery

from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beat, Beats

from .checker import Delivery, Verdict

#: The queue the worker consumes, and the hash its task counts runs in (the broker's db 2).
QUEUE = "chaos-worker"
RUNS_KEY = "chaos:runs"
RUNS_DB = 2
#: A message sent after everything else: once it ran, the worker has received the rest.
LAST = "chaos-last"


class ChaosWorker:
    """One ``celery worker`` with the hook, on the run's broker, store and settings."""

    def __init__(self, directory: Path, env: Mapping[str, str], broker_url: str) -> None:
        self.broker_url = broker_url
        runs_url = broker_url.rsplit("/", 1)[0] + f"/{RUNS_DB}"
        hook = {"TEST_TRACK_RUNS": "1", "TEST_RUNS_URL": runs_url, "TEST_RUNS_KEY": RUNS_KEY}
        self.processes = Beats(directory, {**env, **hook})
        self.runs_client = redis.Redis.from_url(runs_url, decode_responses=True)
        self.process: Beat | None = None

    def start(self) -> ChaosWorker:
        self.process = self.processes.start_worker(concurrency=2, queues=QUEUE)
        wait_until(lambda: " ready." in self.output(), 60, "the chaos worker", interval=0.1)
        return self

    def runs(self) -> dict[str, int]:
        runs = self.runs_client.hgetall(RUNS_KEY)
        return {str(task_id): int(n) for task_id, n in runs.items()}

    def drain(self, deliveries: list[Delivery], seconds: float) -> None:
        """Wait (at most ``seconds``) until the worker received everything it was given (a
        last message pushed behind it ran) and ran every task id delivered; what it did not
        run by then is the verdict's to count."""
        app = Celery("chaos-last", broker=self.broker_url, set_as_current=False)
        try:
            app.send_task("proj.ping", task_id=LAST, queue=QUEUE)
        finally:
            app.close()
        wanted = {d.task_id for d in deliveries if d.expires is None} | {LAST}
        deadline = time.monotonic() + seconds
        while not wanted <= self.runs().keys() and time.monotonic() < deadline:
            time.sleep(0.2)

    def tally(self, v: Verdict, deliveries: list[Delivery]) -> Verdict:
        """The verdict with what the worker ran of ``deliveries``."""
        runs = self.runs()
        runs.pop(LAST, None)
        delivered = {d.task_id for d in deliveries}
        expiring = {d.task_id for d in deliveries if d.expires is not None}
        return replace(
            v,
            worker_ran=len(delivered & runs.keys()),
            worker_ran_twice=sum(n - 1 for n in runs.values()),
            worker_not_run=len(delivered - runs.keys() - expiring),
        )

    def output(self) -> str:
        return self.process.output() if self.process is not None else ""

    def stop(self) -> None:
        self.processes.stop_all()
        self.runs_client.close()
