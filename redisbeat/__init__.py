"""redisbeat: a leaderless, active-active Celery beat scheduler on Redis.

Run any number of ``celery beat -S redisbeat.RedisScheduler`` processes: every due occurrence
of every entry is sent exactly once.
"""

from __future__ import annotations

from .entry import Entry, occurrence_id
from .errors import (
    ConfigurationError,
    CorruptEntry,
    EntryNotFound,
    InvalidEntry,
    InvalidSchedule,
    MessageRefused,
    NotReplicated,
    OwnershipError,
    RedisBeatError,
)
from .records import BeatInfo, EntryState, Quarantined, SyncReport
from .scheduler import RedisScheduler
from .schedules import Clocked, Cron, Crontab, Interval, Schedule, Solar
from .store import ScheduleStore
from .timing import next_due

__version__ = "0.1.0"

__all__ = [
    "BeatInfo",
    "Clocked",
    "ConfigurationError",
    "CorruptEntry",
    "Cron",
    "Crontab",
    "Entry",
    "EntryNotFound",
    "EntryState",
    "Interval",
    "InvalidEntry",
    "InvalidSchedule",
    "MessageRefused",
    "NotReplicated",
    "OwnershipError",
    "Quarantined",
    "RedisBeatError",
    "RedisScheduler",
    "Schedule",
    "ScheduleStore",
    "Solar",
    "SyncReport",
    "next_due",
    "occurrence_id",
]
