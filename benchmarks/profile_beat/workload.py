"""The profiled beat's setting: the test beats' Celery app pointed at the private servers,
and ``rate * entries-per-rate`` interval entries whose occurrences fall due evenly."""

from __future__ import annotations

import gc
import logging
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


def configure(
    store_url: str,
    broker_url: str,
    batch: int,
    cache_size: int | None,
    log_level: str,
    claim_ahead: float | None = None,
) -> Any:
    """The Celery app of the test beats (``redisbeat_testkit/proj.py``) on these servers."""
    os.environ.update(
        TEST_BROKER_URL=broker_url,
        TEST_STORE_URL=store_url,
        TEST_PREFIX="bench",
        TEST_BATCH=str(batch),
        TEST_MAX_INTERVAL="5",
    )
    os.environ.pop("TEST_FREEZE_MARKER", None)
    logging.basicConfig(level=log_level, format="%(levelname)s %(name)s: %(message)s")
    from redisbeat_testkit.proj import app

    if cache_size is not None:
        app.conf.redisbeat_entry_cache_size = cache_size
    if claim_ahead is not None:
        app.conf.redisbeat_claim_ahead_seconds = claim_ahead
    return app


@dataclass(frozen=True)
class Loaded:
    """The entries stored: how many, when the first falls due, how long storing took."""

    count: int
    start_ms: int
    seconds: float


def load(app: Any, rate: int, period: int) -> Loaded:
    """Store ``rate * period`` entries every ``period`` seconds, anchors spread evenly over
    the period, so that ``rate`` occurrences fall due every second."""
    from redisbeat import Entry, Interval, ScheduleStore

    count = rate * period
    store = ScheduleStore.from_app(app)
    start_ms = store.now_ms() + 3000 + count // 20  # time to load the entries first
    step = period * 1000 / count
    loading = time.perf_counter()
    store.upsert_many(
        Entry(
            f"e{i:07d}",
            "proj.ping",
            Interval(period),
            # Arguments of its own, as the benchmark's entries (and most users') have.
            kwargs={"entry": f"e{i:07d}"},
            start_at=datetime.fromtimestamp((start_ms + int(i * step)) / 1000, timezone.utc),
        )
        for i in range(count)
    )
    loaded = time.perf_counter() - loading
    store.close()
    gc.collect()  # the loader's garbage is not the beat's
    return Loaded(count, start_ms, loaded)
