"""The Celery project the beat processes of the tests and chaos runs use, configured from
the environment (``TEST_*``): ``celery -A redisbeat_testkit.proj beat``."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import after_task_publish, worker_ready

app = Celery("proj")
app.conf["broker_url"] = os.environ["TEST_BROKER_URL"]
app.conf.redisbeat_redis_url = os.environ["TEST_STORE_URL"]
app.conf.redisbeat_key_prefix = os.environ.get("TEST_PREFIX", "redisbeat")
if os.environ.get("TEST_LEASE"):  # else redisbeat's default
    app.conf.redisbeat_lease_seconds = float(os.environ["TEST_LEASE"])
if os.environ.get("TEST_SOCKET_TIMEOUT"):  # else redisbeat's default
    app.conf.redisbeat_socket_timeout = float(os.environ["TEST_SOCKET_TIMEOUT"])
app.conf.redisbeat_heartbeat_seconds = float(os.environ.get("TEST_HEARTBEAT", "10"))
app.conf.redisbeat_batch_size = int(os.environ.get("TEST_BATCH", "100"))
app.conf.beat_max_loop_interval = float(os.environ.get("TEST_MAX_INTERVAL", "60"))
app.conf.redisbeat_shards = int(os.environ.get("TEST_SHARDS", "1"))
if os.environ.get("TEST_METRICS_PORT"):
    app.conf.redisbeat_metrics_port = int(os.environ["TEST_METRICS_PORT"])
    app.conf.redisbeat_metrics_address = "127.0.0.1"
if os.environ.get("TEST_SUMMARY"):  # seconds between two activity summaries
    app.conf.redisbeat_summary_seconds = float(os.environ["TEST_SUMMARY"])
if os.environ.get("TEST_SENTINEL_MASTER"):
    app.conf.redisbeat_sentinel_master = os.environ["TEST_SENTINEL_MASTER"]
if os.environ.get("TEST_WAIT_REPLICAS"):
    app.conf.redisbeat_wait_replicas = int(os.environ["TEST_WAIT_REPLICAS"])
    app.conf.redisbeat_wait_timeout = float(os.environ.get("TEST_WAIT_TIMEOUT", "0.5"))
if os.environ.get("TEST_TRACK_RUNS"):
    app.conf.redisbeat_track_runs = True
if os.environ.get("TEST_HISTORY"):
    app.conf.redisbeat_history_size = int(os.environ["TEST_HISTORY"])
if os.environ.get("TEST_NO_PERSISTENCE_WARNING"):
    app.conf.redisbeat_persistence_warning = False
app.conf["timezone"] = "UTC"
if os.environ.get("TEST_SET_BEAT_SCHEDULER"):
    app.conf.beat_scheduler = "redisbeat.RedisScheduler"
if os.environ.get("TEST_BROKER_USE_SSL"):  # JSON: redis-py TLS options for a rediss:// broker
    app.conf.broker_use_ssl = json.loads(os.environ["TEST_BROKER_USE_SSL"])


def _revived(value: Any) -> Any:
    """A value of TEST_BEAT_SCHEDULE with ``{"$now": {}}`` as ``datetime.now()``: what JSON
    cannot say, and a beat_schedule may hold by mistake (a datetime in args)."""
    if value == {"$now": {}}:
        return datetime.now()
    if isinstance(value, dict):
        return {k: _revived(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_revived(v) for v in value]
    return value


def _item(item: dict[str, Any]) -> dict[str, Any]:
    revived: dict[str, Any] = _revived(item)
    if "schedule" in revived:  # an item without one is a bad item to test
        revived["schedule"] = float(revived["schedule"])
    return revived


app.conf.beat_schedule = {
    name: _item(item)
    for name, item in json.loads(os.environ.get("TEST_BEAT_SCHEDULE", "{}")).items()
}


@app.task(name="proj.ping")
def ping(*args: Any, **kwargs: Any) -> None:
    """Does nothing; with TEST_RUNS_URL set, counts its runs by task id (see _count_run)."""
    if os.environ.get("TEST_RUNS_URL"):
        _count_run(str(ping.request.id), str(ping.request.hostname))


_runs: Any = None


def _count_run(task_id: str, worker: str) -> None:
    """One run of ``task_id``, counted in the hash TEST_RUNS_KEY at TEST_RUNS_URL (and the
    worker that ran it last in ``<key>:on``): what the tests read to know how often a task
    ran, trusting no record of redisbeat's."""
    global _runs
    if _runs is None:  # made in the pool process that runs the task
        import redis

        _runs = redis.Redis.from_url(os.environ["TEST_RUNS_URL"])
    key = os.environ.get("TEST_RUNS_KEY", "test:runs")
    # Both at once (MULTI): a test that sees the count also sees the worker.
    with _runs.pipeline() as both:
        both.hincrby(key, task_id, 1)
        both.hset(f"{key}:on", task_id, worker)
        both.execute()


@worker_ready.connect
def _serve_metrics(**kwargs: Any) -> None:
    """With TEST_WORKER_METRICS_PORT, a worker serves prometheus-client's default registry,
    as a worker's exporter would (the duplicate check's counters are there)."""
    port = os.environ.get("TEST_WORKER_METRICS_PORT")
    if port:
        import prometheus_client

        prometheus_client.start_http_server(int(port), addr="127.0.0.1")


@app.task(name="proj.strict")
def strict(x: int) -> None:
    """A task whose signature Celery checks in the beat: other arguments are refused there."""


@app.task(name="proj.sleep")
def sleep(seconds: float) -> None:
    """A task that runs for a while (overlap policies)."""
    time.sleep(seconds)


@app.task(name="proj.fail")
def fail() -> None:
    raise ValueError("proj.fail always fails")


@app.task(name="proj.flaky", bind=True, max_retries=1)
def flaky(self: Any) -> None:
    """Fails its first try and is retried at once; the retry succeeds."""
    if not self.request.retries:
        raise self.retry(countdown=0)


_published = 0


def _frozen_on(kwargs: dict[str, Any]) -> bool:
    """Whether the message ``after_task_publish`` was told of is one to freeze on."""
    only = os.environ.get("TEST_FREEZE_ONLY", "")
    body = kwargs.get("body")
    task_kwargs = body[1] if isinstance(body, (tuple, list)) and len(body) > 1 else {}
    return str(task_kwargs.get("entry", "")).startswith(only)


@after_task_publish.connect
def _freeze_mid_batch(**kwargs: Any) -> None:
    """Test hook: after the Nth send, say so in a file and hang, so a test can kill -9 us;
    or, with TEST_FREEZE_DIR, after the first send once ``<dir>/<pid>.freeze`` exists (the
    batch is on the broker and not recorded yet), saying so in ``<dir>/<pid>.frozen``; with
    TEST_FREEZE_ONLY, the first send of an entry whose name starts so."""
    global _published
    freeze = os.environ.get("TEST_FREEZE_DIR")
    if freeze and Path(freeze, f"{os.getpid()}.freeze").exists() and _frozen_on(kwargs):
        Path(freeze, f"{os.getpid()}.frozen").write_text("")
        time.sleep(3600)
    marker = os.environ.get("TEST_FREEZE_MARKER")
    if not marker:
        return
    _published += 1
    if _published == int(os.environ.get("TEST_FREEZE_AFTER", "3")):
        headers = kwargs.get("headers") or {}
        Path(marker).write_text(json.dumps({"id": headers.get("id")}))
        time.sleep(3600)
