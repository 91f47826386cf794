"""DST policies of wall-clock schedules: ``dst_gap`` (shift, skip) and ``dst_fold`` (once,
twice), pinned on both DST days of five zones, and carried through every way an entry is
written (JSON, beat_schedule, settings, the store, the command line)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab

from redisbeat import Entry
from redisbeat.config import Config
from redisbeat.errors import ConfigurationError, InvalidEntry, InvalidSchedule
from redisbeat.schedule.codec import from_json, to_json
from redisbeat.schedule.from_celery import config_entries
from redisbeat.schedule.kinds import Cron, Crontab, Schedule
from redisbeat.schedule.timing import from_ms, last_due_ms, next_due_ms, to_ms
from redisbeat.schedule.words import describe

UTC = timezone.utc


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def fires(sched: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """Every occurrence in (start, end], found by chaining next_due_ms."""
    out: list[datetime] = []
    due: int | None = to_ms(start)
    while True:
        due = next_due_ms(sched, due)
        if due is None or due > to_ms(end):
            return out
        out.append(from_ms(due))


def both_kinds(zone: str, minute: str, hour: str, **policies: str) -> list[Schedule]:
    return [
        Crontab(minute, hour, tz=zone, **policies),
        Cron(f"{minute} {hour} * * *", tz=zone, **policies),
    ]


# The spring-forward day: a daily run at a wall time inside the gap, over three days.
# (zone, minute, hour, the day before, [day before, gap day with "shift", day after])
GAPS = [
    # 02:00-02:59 does not exist on 2026-03-29 (01:00Z).
    ("Europe/Berlin", "30", "2", utc(2026, 3, 27, 12), utc(2026, 3, 28, 1, 30),
     utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)),
    # 02:00-02:59 does not exist on 2026-03-08 (07:00Z).
    ("America/New_York", "30", "2", utc(2026, 3, 7, 0), utc(2026, 3, 7, 7, 30),
     utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)),
    # A 30-minute shift: 02:00-02:29 does not exist on 2026-10-04 (10-03 15:30Z).
    ("Australia/Lord_Howe", "15", "2", utc(2026, 10, 2, 0), utc(2026, 10, 2, 15, 45),
     utc(2026, 10, 3, 15, 30), utc(2026, 10, 4, 15, 15)),
    # At midnight: 00:00-00:59 does not exist on 2026-09-06 (04:00Z).
    ("America/Santiago", "30", "0", utc(2026, 9, 4, 12), utc(2026, 9, 5, 4, 30),
     utc(2026, 9, 6, 4, 0), utc(2026, 9, 7, 3, 30)),
    # At midnight: 00:00-00:59 does not exist on 2026-03-29 (03-28 22:00Z).
    ("Asia/Beirut", "30", "0", utc(2026, 3, 27, 12), utc(2026, 3, 27, 22, 30),
     utc(2026, 3, 28, 22, 0), utc(2026, 3, 29, 21, 30)),
]  # fmt: skip


@pytest.mark.parametrize(("zone", "minute", "hour", "start", "before", "shifted", "after"), GAPS)
def test_a_wall_time_the_clocks_skip_fires_at_the_change_or_not_that_day(
    zone: str,
    minute: str,
    hour: str,
    start: datetime,
    before: datetime,
    shifted: datetime,
    after: datetime,
) -> None:
    end = start + timedelta(days=3)
    for policy in (None, "shift"):
        for sched in both_kinds(zone, minute, hour, **({"dst_gap": policy} if policy else {})):
            assert fires(sched, start, end) == [before, shifted, after], sched
    for sched in both_kinds(zone, minute, hour, dst_gap="skip"):
        assert fires(sched, start, end) == [before, after], sched


# The fall-back day: every 30 minutes across the repeated wall times.
# (zone, the instant to start after, first passes and the end, second passes)
FOLDS = [
    # 02:00-02:59 happens twice on 2026-10-25: CEST (00:00Z-00:59Z), then CET.
    ("Europe/Berlin", utc(2026, 10, 24, 23, 45),
     [utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2, 0)],
     [utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 1, 30)]),
    # 01:00-01:59 happens twice on 2026-11-01: EDT (05:00Z-05:59Z), then EST.
    ("America/New_York", utc(2026, 11, 1, 4, 45),
     [utc(2026, 11, 1, 5, 0), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 7, 0)],
     [utc(2026, 11, 1, 6, 0), utc(2026, 11, 1, 6, 30)]),
    # A 30-minute shift: 01:30-01:59 happens twice on 2026-04-05 (+11:00, then +10:30).
    ("Australia/Lord_Howe", utc(2026, 4, 4, 13, 45),
     [utc(2026, 4, 4, 14, 0), utc(2026, 4, 4, 14, 30), utc(2026, 4, 4, 15, 30)],
     [utc(2026, 4, 4, 15, 0)]),
    # At midnight: 23:00-23:59 of 2026-04-04 happens twice (-03:00, then -04:00).
    ("America/Santiago", utc(2026, 4, 5, 1, 45),
     [utc(2026, 4, 5, 2, 0), utc(2026, 4, 5, 2, 30), utc(2026, 4, 5, 4, 0)],
     [utc(2026, 4, 5, 3, 0), utc(2026, 4, 5, 3, 30)]),
    # At midnight: 23:00-23:59 of 2026-10-24 happens twice (+03:00, then +02:00).
    ("Asia/Beirut", utc(2026, 10, 24, 19, 45),
     [utc(2026, 10, 24, 20, 0), utc(2026, 10, 24, 20, 30), utc(2026, 10, 24, 22, 0)],
     [utc(2026, 10, 24, 21, 0), utc(2026, 10, 24, 21, 30)]),
]  # fmt: skip


@pytest.mark.parametrize(("zone", "start", "once", "second_passes"), FOLDS)
def test_a_wall_time_the_clocks_repeat_fires_once_or_in_both_passes(
    zone: str, start: datetime, once: list[datetime], second_passes: list[datetime]
) -> None:
    end = once[-1]
    for policy in (None, "once"):
        for sched in both_kinds(zone, "*/30", "*", **({"dst_fold": policy} if policy else {})):
            assert fires(sched, start, end) == once, sched
    twice = sorted(once + second_passes)
    for sched in both_kinds(zone, "*/30", "*", dst_fold="twice"):
        assert fires(sched, start, end) == twice, sched
        # From inside either pass, the next run is the next one of the merged sequence.
        for i in range(len(twice) - 1):
            assert from_ms(next_due_ms(sched, to_ms(twice[i]))) == twice[i + 1]  # type: ignore[arg-type]
            midway = twice[i] + (twice[i + 1] - twice[i]) / 2
            assert from_ms(next_due_ms(sched, to_ms(midway))) == twice[i + 1]  # type: ignore[arg-type]
        # A late claim stands for the last occurrence due by then, second passes included.
        for i, due in enumerate(twice):
            until = to_ms(twice[-1]) - 1
            assert from_ms(last_due_ms(sched, to_ms(due), until)) == twice[max(i, len(twice) - 2)]


def test_every_second_pass_of_a_seconds_cron_fires_once_in_order() -> None:
    # Berlin, 2026-10-25: 02:59:58 CEST, 02:59:59 CEST, then 02:00:00 CET and on.
    sched = Cron("* * * * * *", tz="Europe/Berlin", dst_fold="twice")
    got = fires(sched, utc(2026, 10, 25, 0, 59, 57), utc(2026, 10, 25, 1, 0, 2))
    assert got == [utc(2026, 10, 25, 0, 59, 58) + timedelta(seconds=s) for s in range(5)]
    once = Cron("* * * * * *", tz="Europe/Berlin")
    assert fires(once, utc(2026, 10, 25, 0, 59, 58), utc(2026, 10, 25, 2, 0, 0)) == [
        utc(2026, 10, 25, 0, 59, 59),
        utc(2026, 10, 25, 2, 0, 0),  # 03:00:00 CET: the repeated hour already ran
    ]


def test_both_policies_together_and_a_schedule_that_only_ever_falls_in_a_gap() -> None:
    sched = Cron("30 2 * * *", tz="Europe/Berlin", dst_gap="skip", dst_fold="twice")
    got = fires(sched, utc(2026, 3, 27), utc(2026, 10, 27))
    assert utc(2026, 3, 29, 1, 0) not in got and utc(2026, 3, 30, 0, 30) in got
    assert [d for d in got if d.month == 10 and d.day == 25] == [
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 25, 1, 30),
    ]
    # 02:30 on the last Sunday of March, in Berlin: always inside the gap, so never.
    never = Crontab("30", "2", day_of_week="sun", day_of_month="25-31", month_of_year="3",
                    tz="Europe/Berlin", dst_gap="skip")  # fmt: skip
    assert next_due_ms(never, to_ms(utc(2026, 1, 1))) is None
    shifted = Crontab("30", "2", "sun", "25-31", "3", tz="Europe/Berlin")
    assert from_ms(next_due_ms(shifted, to_ms(utc(2026, 1, 1)))) == utc(2026, 3, 29, 1)  # type: ignore[arg-type]


# --- the policies as fields ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"dst_gap": "later"}, "schedule.dst_gap"),
        ({"dst_fold": "thrice"}, "schedule.dst_fold"),
        ({"dst_fold": True}, "schedule.dst_fold"),
    ],
)
def test_an_unknown_policy_is_refused_naming_the_field(values: dict[str, Any], field: str) -> None:
    for make in (lambda: Crontab(**values), lambda: Cron("* * * * *", **values)):
        with pytest.raises(InvalidSchedule) as caught:
            make()
        assert caught.value.field == field


def test_the_json_form_holds_a_policy_only_when_one_is_set() -> None:
    plain = Cron("0 9 * * *", tz="Europe/Berlin")
    assert to_json(plain) == {"kind": "cron", "expr": "0 9 * * *", "tz": "Europe/Berlin"}
    assert from_json(to_json(plain)) == plain
    skip = Crontab("30", "2", tz="Europe/Berlin", dst_gap="skip", dst_fold="twice")
    data = to_json(skip)
    assert (data["dst_gap"], data["dst_fold"]) == ("skip", "twice")
    assert from_json(json.loads(json.dumps(data))) == skip
    with pytest.raises(InvalidSchedule) as caught:
        from_json({**data, "dst_fold": 2})
    assert caught.value.field == "schedule.dst_fold"
    entry = Entry("e", "proj.ping", skip)
    assert Entry.loads(entry.dumps(), "e") == entry
    assert describe(skip) == (
        "At 02:30 (Europe/Berlin; no run in the DST gap; both passes of the DST overlap)"
    )


def app_with(schedule: dict[str, Any], **conf: Any) -> Celery:
    app = Celery(set_as_current=False)
    app.conf.beat_schedule = schedule
    app.conf.update(conf)
    return app


def test_beat_schedule_sets_the_policies_beside_a_celery_crontab() -> None:
    app = app_with(
        {"half-hourly": {"task": "t", "schedule": crontab(minute="*/30"), "dst_fold": "twice"}}
    )
    entry = {e.name: e for e in config_entries(app)}["half-hourly"]
    assert entry.schedule == Crontab(minute="*/30", dst_fold="twice")
    app = app_with({"x": {"task": "t", "schedule": 60, "dst_gap": "skip"}})
    with pytest.raises(InvalidEntry, match=r"'x'.*'dst_gap'.*crontab and cron"):
        config_entries(app)
    app = app_with({"x": {"task": "t", "schedule": crontab(), "dst_fold": "often"}})
    with pytest.raises(InvalidEntry, match=r"'x'.*'dst_fold'"):
        config_entries(app)


def test_the_deployment_defaults_are_settings_checked_at_start_up() -> None:
    config = Config.from_app(
        app_with({}, redisbeat_redis_url="redis://x", redisbeat_dst_gap="skip")
    )
    assert (config.dst_gap, config.dst_fold) == ("skip", "once")
    with pytest.raises(ConfigurationError, match="redisbeat_dst_fold must be one of once, twice"):
        Config.from_app(app_with({}, redisbeat_redis_url="redis://x", redisbeat_dst_fold="2"))
