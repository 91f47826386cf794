"""The schedulers under test: one adapter per scheduler, one interface for the harness.

Each adapter stores entries through its scheduler's own API (bulk loads write exactly what
that API writes) and says how its beats run: ``celery -A benchmarks.bench.app beat -S
<adapter.scheduler>`` with ``adapter.beat_env()``. The broker is database 0 of the harness's
redis-server; redisbeat keeps its schedule in database 1, celery-redbeat in database 2,
django-celery-beat (and redisbeat's Django admin app) in a private PostgreSQL server.
"""

from __future__ import annotations

import abc
import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import redis

from redisbeat import Entry, Interval, ScheduleStore

from ..common import ROOT, now_ms
from .orm import TASK, Database, postgres_missing

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
INSTALL_HINT = "pip install -e '.[bench]'"
CHUNK = 1000


@dataclass(frozen=True)
class Spec:
    """One benchmark entry: task bench.tick(entry=name) every `every` seconds, on the grid
    anchor_ms + k*every."""

    name: str
    every: float  # seconds; django-celery-beat needs whole seconds
    anchor_ms: int  # epoch ms of one nominal occurrence

    def __post_init__(self) -> None:
        if not self.every_ms > 0:
            raise ValueError(f"{self.name}: every must be at least a millisecond: {self.every}")

    @property
    def every_ms(self) -> int:
        return round(self.every * 1000)

    def first_due_ms(self, now_ms: int) -> int:
        """The first occurrence on the grid after ``now_ms``, and never before the anchor."""
        k = max(0, (now_ms - self.anchor_ms) // self.every_ms + 1)
        return self.anchor_ms + k * self.every_ms


def from_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def with_db(url: str, db: int) -> str:
    """``redis://host:port/N`` -> the same server's database ``db``."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


def pythonpath() -> str:
    """The repository first, so ``benchmarks.bench.app`` imports from any directory."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


class Adapter(abc.ABC):
    """One scheduler: storing its entries, clearing them, and its beats' environment."""

    name: ClassVar[str]
    scheduler: ClassVar[str]
    #: How many beats may run at once and all do work.
    max_active_beats: ClassVar[int]
    #: Modules it needs in this process and in its beats.
    requires: ClassVar[tuple[str, ...]]

    def __init__(self, workdir: Path, redis_url: str) -> None:
        self.workdir = workdir
        self.redis_url = redis_url

    @abc.abstractmethod
    def setup(self) -> None:
        """Start what the scheduler needs besides Redis; idempotent."""

    @abc.abstractmethod
    def load(self, specs: Sequence[Spec]) -> None:
        """Store many entries before any beat starts, each phased onto its grid."""

    @abc.abstractmethod
    def add(self, spec: Spec) -> None:
        """Store one entry the way a program would."""

    @abc.abstractmethod
    def add_via_admin(self, spec: Spec) -> None:
        """Store one entry the way the scheduler's Django admin would."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove every entry and all scheduler state; call it with no beat running."""

    def beat_env(self) -> dict[str, str]:
        """Environment variables for ``celery -A benchmarks.bench.app beat``."""
        return {"BENCH_BROKER_URL": self.redis_url, "PYTHONPATH": pythonpath()}

    @abc.abstractmethod
    def teardown(self) -> None:
        """Stop what setup started."""


class RedisbeatAdapter(Adapter):
    name = "redisbeat"
    scheduler = "redisbeat.RedisScheduler"
    max_active_beats = 64
    requires = ("redisbeat",)
    prefix = "bench"

    def __init__(self, workdir: Path, redis_url: str) -> None:
        super().__init__(workdir, redis_url)
        self.store_url = with_db(redis_url, 1)
        self.store: ScheduleStore | None = None
        #: redisbeat_django's database, for add_via_admin (None: not available here).
        self.database: Database | None = None

    def setup(self) -> None:
        if self.store is None:
            client = redis.Redis.from_url(self.store_url, decode_responses=True)
            self.store = ScheduleStore(client, prefix=self.prefix, timezone="UTC")
        if self.database is None and admin_missing() is None:
            self.database = Database(self.workdir / self.name, self.beat_env()).start()
            self.database.call("admin_connect")

    def _store(self) -> ScheduleStore:
        assert self.store is not None, "setup() first"
        return self.store

    @staticmethod
    def entry(spec: Spec) -> Entry:
        return Entry(
            name=spec.name,
            task=TASK,
            schedule=Interval(spec.every),
            kwargs={"entry": spec.name},
            start_at=from_ms(spec.anchor_ms),
        )

    def load(self, specs: Sequence[Spec]) -> None:
        self._store().upsert_many(self.entry(s) for s in specs)

    def add(self, spec: Spec) -> None:
        self._store().upsert(self.entry(spec))

    def add_via_admin(self, spec: Spec) -> None:
        if self.database is None:
            raise RuntimeError(f"redisbeat's admin path needs {admin_missing()}")
        if abs(spec.every * 1000 - spec.every_ms) > 1e-6:
            raise ValueError(f"{spec.name}: the admin takes whole milliseconds, not {spec.every}")
        self.database.call("admin_add", [spec.name, spec.every_ms, spec.anchor_ms])

    def clear(self) -> None:
        if self.database is not None:
            self.database.call("admin_clear")
        self._store().client.flushdb()

    def beat_env(self) -> dict[str, str]:
        return {
            **super().beat_env(),
            "BENCH_REDISBEAT_URL": self.store_url,
            "BENCH_REDISBEAT_PREFIX": self.prefix,
        }

    def teardown(self) -> None:
        if self.database is not None:
            self.database.stop()
            self.database = None
        if self.store is not None:
            self.store.close()
            self.store = None


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
        return get_redis(self.app)

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


class DjangoCeleryBeatAdapter(Adapter):
    name = "django-celery-beat"
    scheduler = "django_celery_beat.schedulers:DatabaseScheduler"
    max_active_beats = 1  # two would both send every entry
    requires = ("django", "django_celery_beat", "psycopg")

    def __init__(self, workdir: Path, redis_url: str) -> None:
        super().__init__(workdir, redis_url)
        self.database: Database | None = None

    def setup(self) -> None:
        if self.database is None:
            self.database = Database(self.workdir / self.name, super().beat_env()).start()

    def _call(self, operation: str, argument: Any = None) -> Any:
        assert self.database is not None, "setup() first"
        return self.database.call(operation, argument)

    @staticmethod
    def seconds(spec: Spec) -> int:
        if spec.every != int(spec.every) or spec.every < 1:
            raise ValueError(
                f"{spec.name}: django-celery-beat takes whole seconds, not {spec.every}"
            )
        return int(spec.every)

    def row(self, spec: Spec) -> list[Any]:
        """``[name, every, last run]``: last run one period before the first occurrence."""
        every = self.seconds(spec)
        return [spec.name, every, spec.first_due_ms(now_ms()) - every * 1000]

    def load(self, specs: Sequence[Spec]) -> None:
        self._call("dcb_load", [self.row(s) for s in specs])

    def add(self, spec: Spec) -> None:
        self._call("dcb_add", self.row(spec))

    def add_via_admin(self, spec: Spec) -> None:
        self._call("dcb_admin_add", [spec.name, self.seconds(spec), spec.first_due_ms(now_ms())])

    def clear(self) -> None:
        self._call("dcb_clear")

    def beat_env(self) -> dict[str, str]:
        assert self.database is not None, "setup() first"
        return {**super().beat_env(), **self.database.env}

    def teardown(self) -> None:
        if self.database is not None:
            self.database.stop()
            self.database = None


ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a for a in (RedisbeatAdapter, RedbeatAdapter, DjangoCeleryBeatAdapter)
}


def _missing(modules: Sequence[str]) -> str | None:
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed ({INSTALL_HINT})"
    return None


def admin_missing() -> str | None:
    """Why redisbeat's admin path (redisbeat_django on PostgreSQL) cannot run here, or None."""
    return _missing(("django", "psycopg")) or postgres_missing()


def available() -> dict[str, str | None]:
    """Per adapter: None when it can run here, else why not."""
    out: dict[str, str | None] = {}
    for name, adapter in ADAPTERS.items():
        out[name] = _missing(adapter.requires)
        if out[name] is None and adapter is DjangoCeleryBeatAdapter:
            out[name] = postgres_missing()
    return out
