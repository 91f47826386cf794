"""The Celery app every benchmarked beat runs, configured from the environment alone.

    celery -A benchmarks.bench.app beat -S <scheduler class>

``BENCH_BROKER_URL`` is required; each other variable in :data:`SETTINGS` sets one Celery
setting when present. Celery's Django fix-up (``django.setup()`` at beat start) is installed
only when ``DJANGO_SETTINGS_MODULE`` is set, which only django-celery-beat needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from celery import Celery

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
    app.conf.broker_url = env["BENCH_BROKER_URL"]
    app.conf.timezone = "UTC"
    # No celery.backend_cleanup entry: every message on the queue is a benchmark entry's.
    app.conf.result_expires = None
    for variable, (setting, parse) in SETTINGS.items():
        if env.get(variable):
            app.conf[setting] = parse(env[variable])
    return app


app = make_app(dict(os.environ))


@app.task(name="bench.tick")
def tick(entry: str) -> None:
    """What every benchmark entry sends; no worker runs it, the harness pops the queue."""
