"""redisbeat: a leaderless, active-active Celery beat scheduler on Redis.

Run any number of ``celery beat -S redisbeat.RedisScheduler`` processes: every due occurrence
of every entry is sent exactly once.
"""

from __future__ import annotations

from .beat.scheduler import RedisScheduler
from .delaying import delay
from .errors import (
    ConfigurationError,
    CorruptEntry,
    EntryNotFound,
    EntryPaused,
    Incompatible,
    InvalidEntry,
    InvalidSchedule,
    MessageRefused,
    OwnershipError,
    RedisBeatError,
)
from .schedule.delayed import DelayedTask
from .schedule.entry import Entry
from .schedule.ids import occurrence_id
from .schedule.kinds import Clocked, Cron, Crontab, Interval, Schedule, Solar
from .schedule.timing import next_due
from .store import ScheduleStore
from .store.errors import (
    NotReplicated,
    StoreError,
    StoreIncompatible,
    StoreRefused,
    StoreUnavailable,
)
from .store.history import Run
from .store.records import BeatInfo, SyncReport
from .store.run_state import EntryState, Quarantined
from .store.runs import Running
from .worker import track_runs

__version__ = "0.1.0"

__all__ = [
    "BeatInfo",
    "Clocked",
    "ConfigurationError",
    "CorruptEntry",
    "Cron",
    "Crontab",
    "DelayedTask",
    "Entry",
    "EntryNotFound",
    "EntryPaused",
    "EntryState",
    "Incompatible",
    "Interval",
    "InvalidEntry",
    "InvalidSchedule",
    "MessageRefused",
    "NotReplicated",
    "OwnershipError",
    "Quarantined",
    "RedisBeatError",
    "RedisScheduler",
    "Run",
    "Running",
    "Schedule",
    "ScheduleStore",
    "Solar",
    "StoreError",
    "StoreIncompatible",
    "StoreRefused",
    "StoreUnavailable",
    "SyncReport",
    "delay",
    "next_due",
    "occurrence_id",
    "track_runs",
]
