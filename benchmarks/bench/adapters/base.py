"""What every adapter shares: the benchmark entry (:class:`Spec`), the :class:`Adapter`
interface, and why a scheduler cannot run here."""

from __future__ import annotations

import abc
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit, urlunsplit

from ...common import ROOT
from ..orm import postgres_missing

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
INSTALL_HINT = "pip install -e '.[bench]'"


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

    def beats_up(self) -> int | None:
        """How many of its beats have started work (None: it cannot tell)."""
        return None

    @abc.abstractmethod
    def teardown(self) -> None:
        """Stop what setup started."""


def missing(modules: Sequence[str]) -> str | None:
    """Why ``modules`` cannot be imported here (the first not installed), or None."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed ({INSTALL_HINT})"
    return None


def admin_missing() -> str | None:
    """Why redisbeat's admin path (redisbeat_django on PostgreSQL) cannot run here, or None."""
    return missing(("django", "psycopg")) or postgres_missing()
