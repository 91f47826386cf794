"""The Celery app every benchmarked beat runs, configured from the environment alone.

    celery -A benchmarks.bench.app beat -S <scheduler class>

``BENCH_BROKER_URL`` is required; each other variable in :data:`SETTINGS` sets one Celery
setting when present. Celery's Django fix-up (``django.setup()`` at beat start) is installed
only when ``DJANGO_SETTINGS_MODULE`` is set, which only django-celery-beat needs.
``BENCH_RECEIVER=1`` connects :func:`add_trace_context` to ``before_task_publish``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.signals import before_task_publish

#: Environment variable -> (Celery setting, how to read its value).
SETTINGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "BENCH_MAX_INTERVAL": ("beat_max_loop_interval", float),
    "BENCH_REDISBEAT_URL": ("redisbeat_redis_url", str),
    "BENCH_REDISBEAT_PREFIX": ("redisbeat_key_prefix", str),
    "BENCH_REDISBEAT_LEASE": ("redisbeat_lease_seconds", float),
    "BENCH_REDISBEAT_BATCH": ("redisbeat_batch_size", int),
    "BENCH_REDISBEAT_HEARTBEAT": ("redisbeat_heartbeat_seconds", float),
    "BENCH_REDISBEAT_CACHE": ("redisbeat_entry_cache_size", int),
    "BENCH_REDISBEAT_SHARDS": ("redisbeat_shards", int),
    "BENCH_REDBEAT_URL": ("redbeat_redis_url", str),
    "BENCH_REDBEAT_PREFIX": ("redbeat_key_prefix", str),
    "BENCH_REDBEAT_LOCK_TIMEOUT": ("redbeat_lock_timeout", float),
}


def make_app(env: dict[str, str]) -> Celery:
    app = Celery("bench", fixups=None if env.get("DJANGO_SETTINGS_MODULE") else [])
    # No celery.backend_cleanup entry: every message on the queue is a benchmark entry's.
    app.conf.update(broker_url=env["BENCH_BROKER_URL"], timezone="UTC", result_expires=None)
    # The rig's Redis keeps nothing on disk on purpose: no start-up warning about it.
    app.conf.redisbeat_persistence_warning = False
    for variable, (setting, parse) in SETTINGS.items():
        if env.get(variable):
            app.conf[setting] = parse(env[variable])
    return app


app = make_app(dict(os.environ))


def add_trace_context(
    sender: str | None = None,
    headers: dict[str, Any] | None = None,
    body: Any = None,
    **kwargs: Any,
) -> None:
    """What OpenTelemetry's Celery instrumentation does before each publish, without its
    SDK: find the task and the message's id, start a producer span (here: a new trace and
    span id) and write its context into the headers as a W3C ``traceparent``."""
    task_id = (headers or {}).get("id") or (body.get("id") if isinstance(body, dict) else None)
    if headers is None or task_id is None:
        return
    task = app.tasks.get(sender or "")
    span = {
        "name": f"apply_async/{task.name if task is not None else sender}",
        "celery.task_id": task_id,
        "trace_id": random.getrandbits(128) or 1,
        "span_id": random.getrandbits(64) or 1,
    }
    headers["traceparent"] = f"00-{span['trace_id']:032x}-{span['span_id']:016x}-01"


if os.environ.get("BENCH_RECEIVER") == "1":
    before_task_publish.connect(add_trace_context, weak=False)


@app.task(name="bench.tick")
def tick(entry: str) -> None:
    """What every benchmark entry sends; no worker runs it, the harness pops the queue."""
