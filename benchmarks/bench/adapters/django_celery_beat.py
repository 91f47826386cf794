"""django-celery-beat's adapter: entries stored through its models by the ORM process, on a
private PostgreSQL server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...common import now_ms
from ..orm import Database
from .base import Adapter, Spec


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
