"""The overlap and jitter fields: their checks, JSON and beat_schedule forms, the jitter's
arithmetic, and the count of missed occurrences."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from celery import Celery
from celery.schedules import crontab

from redisbeat import Cron, Entry, Interval, InvalidEntry
from redisbeat.schedule.catch_up import COUNT_LIMIT, missed_between
from redisbeat.schedule.clock import to_ms
from redisbeat.schedule.from_celery import config_entries
from redisbeat.schedule.ids import jitter_ms


def test_overlap_and_jitter_are_checked_naming_the_field_and_stored_only_when_set():
    plain = Entry("e", "t", 60)
    assert "overlap" not in plain.to_json() and "jitter" not in plain.to_json()
    entry = Entry("e", "t", 60, overlap="buffer_one", jitter=12.5)
    assert (entry.to_json()["overlap"], entry.to_json()["jitter"]) == ("buffer_one", 12.5)
    assert Entry.loads(entry.dumps(), "e") == entry
    with pytest.raises(InvalidEntry, match=r"entry 'e': field 'overlap': must be one of"):
        Entry("e", "t", 60, overlap="queue")
    for bad in (-1, float("nan"), float("inf"), "5", True):
        with pytest.raises(InvalidEntry, match=r"field 'jitter'"):
            Entry("e", "t", 60, jitter=bad)  # type: ignore[arg-type]


def test_beat_schedule_takes_overlap_and_jitter():
    app = Celery(set_as_current=False)
    app.conf.beat_schedule = {
        "sync": {"task": "t", "schedule": crontab(minute="*/5"), "overlap": "skip", "jitter": 30}
    }
    [entry] = [e for e in config_entries(app) if e.name == "sync"]
    assert (entry.overlap, entry.jitter) == ("skip", 30)
    app.conf.beat_schedule = {"sync": {"task": "t", "schedule": 60, "overlap": "never"}}
    with pytest.raises(InvalidEntry, match=r"'sync'.*'overlap'"):
        config_entries(app)


def test_jitter_is_stable_spread_and_short_of_the_next_occurrence():
    dues = [1_800_000_000_000 + i * 60_000 for i in range(2000)]
    delays = [jitter_ms("e", due, 30, 60_000) for due in dues]
    assert delays == [jitter_ms("e", due, 30, 60_000) for due in dues]  # every beat alike
    assert all(0 <= d <= 30_000 for d in delays)
    assert 12_000 < sum(delays) / len(delays) < 18_000  # even over the range
    assert jitter_ms("other", dues[0], 30, 60_000) != jitter_ms("e", dues[0], 30, 60_000)
    assert all(jitter_ms("e", due, 90, 60_000) < 60_000 for due in dues[:200])
    assert jitter_ms("e", dues[0], 30, 1) == 0 and jitter_ms("e", dues[0], 0, None) == 0


def test_missed_between_counts_an_interval_by_arithmetic_and_a_cron_one_by_one():
    every = Entry("e", "t", Interval(10))
    assert missed_between(every, 0, 0, 0, "UTC") == 0
    assert missed_between(every, 0, 0, 10_000, "UTC") == 1
    assert missed_between(every, 0, 0, 10_001, "UTC") == 2
    assert missed_between(every, 0, 0, 86_400_000 * 365, "UTC") == 3_153_600
    hourly = Entry("h", "t", Cron("0 * * * *", tz="UTC"))
    start = to_ms(datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert missed_between(hourly, start, start, start + 5 * 3_600_000, "UTC") == 5
    assert missed_between(hourly, start, start, start + 10**12, "UTC") == COUNT_LIMIT
    one_off = Entry("o", "t", Interval(10), one_off=True)
    assert missed_between(one_off, 0, 0, 100_000, "UTC") == 0
