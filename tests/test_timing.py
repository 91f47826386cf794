"""Tests for redisbeat.timing: next occurrences of every schedule kind."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest
from celery.schedules import crontab, schedule, solar

from redisbeat.schedule.kinds import Clocked, Cron, Crontab, Interval, Schedule, Solar
from redisbeat.schedule.timing import from_ms, last_due_ms, next_due, next_due_ms, to_ms

UTC = timezone.utc


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def fires(sched: Schedule, start: datetime, end: datetime, tz: str = "UTC") -> list[datetime]:
    """Every occurrence in (start, end], found by chaining next_due_ms."""
    out: list[datetime] = []
    due: int | None = to_ms(start)
    while True:
        due = next_due_ms(sched, due, tz=tz)
        if due is None or due > to_ms(end):
            return out
        out.append(from_ms(due))


# --- intervals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("every", "anchor_ms", "after_ms", "expected"),
    [
        (60, 0, 0, 60_000),
        (60, 0, 59_999, 60_000),
        (60, 0, 60_000, 120_000),
        (60, 1_000, 500, 1_000),
        (60, 600_000, 0, 60_000),  # anchor in the future: the grid extends backwards
        (60, -30_000, 0, 30_000),
        (2.5, 100, 100, 2_600),
        (0.001, 0, 5, 6),
    ],
)
def test_an_anchored_interval_returns_the_first_grid_point_strictly_after(
    every: float, anchor_ms: int, after_ms: int, expected: int
) -> None:
    assert next_due_ms(Interval(every), after_ms, anchor_ms=anchor_ms) == expected


@pytest.mark.parametrize("every", [0.1, 0.3, 1.1, 7.77, 3600])
def test_an_anchored_interval_does_not_drift_over_1000_steps(every: float) -> None:
    anchor = 1_767_225_600_123
    due = anchor
    for _ in range(1000):
        # A little late each time, as a real scheduler would be.
        due = next_due_ms(Interval(every), due + 1, anchor_ms=anchor)
    assert due == anchor + 1000 * round(every * 1000)


@pytest.mark.parametrize(
    ("every", "anchor", "after", "expected"),
    [
        (60, None, utc(2026, 5, 5, 10, 0, 30), utc(2026, 5, 5, 10, 1)),
        (60, utc(2026, 5, 5, 9, 0, 17), utc(2026, 5, 5, 10, 0, 30), utc(2026, 5, 5, 10, 1)),
        (3600, None, utc(2026, 5, 5, 10, 0), utc(2026, 5, 5, 11, 0)),
        (0.25, None, utc(2026, 5, 5, 10, 0, 0, 100_000), utc(2026, 5, 5, 10, 0, 0, 250_000)),
    ],
)
def test_a_relative_interval_aligns_to_the_epoch_whatever_the_anchor(
    every: float, anchor: datetime | None, after: datetime, expected: datetime
) -> None:
    assert next_due(Interval(every, relative=True), after, anchor=anchor) == expected


@pytest.mark.parametrize(("every", "after_ms"), [(60, 0), (0.5, 1_234_567), (86400, -5)])
def test_an_interval_without_anchor_fires_one_period_after(every: float, after_ms: int) -> None:
    assert next_due_ms(Interval(every), after_ms) == after_ms + round(every * 1000)


# --- crontab and cron ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sched", "matches"),
    [
        # Celery: day of week AND day of month, so the first Monday of each month.
        (
            Crontab("0", "9", day_of_week="mon", day_of_month="1-7"),
            lambda d: d.day <= 7 and d.weekday() == 0,
        ),
        # cron: both restricted means either, so the first week plus every Monday.
        (Cron("0 9 1-7 * mon"), lambda d: d.day <= 7 or d.weekday() == 0),
        (Crontab("0", "9", day_of_week="mon-fri"), lambda d: d.weekday() < 5),
        (Cron("0 9 * * 1-5"), lambda d: d.weekday() < 5),
        (
            Crontab("0", "9", day_of_month="13", day_of_week="fri"),
            lambda d: d.day == 13 and d.weekday() == 4,
        ),
        (Cron("0 9 13 * 5"), lambda d: d.day == 13 or d.weekday() == 4),
        (
            Crontab("0", "9", month_of_year="2,8", day_of_month="28-31"),
            lambda d: d.month in (2, 8) and d.day >= 28,
        ),
    ],
)
def test_the_day_rules_follow_celery_for_crontab_and_cron_for_cron(
    sched: Schedule, matches: Callable[[date], bool]
) -> None:
    days = [date(2026, 1, 1) + timedelta(days=n) for n in range(365)]
    expected = [datetime(d.year, d.month, d.day, 9, tzinfo=UTC) for d in days if matches(d)]
    assert fires(sched, utc(2025, 12, 31, 12), utc(2026, 12, 31, 12)) == expected


@pytest.mark.parametrize(
    ("sched", "after", "expected"),
    [
        (Crontab(minute="0", hour="*/3"), utc(2026, 5, 5, 10, 0), utc(2026, 5, 5, 12, 0)),
        (Crontab(minute="*/15"), utc(2026, 5, 5, 10, 7), utc(2026, 5, 5, 10, 15)),
        (Crontab(minute="0,30", hour="23"), utc(2026, 12, 31, 23, 45), utc(2027, 1, 1, 23, 0)),
        (Cron("*/5 * * * *"), utc(2026, 5, 5, 10, 7, 59), utc(2026, 5, 5, 10, 10)),
        (Cron("@daily"), utc(2026, 5, 5, 13, 0), utc(2026, 5, 6, 0, 0)),
        (Cron("@hourly"), utc(2026, 5, 5, 13, 0), utc(2026, 5, 5, 14, 0)),
        (Cron("@daily", tz="Europe/Berlin"), utc(2026, 5, 5, 13, 0), utc(2026, 5, 5, 22, 0)),
        (Cron("0 0 29 2 *"), utc(2026, 1, 1), utc(2028, 2, 29)),
        (Crontab("0", "0", "mon", "29", "2"), utc(2026, 1, 1), utc(2044, 2, 29)),
    ],
)
def test_crontab_and_cron_return_the_next_wall_time(
    sched: Schedule, after: datetime, expected: datetime
) -> None:
    assert next_due(sched, after) == expected


def test_a_six_field_cron_reads_seconds_first() -> None:
    got = fires(Cron("*/10 * * * * *"), utc(2026, 5, 5, 10, 0, 3), utc(2026, 5, 5, 10, 1, 0))
    assert got == [utc(2026, 5, 5, 10, 0, s) for s in (10, 20, 30, 40, 50)] + [
        utc(2026, 5, 5, 10, 1, 0)
    ]


@pytest.mark.parametrize(
    ("zone", "after", "expected"),
    [
        ("UTC", utc(2026, 1, 14, 23, 59), utc(2026, 1, 15, 9)),
        ("Asia/Tokyo", utc(2026, 1, 14, 12), utc(2026, 1, 15, 0)),
        ("Europe/Berlin", utc(2026, 1, 14, 23, 59), utc(2026, 1, 15, 8)),
        ("America/New_York", utc(2026, 1, 14, 23, 59), utc(2026, 1, 15, 14)),
        ("Asia/Kolkata", utc(2026, 1, 14, 23, 59), utc(2026, 1, 15, 3, 30)),
    ],
)
def test_a_zone_gives_the_same_result_however_it_is_chosen(
    zone: str, after: datetime, expected: datetime
) -> None:
    for sched in (Crontab("0", "9"), Cron("0 9 * * *")):
        assert next_due(dataclasses.replace(sched, tz=zone), after) == expected
        assert next_due_ms(sched, to_ms(after), tz=zone) == to_ms(expected)
        assert next_due(sched, after.astimezone(ZoneInfo(zone))) == expected


# --- daylight saving time --------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "wall", "first_day", "expected"),
    [
        # Spring forward: 02:30 does not exist on the middle day; it fires at 03:00.
        (
            "Europe/Berlin",
            "30 2",
            date(2026, 3, 28),
            [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)],
        ),
        (
            "America/New_York",
            "30 2",
            date(2026, 3, 7),
            [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)],
        ),
        # Fall back: 02:30 happens twice in Berlin; only the first (CEST) one fires.
        (
            "Europe/Berlin",
            "30 2",
            date(2026, 10, 24),
            [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
        ),
        (
            "America/New_York",
            "30 2",
            date(2026, 10, 31),
            [utc(2026, 10, 31, 6, 30), utc(2026, 11, 1, 7, 30), utc(2026, 11, 2, 7, 30)],
        ),
        # In New York the repeated hour is 01:00-02:00: 01:30 fires once, in EDT.
        (
            "America/New_York",
            "30 1",
            date(2026, 10, 31),
            [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
        ),
    ],
)
def test_a_daily_job_fires_once_a_day_across_a_dst_change(
    zone: str, wall: str, first_day: date, expected: list[datetime]
) -> None:
    minute, hour = wall.split()
    start = datetime(first_day.year, first_day.month, first_day.day, tzinfo=ZoneInfo(zone))
    end = start + timedelta(days=3)
    for sched in (Crontab(minute, hour, tz=zone), Cron(f"{minute} {hour} * * *", tz=zone)):
        assert fires(sched, start - timedelta(microseconds=1), end) == expected


@pytest.mark.parametrize(
    ("zone", "day", "gap_hour"),
    [
        ("Europe/Berlin", date(2026, 3, 29), 2),
        ("Europe/Berlin", date(2026, 10, 25), None),
        ("America/New_York", date(2026, 3, 8), 2),
        ("America/New_York", date(2026, 11, 1), None),
    ],
)
def test_an_hourly_job_fires_once_per_wall_hour_on_a_dst_day(
    zone: str, day: date, gap_hour: int | None
) -> None:
    tz = ZoneInfo(zone)
    start = datetime(day.year, day.month, day.day, tzinfo=tz)
    got = fires(Cron("30 * * * *", tz=zone), start, start + timedelta(days=1))
    assert got == sorted(set(got))  # strictly increasing, no duplicates
    expected = [time(hour, 30) for hour in range(24)]
    if gap_hour is not None:  # the 02:30 that does not exist fires at 03:00
        expected[gap_hour] = time(gap_hour + 1, 0)
    assert [dt.astimezone(tz).time() for dt in got] == expected


# --- one-offs and solar events ---------------------------------------------------------

AT = datetime(2026, 12, 1, 9, 0, 0, 250_000, tzinfo=ZoneInfo("Europe/Berlin"))


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (AT - timedelta(days=30), AT),
        (AT - timedelta(milliseconds=1), AT),
        (AT, None),
        (AT + timedelta(seconds=1), None),
    ],
)
def test_a_clocked_job_fires_only_if_still_ahead(
    after: datetime, expected: datetime | None
) -> None:
    assert next_due(Clocked(AT), after) == expected


@pytest.mark.parametrize(
    ("event", "lat", "lon", "after"),
    [
        ("sunrise", 52.5, 13.4, utc(2026, 6, 1, 12)),
        ("sunrise", 52.5, 13.4, utc(2026, 12, 21, 3)),
        ("sunset", 48.8, 2.3, utc(2026, 3, 20, 0)),
        ("solar_noon", -33.9, 151.2, utc(2026, 7, 1, 0)),
        ("dawn_astronomical", 78.2, 15.6, utc(2026, 6, 1)),  # polar summer: months ahead
        ("dusk_civil", 64.1, -21.9, utc(2026, 1, 10, 18)),
    ],
)
def test_a_solar_event_matches_what_celery_computes(
    event: str, lat: float, lon: float, after: datetime
) -> None:
    reference = solar(event, lat, lon, nowfun=lambda: after)
    expected = after + reference.remaining_estimate(after)
    got = next_due(Solar(event, lat, lon), after)
    assert got is not None and got > after
    assert to_ms(got) == to_ms(expected)


def test_sunrise_in_berlin_comes_within_a_day_and_strictly_after() -> None:
    sunrise = Solar("sunrise", 52.5, 13.4)
    first = next_due(sunrise, utc(2026, 6, 1, 12))
    assert first is not None and utc(2026, 6, 1, 12) < first < utc(2026, 6, 2, 12)
    # Asked again at the exact instant, it moves on to the next day's sunrise.
    second = next_due(sunrise, first)
    assert second is not None and timedelta(hours=23) < second - first < timedelta(hours=25)


# --- the datetime face -----------------------------------------------------------------

SCHEDULES: list[Schedule] = [
    Interval(90),
    Interval(0.25, relative=True),
    Crontab("*/7", "1-20/3", day_of_week="tue,thu"),
    Crontab("30", "2", tz="Europe/Berlin"),
    Cron("*/10 * * * * *", tz="Asia/Kolkata"),
    Cron("0 0 L * *"),
    Clocked(AT),
    Solar("sunset", 48.8, 2.3),
]
AFTERS = [utc(2026, 3, 29, 0, 59, 59, 999_999), utc(2026, 10, 25, 1, 0, 0, 1_000), AT]


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("after", AFTERS)
def test_next_due_agrees_with_next_due_ms(sched: Schedule, after: datetime) -> None:
    anchor = utc(2026, 1, 1, 0, 0, 7)
    zone = after.tzinfo.key if isinstance(after.tzinfo, ZoneInfo) else "UTC"
    due_ms = next_due_ms(sched, to_ms(after), anchor_ms=to_ms(anchor), tz=zone)
    expected = None if due_ms is None else from_ms(due_ms)
    assert next_due(sched, after, anchor=anchor) == expected
    assert next_due(sched, after.astimezone(ZoneInfo(zone)), anchor=anchor) == expected


@pytest.mark.parametrize(
    ("sched", "expected"),
    [
        (crontab(minute=0, hour="*/3"), utc(2026, 5, 5, 12)),
        (schedule(timedelta(seconds=30)), utc(2026, 5, 5, 10, 0, 30)),
        (timedelta(minutes=5), utc(2026, 5, 5, 10, 5)),
        (2.5, utc(2026, 5, 5, 10, 0, 2, 500_000)),
        (utc(2026, 5, 6), utc(2026, 5, 6)),
    ],
)
def test_next_due_accepts_what_as_schedule_accepts(sched: object, expected: datetime) -> None:
    assert next_due(sched, utc(2026, 5, 5, 10)) == expected


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(timedelta(0), utc(2026, 5, 5, 9)), (timedelta(hours=2), utc(2026, 5, 5, 7))],
)
def test_a_fixed_offset_after_runs_a_zoneless_crontab_at_that_offset(
    offset: timedelta, expected: datetime
) -> None:
    after = utc(2026, 5, 5, 1).astimezone(timezone(offset))
    assert next_due(Crontab("0", "9"), after) == expected


class _OddZone(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(hours=1)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: next_due(Interval(60), datetime(2026, 5, 5, 10)), "naive"),
        (lambda: next_due(Interval(60), utc(2026, 5, 5), anchor=datetime(2026, 5, 5)), "naive"),
        (lambda: next_due(Cron("* * * * *"), datetime(2026, 5, 5, tzinfo=_OddZone())), "ZoneInfo"),
        (lambda: to_ms(datetime(2026, 5, 5)), "naive"),
    ],
)
def test_naive_or_unusable_datetimes_raise_value_error(
    call: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_an_explicit_schedule_zone_makes_any_aware_after_usable() -> None:
    after = datetime(2026, 5, 5, tzinfo=_OddZone())
    assert next_due(Cron("0 9 * * *", tz="UTC"), after) == utc(2026, 5, 5, 9)


@pytest.mark.parametrize(
    ("sched", "after", "expected"),
    [
        (Cron("0 10 * * *"), utc(2026, 5, 5, 10), utc(2026, 5, 6, 10)),
        (Cron("0 10 * * *"), utc(2026, 5, 5, 9, 59, 59, 999_000), utc(2026, 5, 5, 10)),
        (Cron("0 10 * * *"), utc(2026, 5, 5, 10, 0, 0, 1_000), utc(2026, 5, 6, 10)),
        (Cron("*/10 * * * * *"), utc(2026, 5, 5, 10, 0, 10), utc(2026, 5, 5, 10, 0, 20)),
        (Cron("*/10 * * * * *"), utc(2026, 5, 5, 10, 0, 9, 999_000), utc(2026, 5, 5, 10, 0, 10)),
        (Crontab("0", "10"), utc(2026, 5, 5, 10), utc(2026, 5, 6, 10)),
        (Interval(60, relative=True), utc(2026, 5, 5, 10), utc(2026, 5, 5, 10, 1)),
        # Second pass of Berlin's repeated hour: the rest of it already fired in the first.
        (Cron("* * * * * *", tz="Europe/Berlin"), utc(2026, 10, 25, 1, 0, 5), utc(2026, 10, 25, 2)),
        (Cron("*/30 * * * *", tz="Europe/Berlin"), utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 2)),
        (Cron("*/30 * * * *", tz="Europe/Berlin"), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2)),
        (
            Cron("*/30 * * * *", tz="Europe/Berlin"),
            utc(2026, 10, 25, 0, 29),
            utc(2026, 10, 25, 0, 30),
        ),
    ],
)
def test_next_due_is_strictly_after_at_exact_boundaries(
    sched: Schedule, after: datetime, expected: datetime
) -> None:
    assert next_due(sched, after) == expected


@pytest.mark.parametrize(
    ("dt", "ms"),
    [
        (utc(1970, 1, 1), 0),
        (utc(2026, 5, 5, 10, 0, 0, 999_999), 1_777_975_200_999),
        (utc(1969, 12, 31, 23, 59, 59, 999_500), -1),
        (datetime(2026, 5, 5, 12, tzinfo=ZoneInfo("Europe/Berlin")), 1_777_975_200_000),
    ],
)
def test_to_ms_floors_and_from_ms_returns_utc(dt: datetime, ms: int) -> None:
    assert to_ms(dt) == ms
    assert from_ms(ms) == dt.replace(microsecond=dt.microsecond // 1000 * 1000)
    assert from_ms(ms).tzinfo is UTC


def _last_by_stepping(sched: Schedule, due_ms: int, until_ms: int, anchor_ms: int | None) -> int:
    last = due_ms
    while (step := next_due_ms(sched, last, anchor_ms=anchor_ms)) is not None and step <= until_ms:
        last = step
    return last


_T0 = to_ms(datetime(2026, 3, 28, 22, 7, 13, tzinfo=timezone.utc))


@pytest.mark.parametrize(
    ("sched", "late_ms"),
    [
        (Interval(7.5), 0),
        (Interval(7.5), 7_499),
        (Interval(7.5), 3_600_000),
        (Interval(60, relative=True), 86_400_000),
        (Cron("*/5 * * * *"), 299_000),
        (Cron("*/5 * * * *", tz="Europe/Berlin"), 3 * 86_400_000),  # over a spring-forward
        (Crontab(minute="30", hour="2", tz="Europe/Berlin"), 40 * 86_400_000),
        (Cron("*/2 * * * * *"), 7_000),
        (Cron("0 0 1 1 *"), 30 * 86_400_000),  # nothing more due: the claimed one
    ],
)
def test_last_due_is_the_last_occurrence_by_then(sched: Schedule, late_ms: int) -> None:
    due = next_due_ms(sched, _T0, anchor_ms=_T0)
    assert due is not None
    until = due + late_ms
    expected = _last_by_stepping(sched, due, until, due)
    assert last_due_ms(sched, due, until, anchor_ms=due) == expected
    assert due <= expected <= until
