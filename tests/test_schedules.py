"""Tests for redisbeat.schedules: construction, validation, conversion and JSON form."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery.schedules import crontab, schedule, solar

from redisbeat.errors import InvalidSchedule
from redisbeat.schedule.codec import from_json, to_json
from redisbeat.schedule.kinds import (
    SOLAR_EVENTS,
    Clocked,
    Cron,
    Crontab,
    Interval,
    Schedule,
    Solar,
    as_schedule,
    with_default_tz,
)
from redisbeat.schedule.timing import next_due_ms, to_ms

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")

EVERY_KIND: list[Schedule] = [
    Interval(60),
    Interval(0.25, relative=True),
    Crontab(minute="30", hour="2", tz="Europe/Berlin"),
    Crontab("*/15", "9-17", day_of_week="mon-fri", day_of_month="1-7", month_of_year="1,7"),
    Cron("*/5 * * * *", tz="UTC"),
    Cron("*/10 * * * * *"),
    Cron("@daily", tz="America/New_York"),
    Clocked(datetime(2026, 12, 1, 9, 0, 0, 250_000, tzinfo=BERLIN)),
    Clocked(datetime(2026, 12, 1, 9, tzinfo=timezone(timedelta(hours=-3, minutes=-30)))),
    Solar("sunrise", 52.5, 13.4),
    Solar("dusk_nautical", -33.9, 151.2),
]


def occurrences(sched: Schedule, count: int = 20) -> list[int | None]:
    out: list[int | None] = []
    due: int | None = to_ms(datetime(2026, 3, 27, tzinfo=UTC))
    for _ in range(count):
        due = None if due is None else next_due_ms(sched, due, anchor_ms=7, tz="Asia/Tokyo")
        out.append(due)
    return out


# --- JSON form -------------------------------------------------------------------------


@pytest.mark.parametrize("sched", EVERY_KIND, ids=repr)
def test_the_json_round_trip_gives_back_an_equal_schedule_with_the_same_occurrences(
    sched: Schedule,
) -> None:
    data = to_json(sched)
    back = from_json(json.loads(json.dumps(data)))  # through real JSON: native types only
    assert back == sched
    assert from_json(data) == sched
    assert occurrences(back) == occurrences(sched)


@pytest.mark.parametrize(
    ("sched", "expected"),
    [
        (Interval(60), {"kind": "interval", "every": 60.0, "relative": False}),
        (
            Crontab("30", "2", tz="Europe/Berlin"),
            {
                "kind": "crontab",
                "minute": "30",
                "hour": "2",
                "day_of_week": "*",
                "day_of_month": "*",
                "month_of_year": "*",
                "tz": "Europe/Berlin",
            },
        ),
        (Cron("*/5 * * * *", tz="UTC"), {"kind": "cron", "expr": "*/5 * * * *", "tz": "UTC"}),
        (
            Clocked(datetime(2026, 12, 1, 9, 0, 0, 250_000, tzinfo=BERLIN)),
            {"kind": "clocked", "at": "2026-12-01T09:00:00.250000+01:00"},
        ),
        (
            Solar("sunrise", 52.5, 13.4),
            {"kind": "solar", "event": "sunrise", "lat": 52.5, "lon": 13.4},
        ),
    ],
)
def test_to_json_gives_the_flat_documented_form(sched: Schedule, expected: dict[str, Any]) -> None:
    data = to_json(sched)
    assert data == expected
    assert [type(v) for v in data.values()] == [type(v) for v in expected.values()]


def test_from_json_reads_a_utc_z_suffix() -> None:
    got = from_json({"kind": "clocked", "at": "2026-12-01T08:00:00Z"})
    assert got == Clocked(datetime(2026, 12, 1, 8, tzinfo=UTC))


INTERVAL = {"kind": "interval", "every": 60, "relative": False}
CRON = {"kind": "cron", "expr": "* * * * *", "tz": None}
CRONTAB = {"kind": "crontab", "minute": "0", "hour": "*", "day_of_week": "*"}
CRONTAB |= {"day_of_month": "*", "month_of_year": "*", "tz": None}
SOLAR = {"kind": "solar", "event": "sunrise", "lat": 52.5, "lon": 13.4}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([INTERVAL], "schedule"),
        ("interval", "schedule"),
        (None, "schedule"),
        ({}, "schedule.kind"),
        ({**INTERVAL, "kind": "weekly"}, "schedule.kind"),
        ({**INTERVAL, "kind": 1}, "schedule.kind"),
        ({"kind": "interval", "relative": False}, "schedule.every"),
        ({**INTERVAL, "every": "60"}, "schedule.every"),
        ({**INTERVAL, "every": True}, "schedule.every"),
        ({**INTERVAL, "every": 0}, "schedule.every"),
        ({**INTERVAL, "relative": 0}, "schedule.relative"),
        ({"kind": "cron", "expr": "* * * * *"}, "schedule.tz"),
        ({**CRON, "expr": 5}, "schedule.expr"),
        ({**CRON, "tz": 0}, "schedule.tz"),
        ({**CRON, "tz": "Mars/Olympus"}, "schedule.tz"),
        ({**CRON, "expr": "0 0 31 2 *"}, "schedule.expr"),
        ({**CRON, "every": 60}, "schedule.every"),
        ({**CRONTAB, "minute": 0}, "schedule.minute"),
        ({**CRONTAB, "hour": "25"}, "schedule.hour"),
        ({k: v for k, v in CRONTAB.items() if k != "month_of_year"}, "schedule.month_of_year"),
        ({"kind": "clocked", "at": "yesterday"}, "schedule.at"),
        ({"kind": "clocked", "at": "2026-12-01T09:00:00"}, "schedule.at"),
        ({"kind": "clocked", "at": 1764576000}, "schedule.at"),
        ({"kind": "clocked"}, "schedule.at"),
        ({**SOLAR, "lat": "52.5"}, "schedule.lat"),
        ({**SOLAR, "lon": None}, "schedule.lon"),
        ({**SOLAR, "event": "moonrise"}, "schedule.event"),
        ({**SOLAR, "elevation": 30}, "schedule.elevation"),
    ],
)
def test_from_json_rejects_malformed_data_naming_the_field(data: Any, field: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        from_json(data)
    assert caught.value.field == field


def test_to_json_rejects_what_is_not_a_schedule() -> None:
    with pytest.raises(InvalidSchedule) as caught:
        to_json(crontab())  # type: ignore[arg-type]
    assert caught.value.field == "schedule"


# --- converting what Celery users write ------------------------------------------------

AWARE = datetime(2026, 12, 1, 9, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (crontab(minute=0, hour="*/3"), Crontab(minute="0", hour="*/3")),
        (crontab(), Crontab()),
        (
            crontab("0,30", "9-17", day_of_week="mon-fri", day_of_month="1-7", month_of_year=1),
            Crontab("0,30", "9-17", "mon-fri", "1-7", "1"),
        ),
        (crontab(minute=[30, 0], day_of_week={5, 1}), Crontab(minute="0,30", day_of_week="1,5")),
        (schedule(timedelta(seconds=30)), Interval(30.0)),
        (schedule(45, relative=True), Interval(45.0, relative=True)),
        (solar("sunset", 48.8, 2.3), Solar("sunset", 48.8, 2.3)),
        (timedelta(minutes=5), Interval(300)),
        (2.5, Interval(2.5)),
        (10, Interval(10)),
        (AWARE, Clocked(AWARE)),
    ],
    ids=repr,
)
def test_as_schedule_converts_celery_schedules_and_plain_values(
    value: object, expected: Schedule
) -> None:
    assert as_schedule(value) == expected


@pytest.mark.parametrize("sched", EVERY_KIND, ids=repr)
def test_as_schedule_returns_a_schedule_unchanged(sched: Schedule) -> None:
    assert as_schedule(sched) is sched


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("*/5 * * * *", "schedule"),
        (None, "schedule"),
        (True, "schedule"),
        ({"kind": "interval", "every": 60}, "schedule"),
        (datetime(2026, 12, 1, 9), "schedule.at"),
        (timedelta(0), "schedule.every"),
        (-5, "schedule.every"),
    ],
)
def test_as_schedule_rejects_what_it_cannot_convert(value: object, field: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        as_schedule(value)
    assert caught.value.field == field


def test_a_converted_celery_crontab_fires_on_the_hours_celery_expands() -> None:
    original = crontab(minute=0, hour="*/3")
    sched = as_schedule(original)
    midnight = to_ms(datetime(2026, 5, 5, tzinfo=UTC))
    due: int | None = midnight - 1
    hours = []
    for _ in range(8):
        due = next_due_ms(sched, due or 0)
        hours.append(((due or 0) - midnight) / 3_600_000)
    assert hours == sorted(original.hour)  # type: ignore[attr-defined]


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Crontab(minute="61"), "schedule.minute"),
        (lambda: Crontab(hour="x"), "schedule.hour"),
        (lambda: Crontab(minute="*/0"), "schedule.minute"),
        (lambda: Crontab(minute=""), "schedule.minute"),
        (lambda: Crontab(minute=5), "schedule.minute"),
        (lambda: Crontab(day_of_week="funday"), "schedule.day_of_week"),
        (lambda: Crontab(day_of_month="0"), "schedule.day_of_month"),
        (lambda: Crontab(month_of_year="13"), "schedule.month_of_year"),
        (lambda: Crontab(tz="Mars/Olympus"), "schedule.tz"),
        (lambda: Cron("not a cron"), "schedule.expr"),
        (lambda: Cron("* * * *"), "schedule.expr"),
        (lambda: Cron("0 * * * * * 2030"), "schedule.expr"),
        (lambda: Cron("61 * * * *"), "schedule.expr"),
        (lambda: Cron("@reboot"), "schedule.expr"),
        (lambda: Cron(None), "schedule.expr"),
        (lambda: Cron("* * * * *", tz="Mars/Olympus"), "schedule.tz"),
        (lambda: Cron("* * * * *", tz=""), "schedule.tz"),
        (lambda: Interval(every=0), "schedule.every"),
        (lambda: Interval(every=-1), "schedule.every"),
        (lambda: Interval(every=0.0005), "schedule.every"),
        (lambda: Interval(every=float("nan")), "schedule.every"),
        (lambda: Interval(every=float("inf")), "schedule.every"),
        (lambda: Interval(every="60"), "schedule.every"),
        (lambda: Interval(every=60, relative="yes"), "schedule.relative"),
        (lambda: Clocked(datetime(2026, 12, 1, 9)), "schedule.at"),
        (lambda: Clocked("2026-12-01T09:00:00+00:00"), "schedule.at"),
        (lambda: Solar("moonrise", 52.5, 13.4), "schedule.event"),
        (lambda: Solar("sunrise", 100, 13.4), "schedule.lat"),
        (lambda: Solar("sunrise", -90.5, 13.4), "schedule.lat"),
        (lambda: Solar("sunrise", 52.5, 181), "schedule.lon"),
        (lambda: Solar("sunrise", 52.5, True), "schedule.lon"),
    ],
)
def test_an_invalid_schedule_cannot_be_built(build: Callable[[], object], field: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        build()
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Cron("0 0 31 2 *"), "schedule.expr"),
        (lambda: Cron("0 0 30 2 *"), "schedule.expr"),
        (lambda: Cron("0 0 0 31 4,6,9,11 *"), "schedule.expr"),
        (lambda: Crontab(day_of_month="31", month_of_year="2"), "schedule.day_of_month"),
        (lambda: Crontab(day_of_month="31", month_of_year="4,6,9,11"), "schedule.day_of_month"),
    ],
)
def test_a_schedule_that_never_fires_is_rejected_quickly(
    build: Callable[[], object], field: str
) -> None:
    # CPU time, not wall time: a loaded machine does not make the search longer.
    started = time.process_time()
    with pytest.raises(InvalidSchedule, match="never fires") as caught:
        build()
    assert caught.value.field == field
    assert time.process_time() - started < 0.25  # a bounded search, not croniter's 50 years


@pytest.mark.parametrize(
    "build",
    [
        lambda: Crontab(day_of_month="29", month_of_year="2", day_of_week="mon"),  # 2044
        lambda: Cron("0 0 29 2 *"),
        lambda: Cron("0 0 29 2 1"),  # cron: Feb 29 OR any Monday
        lambda: Cron("0 0 * 2 1#5"),  # a fifth Monday in February: 2016, 2044
        lambda: Crontab(day_of_month="31"),
    ],
)
def test_a_schedule_that_fires_rarely_is_accepted(build: Callable[[], Schedule]) -> None:
    sched = build()
    assert next_due_ms(sched, to_ms(datetime(2026, 1, 1, tzinfo=UTC))) is not None


def test_an_unknown_zone_names_the_zone() -> None:
    with pytest.raises(InvalidSchedule) as caught:
        Crontab(tz="Mars/Olympus")
    assert (caught.value.field, caught.value.message) == (
        "schedule.tz",
        "unknown time zone 'Mars/Olympus'",
    )


def test_solar_events_are_the_ones_celery_accepts() -> None:
    assert frozenset(solar._all_events) == SOLAR_EVENTS  # type: ignore[attr-defined]


def test_schedules_are_frozen_and_hashable() -> None:
    with pytest.raises(AttributeError):
        Interval(60).every = 30  # type: ignore[misc]
    assert len(set(EVERY_KIND + EVERY_KIND)) == len(EVERY_KIND)


# --- default zones ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sched", "expected"),
    [
        (Crontab("0", "9"), Crontab("0", "9", tz="Asia/Tokyo")),
        (Crontab("0", "9", tz="UTC"), Crontab("0", "9", tz="UTC")),
        (Cron("0 9 * * *"), Cron("0 9 * * *", tz="Asia/Tokyo")),
        (Cron("0 9 * * *", tz="Europe/Berlin"), Cron("0 9 * * *", tz="Europe/Berlin")),
        (Interval(60), Interval(60)),
        (Solar("sunset", 48.8, 2.3), Solar("sunset", 48.8, 2.3)),
    ],
)
def test_with_default_tz_fills_in_only_a_missing_zone(sched: Schedule, expected: Schedule) -> None:
    assert with_default_tz(sched, "Asia/Tokyo") == expected


def test_with_default_tz_rejects_an_unknown_zone() -> None:
    with pytest.raises(InvalidSchedule) as caught:
        with_default_tz(Interval(60), "Mars/Olympus")
    assert caught.value.field == "schedule.tz"


def test_a_schedule_read_again_is_the_same_one_and_a_wrong_type_is_still_refused() -> None:
    # Schedules read back are shared by entries with the same fields, built and checked once.
    good = {"kind": "cron", "expr": "*/5 * * * *", "tz": None}
    assert from_json(dict(good)) is from_json(dict(good))
    interval = {"kind": "interval", "every": 10.0, "relative": True}
    assert from_json(interval).relative is True
    # 1 == True, but only a bool is a valid "relative": the cache keeps them apart.
    with pytest.raises(InvalidSchedule) as raised:
        from_json({**interval, "relative": 1})
    assert raised.value.field == "schedule.relative"
    with pytest.raises(InvalidSchedule) as raised:
        from_json({**good, "expr": ["*/5"]})  # not hashable, and not a string
    assert raised.value.field == "schedule.expr"


def test_a_solar_schedule_without_ephem_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from redisbeat.schedule import solar as solar_module

    monkeypatch.setitem(sys.modules, "ephem", None)  # as if it were not installed
    solar_module._celery_solar.cache_clear()
    with pytest.raises(ModuleNotFoundError) as caught:
        next_due_ms(Solar("sunrise", 52.5, 13.4), to_ms(datetime(2026, 6, 1, tzinfo=timezone.utc)))
    assert "pip install 'celery-redisbeat[solar]'" in str(caught.value)
    assert caught.value.name == "ephem"
