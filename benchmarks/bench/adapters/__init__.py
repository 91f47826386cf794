"""The schedulers under test: one adapter per scheduler, one interface for the harness.

Each adapter stores entries through its scheduler's own API (bulk loads write exactly what
that API writes) and says how its beats run: ``celery -A benchmarks.bench.app beat -S
<adapter.scheduler>`` with ``adapter.beat_env()``. The broker is database 0 of the harness's
redis-server; redisbeat keeps its schedule in database 1, celery-redbeat in database 2,
django-celery-beat (and redisbeat's Django admin app) in a private PostgreSQL server.
"""

from __future__ import annotations

from ...common import now_ms
from ..orm import postgres_missing
from .base import Adapter, Spec, admin_missing, missing
from .django_celery_beat import DjangoCeleryBeatAdapter
from .redbeat import RedbeatAdapter
from .redisbeat import RedisbeatAdapter

__all__ = [
    "ADAPTERS",
    "Adapter",
    "DjangoCeleryBeatAdapter",
    "RedbeatAdapter",
    "RedisbeatAdapter",
    "Spec",
    "admin_missing",
    "available",
    "now_ms",
]

ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a for a in (RedisbeatAdapter, RedbeatAdapter, DjangoCeleryBeatAdapter)
}


def available() -> dict[str, str | None]:
    """Per adapter: None when it can run here, else why not."""
    out: dict[str, str | None] = {}
    for name, adapter in ADAPTERS.items():
        out[name] = missing(adapter.requires)
        if out[name] is None and adapter is DjangoCeleryBeatAdapter:
            out[name] = postgres_missing()
    return out
