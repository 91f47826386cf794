"""redisbeat's adapter: entries stored with ``ScheduleStore`` in database 1 of the harness's
redis-server (or wherever a store URL says, e.g. a Redis Cluster), and through
redisbeat_django's admin on a private PostgreSQL where it runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.config import Config

from ..orm import TASK, Database
from .base import Adapter, Spec, admin_missing, from_ms, with_db


class RedisbeatAdapter(Adapter):
    name = "redisbeat"
    scheduler = "redisbeat.RedisScheduler"
    max_active_beats = 64
    requires = ("redisbeat",)
    prefix = "bench"

    def __init__(
        self,
        workdir: Path,
        redis_url: str,
        store_url: str | None = None,
        admin: bool = True,
        shards: int = 1,
    ) -> None:
        """``store_url``: where the schedule lives, any ``redisbeat_redis_url`` (by default
        database 1 of ``redis_url``'s server); ``admin=False`` leaves the admin path (and its
        PostgreSQL) out, for scenarios that never edit through it; ``shards``: the
        deployment's ``redisbeat_shards``."""
        super().__init__(workdir, redis_url)
        self.store_url = store_url or with_db(redis_url, 1)
        self.admin = admin
        self.shards = shards
        self.store: ScheduleStore | None = None
        #: redisbeat_django's database, for add_via_admin (None: not available here).
        self.database: Database | None = None

    def setup(self) -> None:
        if self.store is None:
            config = Config(
                redis_url=self.store_url, key_prefix=self.prefix, timezone="UTC", shards=self.shards
            )
            self.store = ScheduleStore.from_config(config)
        if self.database is None and self.admin and admin_missing() is None:
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

    def beats_up(self) -> int:
        return len(self._store().beats())

    def load(self, specs: Sequence[Spec]) -> None:
        self._store().upsert_many(self.entry(s) for s in specs)

    def add(self, spec: Spec) -> None:
        self._store().upsert(self.entry(spec))

    def add_via_admin(self, spec: Spec) -> None:
        if self.database is None:
            why = admin_missing() if self.admin else "an adapter made with admin=True"
            raise RuntimeError(f"redisbeat's admin path needs {why}")
        if abs(spec.every * 1000 - spec.every_ms) > 1e-6:
            raise ValueError(f"{spec.name}: the admin takes whole milliseconds, not {spec.every}")
        self.database.call("admin_add", [spec.name, spec.every_ms, spec.anchor_ms])

    def clear(self) -> None:
        if self.database is not None:
            self.database.call("admin_clear")
        self._store().client.flushdb()
        self._store().forget_layout()  # flushed with the rest: recorded again by the next load

    def beat_env(self) -> dict[str, str]:
        return {
            **super().beat_env(),
            "BENCH_REDISBEAT_URL": self.store_url,
            "BENCH_REDISBEAT_PREFIX": self.prefix,
            "BENCH_REDISBEAT_SHARDS": str(self.shards),
        }

    def teardown(self) -> None:
        if self.database is not None:
            self.database.stop()
            self.database = None
        if self.store is not None:
            self.store.close()
            self.store = None
