"""The deployment at a glance, as the admin's overview shows it: what ``redisbeat status``
reads (counts, beats alive and their last summaries), and the last hour per minute from the
summaries the beats keep (:mod:`redisbeat.store.activity_log`).

Every number is a count Redis keeps (HLEN, ZCARD, ZCOUNT) or a beat's own record: reading
them costs the same for ten entries or a million, and a million delayed tasks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from redisbeat import ScheduleStore
from redisbeat.schedule.timing import from_ms
from redisbeat.store.activity_log import LoggedSummary
from redisbeat.store.listing import Counts
from redisbeat.store.records import BeatInfo

#: What counts as overdue: due for longer than this (``status``'s default).
OVERDUE_AFTER = 60.0
#: The minutes the charts show, the last one the minute going on.
MINUTES = 60
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Minute:
    """What every beat did in one minute (sends and misses of a longer summary period are
    spread over the minutes it covers)."""

    start_ms: int
    sent: float
    #: The worst late p99 of the beats' summaries covering the minute.
    late_p99_ms: float
    missed: float

    @property
    def start(self) -> datetime:
        return from_ms(self.start_ms)


@dataclass(frozen=True)
class Glance:
    """One read of the deployment."""

    counts: Counts
    beats: list[BeatInfo]
    #: Each beat's last summary, by beat id (absent: none recorded yet, or it expired).
    stats: dict[str, dict[str, Any]]
    minutes: list[Minute]
    overdue_after: float = OVERDUE_AFTER

    @property
    def now(self) -> datetime:
        return from_ms(self.counts.now_ms)


def read(store: ScheduleStore, overdue_after: float = OVERDUE_AFTER) -> Glance:
    """Counts, beats, their summaries and the last hour: a handful of round trips."""
    counts = store.counts(overdue_after)
    beats = sorted(store.beats(), key=lambda b: b.id)
    stats = store.beat_activity([b.id for b in beats])
    first = _minute_of(counts.now_ms) - (MINUTES - 1) * MINUTE_MS
    summaries = store.activity_since(first)
    return Glance(counts, beats, stats, per_minute(summaries, counts.now_ms), overdue_after)


def _minute_of(ms: int) -> int:
    return ms - ms % MINUTE_MS


def per_minute(summaries: list[LoggedSummary], now_ms: int, minutes: int = MINUTES) -> list[Minute]:
    """The last ``minutes`` minutes up to ``now_ms``, oldest first. A summary covers the
    ``seconds`` before it was recorded: its sends and misses are shared among the minutes
    it overlaps, in proportion, and its late p99 counts for each of them."""
    first = _minute_of(now_ms) - (minutes - 1) * MINUTE_MS
    sent, missed, late = [0.0] * minutes, [0.0] * minutes, [0.0] * minutes
    for summary in summaries:
        end = summary.at_ms
        begin = end - max(0, int(summary.get("seconds") * 1000))
        for i in range(max(0, (begin - first) // MINUTE_MS), minutes):
            low = first + i * MINUTE_MS
            if low > end:
                break
            share = _share(begin, end, low, low + MINUTE_MS)
            if share <= 0:
                continue
            sent[i] += summary.get("sent") * share
            missed[i] += summary.get("missed") * share
            if summary.get("sent"):
                late[i] = max(late[i], summary.get("late_p99_ms"))
    return [Minute(first + i * MINUTE_MS, sent[i], late[i], missed[i]) for i in range(minutes)]


def _share(begin: int, end: int, low: int, high: int) -> float:
    """The part of [begin, end] within [low, high) (a point in it: all of it)."""
    if end <= begin:
        return 1.0 if low <= end < high else 0.0
    return max(0, min(end, high) - max(begin, low)) / (end - begin)


def as_json(glance: Glance) -> dict[str, Any]:
    """The overview's numbers as ``status --json`` spells them, and the minutes."""
    return {
        "counts": asdict(glance.counts),
        "overdue_after": glance.overdue_after,
        "beats": [
            {
                "beat": {
                    "id": b.id,
                    "hostname": b.hostname,
                    "pid": b.pid,
                    "last_seen": b.last_seen.isoformat(),
                },
                "stats": glance.stats.get(b.id),
            }
            for b in glance.beats
        ],
        "minutes": [
            {
                "start": m.start.isoformat(),
                "sent": round(m.sent, 1),
                "late_p99_ms": m.late_p99_ms,
                "missed": round(m.missed, 1),
            }
            for m in glance.minutes
        ],
    }
