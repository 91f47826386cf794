"""celery-redbeat's adapter: entries stored as ``RedBeatSchedulerEntry.save()`` stores them,
in database 2 of the harness's redis-server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis

from ...common import now_ms
from ..orm import TASK
from .base import Adapter, Spec, from_ms, with_db

#: Entries per pipeline round trip when loading.
CHUNK = 1000


class RedbeatAdapter(Adapter):
    name = "celery-redbeat"
    scheduler = "redbeat.RedBeatScheduler"
    max_active_beats = 1  # the others wait for the lock
    requires = ("redbeat",)
    prefix = "redbeat:"

    def __init__(self, workdir: Path, redis_url: str) -> None:
        super().__init__(workdir, redis_url)
        self.store_url = with_db(redis_url, 2)
        self.app: Any = None

    def setup(self) -> None:
        if self.app is None:
            from celery import Celery
            from redbeat.schedulers import ensure_conf

            self.app = Celery("bench-redbeat", set_as_current=False)
            self.app.conf.update(
                broker_url=self.redis_url,
                timezone="UTC",
                redbeat_redis_url=self.store_url,
                redbeat_key_prefix=self.prefix,
            )
            ensure_conf(self.app)

    def client(self) -> redis.Redis:
        from redbeat.schedulers import get_redis

        assert self.app is not None, "setup() first"
        client: redis.Redis = get_redis(self.app)
        return client

    def entry(self, spec: Spec) -> Any:
        """The RedBeat entry, its last run one period before its first occurrence."""
        from celery.schedules import schedule
        from redbeat import RedBeatSchedulerEntry

        assert self.app is not None, "setup() first"
        every = timedelta(milliseconds=spec.every_ms)
        return RedBeatSchedulerEntry(
            spec.name,
            TASK,
            schedule(run_every=every, app=self.app),
            kwargs={"entry": spec.name},
            last_run_at=from_ms(spec.first_due_ms(now_ms())) - every,
            app=self.app,
        )

    def load(self, specs: Sequence[Spec]) -> None:
        """What ``entry.save()`` writes for each, pipelined (save() runs one MULTI each)."""
        assert self.app is not None, "setup() first"
        key = self.app.redbeat_conf.schedule_key
        with self.client().pipeline(transaction=False) as pipe:
            for i, spec in enumerate(specs, 1):
                entry = self.entry(spec)
                definition, meta = redbeat_fields(entry)
                pipe.hset(entry.key, "definition", definition)
                pipe.hsetnx(entry.key, "meta", meta)
                pipe.zadd(key, {entry.key: entry.score})
                if i % CHUNK == 0:
                    pipe.execute()
            pipe.execute()

    def add(self, spec: Spec) -> None:
        self.entry(spec).save()

    def add_via_admin(self, spec: Spec) -> None:
        raise NotImplementedError("celery-redbeat has no admin")

    def clear(self) -> None:
        self.client().flushdb()

    def beat_env(self) -> dict[str, str]:
        return {
            **super().beat_env(),
            "BENCH_REDBEAT_URL": self.store_url,
            "BENCH_REDBEAT_PREFIX": self.prefix,
        }

    def teardown(self) -> None:
        if self.app is not None:
            self.client().close()
            self.app = None


def redbeat_fields(entry: Any) -> tuple[str, str]:
    """The definition and meta that ``RedBeatSchedulerEntry.save()`` stores, as it encodes
    them (tests/test_bench_adapters.py checks they stay byte-identical)."""
    from redbeat.decoder import RedBeatJSONEncoder

    definition = {
        "name": entry.name,
        "task": entry.task,
        "args": entry.args,
        "kwargs": entry.kwargs,
        "options": entry.options,
        "schedule": entry.schedule,
        "enabled": entry.enabled,
    }
    meta = {"last_run_at": entry.last_run_at}
    return (
        json.dumps(definition, cls=RedBeatJSONEncoder),
        json.dumps(meta, cls=RedBeatJSONEncoder),
    )
