"""Occurrences a test plans, and what beats sent of them, checked from the broker queue alone."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import redis

from redisbeat import Entry, Interval, ScheduleStore, occurrence_id
from redisbeat.schedule.clock import from_ms

from .messages import Sent, read_queue
from .ports import wait_until

SECOND = 1000


def add_entries(store: ScheduleStore, count: int, period: float, start_ms: int) -> dict[str, int]:
    """``count`` entries due every ``period`` s, anchored evenly over the first period."""
    step = int(period * SECOND) // count
    anchors = {f"e{i}": start_ms + i * step for i in range(count)}
    store.upsert_many(
        Entry(name, "proj.ping", Interval(period), start_at=from_ms(anchor))
        for name, anchor in anchors.items()
    )
    return anchors


def occurrences(anchors: dict[str, int], period: float, start: int, end: int) -> set[Any]:
    out = set()
    for name, anchor in anchors.items():
        due = anchor
        while due < end:
            if due >= start:
                out.add((name, due))
            due += int(period * SECOND)
    return out


def check_sent(sent: list[Sent], want: set[Any], prefix: str) -> Counter[Any]:
    """Every occurrence wanted was sent, and every message carries its occurrence's id."""
    for s in sent:
        assert s.task_id == occurrence_id(prefix, s.entry, s.due_ms), s
    counts = Counter((s.entry, s.due_ms) for s in sent)
    missing = want - set(counts)
    assert not missing, f"{len(missing)} occurrences never sent, e.g. {sorted(missing)[:3]}"
    return counts


SEND_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/\w+\] Scheduler: Sending")


def longest_pause(log: str) -> float:
    """The longest time, in seconds, between two sends in a beat's log."""
    stamps = [
        datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for m in map(SEND_LINE.match, log.splitlines())
        if m
    ]
    return max((b - a for a, b in itertools.pairwise(stamps)), default=0.0)


class Recorder:
    """Drains the broker queue as the test goes."""

    def __init__(self, broker: redis.Redis) -> None:
        self.broker = broker
        self.sent: list[Sent] = []

    def drain(self) -> int:
        fresh = read_queue(self.broker)
        self.sent += fresh
        return len(fresh)

    def until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        def check() -> bool:
            self.drain()
            return predicate()

        wait_until(check, timeout, what, 0.05)
