"""Property-based tests: every schedule kind survives Redis unchanged, any cron text is safe.

Hypothesis builds valid schedules and entries of every kind (in awkward zones, around DST
transitions), stores them through ``ScheduleStore`` in the session's private Redis and loads
them back: the entry must come back equal and give the very same next runs, computed with
the library's own timing functions before and after. Arbitrary cron text and crontab
fields must either build a schedule that fires or raise ``InvalidSchedule`` naming the field,
within a bounded time.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone, tzinfo
from functools import cache
from types import FrameType
from typing import Any
from zoneinfo import ZoneInfo

import ephem
import pytest
import redis
from celery.schedules import crontab, schedule, solar
from croniter import CroniterBadDateError, croniter
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from redisbeat import Entry, ScheduleStore
from redisbeat.errors import InvalidSchedule
from redisbeat.schedule.codec import from_json, to_json
from redisbeat.schedule.kinds import (
    CRONTAB_FIELDS,
    DST_FOLD_POLICIES,
    DST_GAP_POLICIES,
    MAX_INTERVAL,
    SOLAR_EVENTS,
    Clocked,
    Cron,
    Crontab,
    Interval,
    Schedule,
    Solar,
    as_schedule,
    cron_spec,
)
from redisbeat.schedule.timing import from_ms, next_due, next_due_ms, to_ms
from redisbeat_testkit.redis_server import RedisServer

UTC = timezone.utc
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # a 30-minute DST shift
    "Asia/Kathmandu",  # +05:45, once +05:30
    "Pacific/Chatham",  # +12:45 / +13:45
    "America/Sao_Paulo",  # DST at midnight, abolished in 2019
    "Europe/Dublin",  # negative DST in tzdata
    "Pacific/Apia",  # skipped a whole day in 2011
]
FIRST = datetime(1971, 1, 1, tzinfo=UTC)
LAST = datetime(2089, 12, 31, tzinfo=UTC)
RUNS = 10
#: Seconds one call into the library may take before the test calls it a hang.
CALL_BOUND = 5.0


def budget(examples: int) -> int:
    """``examples`` scaled by $REDISBEAT_FUZZ_SCALE (say 50 to hunt for bugs locally)."""
    return max(1, round(examples * float(os.environ.get("REDISBEAT_FUZZ_SCALE", "1"))))


# --- bounding calls ----------------------------------------------------------------------


class Hang(Exception):
    """A library call ran past CALL_BOUND."""


@contextmanager
def bounded(what: str, seconds: float = CALL_BOUND) -> Iterator[None]:
    """Raise Hang in the block after ``seconds``; pytest-timeout's own alarm is kept."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"{what} took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            left = max(outer - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


# --- instants, with a bias to DST transitions ---------------------------------------------


@cache
def transitions(zone_name: str) -> tuple[int, ...]:
    """The seconds since the epoch at which ``zone_name``'s UTC offset changes, 1970-2120."""
    zone = ZoneInfo(zone_name)

    def offset(s: int) -> timedelta | None:
        return datetime.fromtimestamp(s, zone).utcoffset()

    out = []
    day = to_ms(datetime(1970, 1, 1, tzinfo=UTC)) // 1000
    end = to_ms(datetime(2120, 1, 1, tzinfo=UTC)) // 1000
    before = offset(day)
    while day < end:
        lo, hi = day, day + 86_400
        after = offset(hi)
        if after != before:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if offset(mid) == before else (lo, mid)
            out.append(hi)
            before = after
        day += 86_400
    return tuple(out)


def instants(zone_name: str) -> st.SearchStrategy[int]:
    """Milliseconds since the epoch, half of them within three hours of a DST change."""
    anywhere = st.integers(to_ms(FIRST), to_ms(LAST))
    changes = transitions(zone_name)
    if not changes:
        return anywhere
    hours = 3 * 3_600_000
    near = st.builds(
        lambda s, d: s * 1000 + d, st.sampled_from(changes), st.integers(-hours, hours)
    )
    return st.one_of(near, anywhere)


def aware_datetimes() -> st.SearchStrategy[datetime]:
    """Aware datetimes in awkward zones, many inside or next to a gap or an overlap."""
    zones = st.sampled_from([*ZONES, "fixed"])

    def build(name: str, ms: int, wall_shift_s: int, fold: int) -> datetime:
        zone: tzinfo = ZoneInfo(name) if name != "fixed" else timezone(timedelta(hours=5.75))
        # A wall time near a change, read back in the zone: may be in a gap or an overlap.
        wall = from_ms(ms).astimezone(zone).replace(tzinfo=None)
        return (wall + timedelta(seconds=wall_shift_s)).replace(tzinfo=zone, fold=fold)

    near_changes = zones.flatmap(
        lambda name: st.builds(
            build,
            st.just(name),
            instants("UTC" if name == "fixed" else name),
            st.sampled_from([0, 1800, 3600, -1800, -3600]),
            st.sampled_from([0, 1]),
        )
    )
    plain = st.datetimes(
        min_value=datetime(1971, 1, 1),
        max_value=datetime(2099, 12, 31),
        timezones=st.sampled_from([ZoneInfo(z) for z in ZONES] + [UTC]),
        allow_imaginary=True,
    )
    return st.one_of(near_changes, plain)


# --- schedules of every kind --------------------------------------------------------------


def intervals() -> st.SearchStrategy[Schedule]:
    every = st.floats(min_value=0.001, max_value=1e9, allow_nan=False, allow_infinity=False)
    return st.one_of(
        st.builds(Interval, every, st.booleans()),
        st.timedeltas(timedelta(milliseconds=1), timedelta(days=3650)).map(as_schedule),
        st.builds(
            lambda s, rel: as_schedule(schedule(timedelta(seconds=s), relative=rel)),
            st.integers(1, 10**7),
            st.booleans(),
        ),
    )


DOW_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun"]
MONTH_NAMES += ["jul", "aug", "sep", "oct", "nov", "dec"]


def _cased(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from([name, name.upper(), name.capitalize()])


def celery_fields(lo: int, hi: int, names: list[str]) -> st.SearchStrategy[Any]:
    """One crontab field in Celery's syntax: text, an int or a set of ints."""
    number = st.integers(lo, hi)
    atoms: list[st.SearchStrategy[str]] = [
        st.just("*"),
        number.map(str),
        st.builds("{}-{}".format, number, number),
        st.builds("*/{}".format, st.integers(1, hi - lo + 1)),
        st.builds("{}-{}/{}".format, number, number, st.integers(1, hi - lo + 1)),
    ]
    if names:
        atoms.append(st.sampled_from(names).flatmap(_cased))
    atom = st.one_of(atoms)
    return st.one_of(
        atom,
        st.lists(atom, min_size=1, max_size=3).map(",".join),
        number,
        st.sets(number, min_size=1, max_size=4),
    )


CELERY_RANGES = {
    "minute": (0, 59, []),
    "hour": (0, 23, []),
    "day_of_week": (0, 6, DOW_NAMES),
    "day_of_month": (1, 31, []),
    "month_of_year": (1, 12, []),
}


@st.composite
def crontabs(draw: st.DrawFn) -> Schedule:
    """A Celery crontab converted with as_schedule, in a zone or in none."""
    fields = {name: draw(celery_fields(*CELERY_RANGES[name])) for name in CRONTAB_FIELDS}
    try:
        celery = crontab(**fields)
    except ValueError:
        reject()  # Celery's own parser says no (a range like 50-10 on hours, ...)
    try:
        sched = as_schedule(celery)
    except InvalidSchedule:
        reject()  # a day that never comes, such as 31 February
    assert isinstance(sched, Crontab)
    tz = draw(st.none() | st.sampled_from(ZONES))
    return dataclasses.replace(sched, tz=tz, **draw(dst_policies()))


def dst_policies() -> st.SearchStrategy[dict[str, str | None]]:
    """A wall-clock schedule's DST policies, each often left to the deployment (None)."""
    return st.fixed_dictionaries(
        {
            "dst_gap": st.none() | st.sampled_from(DST_GAP_POLICIES),
            "dst_fold": st.none() | st.sampled_from(DST_FOLD_POLICIES),
        }
    )


# Cron fields in croniter's order with seconds first: name, low, high, names.
CRON_FIELDS = [
    ("second", 0, 59, []),
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day_of_month", 1, 31, []),
    ("month", 1, 12, MONTH_NAMES),
    ("day_of_week", 0, 6, DOW_NAMES),
]


def cron_atoms(
    field: str, lo: int, hi: int, names: list[str], wild: bool
) -> st.SearchStrategy[str]:
    """One comma-separated part of a cron field; ``wild`` adds out-of-range and odd forms."""
    number = st.integers(lo - 3, hi + 3) if wild else st.integers(lo, hi)
    step = st.integers(0, hi + 2) if wild else st.integers(1, hi - lo + 1)
    atoms: list[st.SearchStrategy[str]] = [
        st.just("*"),
        number.map(str),
        st.builds("{}-{}".format, number, number),
        st.builds("*/{}".format, step),
        st.builds("{}/{}".format, number, step),
        st.builds("{}-{}/{}".format, number, number, step),
    ]
    if names:
        name = st.sampled_from(names).flatmap(_cased)
        atoms += [name, st.builds("{}-{}".format, name, name)]
    if field == "day_of_month":
        atoms += [st.sampled_from(["L", "l", "?"]), st.builds("{}W".format, number)]
    if field == "day_of_week":
        nth = st.integers(0, 7) if wild else st.integers(1, 5)
        day = number.map(str) | st.sampled_from(names).flatmap(_cased)
        atoms += [st.builds("{}#{}".format, day, nth), st.builds("L{}".format, number)]
        atoms += [st.just("?")]
    if wild:
        atoms += [st.sampled_from(["", "-", "/", "*/", "1-", "-1", "L", "W", "#", "H", "R"])]
    return st.one_of(atoms)


def cron_fields(wild: bool) -> st.SearchStrategy[str]:
    """A cron string built field by field: 5 fields, or 6 with seconds first."""

    def field(spec: tuple[str, int, int, list[str]]) -> st.SearchStrategy[str]:
        atom = cron_atoms(*spec, wild=wild)
        return st.lists(atom, min_size=1, max_size=3).map(",".join)

    five = st.tuples(*(field(spec) for spec in CRON_FIELDS[1:]))
    six = st.tuples(*(field(spec) for spec in CRON_FIELDS))
    separator = st.sampled_from([" ", "  ", "\t"]) if wild else st.just(" ")
    return st.builds(lambda parts, sep: sep.join(parts), five | six, separator)


ALIASES = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]


@st.composite
def crons(draw: st.DrawFn) -> Schedule:
    """A valid cron string with a zone (or none), often with the seconds field."""
    expr = draw(cron_fields(wild=False) | st.sampled_from(ALIASES))
    tz = draw(st.none() | st.sampled_from(ZONES))
    try:
        return Cron(expr, tz=tz, **draw(dst_policies()))
    except InvalidSchedule:
        reject()  # "?" where it is not allowed, a day that never comes, ...


def clockeds() -> st.SearchStrategy[Schedule]:
    return aware_datetimes().map(as_schedule)


def solars() -> st.SearchStrategy[Schedule]:
    event = st.sampled_from(sorted(SOLAR_EVENTS))
    # Now and then at a pole or next to it, where events come once a year.
    polar = st.sampled_from([90.0, -90.0, 89.9, -89.95, 89.85, -89.8])
    lat = st.one_of(st.floats(min_value=-90, max_value=90), st.floats(-66, 66), polar)
    lon = st.floats(min_value=-180, max_value=180)
    return st.one_of(
        st.builds(Solar, event, lat, lon),
        st.builds(lambda e, la, lo: as_schedule(solar(e, la, lo)), event, lat, lon),
    )


SCHEDULES: dict[str, Callable[[], st.SearchStrategy[Schedule]]] = {
    "interval": intervals,
    "crontab": crontabs,
    "cron": crons,
    "clocked": clockeds,
    "solar": solars,
}


# --- entries ------------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
PRINTABLE = st.characters(exclude_categories=("C", "Z")) | st.just(" ")
NAMES = st.text(PRINTABLE, min_size=1, max_size=60).filter(lambda s: bool(s.strip()))


@st.composite
def entries(draw: st.DrawFn, schedules: st.SearchStrategy[Schedule]) -> Entry:
    start, end = draw(st.none() | aware_datetimes()), draw(st.none() | aware_datetimes())
    if start is not None and end is not None and end < start:
        start, end = end, start
    grace = st.none() | st.floats(0, 1e6) | st.integers(0, 10**6)
    return Entry(
        name=draw(NAMES),
        task=draw(st.from_regex(r"[a-z_]{1,12}(\.[a-z_]{1,12}){0,3}", fullmatch=True)),
        schedule=draw(schedules),
        args=draw(st.lists(JSON_VALUES, max_size=3)),
        kwargs=draw(st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=3)),
        options=draw(
            st.dictionaries(st.text(max_size=10).filter(lambda k: k != "task_id"), JSON_VALUES)
        ),
        enabled=draw(st.booleans()),
        start_at=start,
        end_at=end,
        one_off=draw(st.booleans()),
        catch_up=draw(st.sampled_from(["once", "skip", "all"])),
        grace=draw(grace),
        source=draw(
            st.sampled_from(["api", "config", "django"]) | st.text(min_size=1, max_size=64)
        ),
        description=draw(st.text(max_size=40)),
    )


# --- next runs, with the library's own functions ------------------------------------------


def runs_of(sched: Schedule) -> int:
    """How many runs to compute: fewer for solar events, a search each (a year's at a pole)."""
    return 3 if isinstance(sched, Solar) else RUNS


def schedule_runs(sched: Schedule, after_ms: int, tz: str, anchor_ms: int | None) -> list[int]:
    """The next RUNS occurrences after ``after_ms`` (fewer when the schedule ends)."""
    out: list[int] = []
    due = after_ms
    while len(out) < runs_of(sched):
        with bounded(f"the next run of {sched!r} after {due}"):
            nxt = next_due_ms(sched, due, anchor_ms=anchor_ms, tz=tz)
        if nxt is None:
            break
        assert nxt > due, (sched, due, nxt)
        from_ms(nxt)  # representable as a datetime
        out.append(nxt)
        due = nxt
    return out


def entry_runs(entry: Entry, now_ms: int, tz: str) -> list[int]:
    """When a beat would send the entry written at ``now_ms``: first due, then each next."""
    out: list[int] = []
    with bounded(f"the first run of {entry!r} written at {now_ms}"):
        due = entry.first_due_ms(now_ms, tz)
    while due is not None and len(out) < runs_of(entry.schedule):
        assert not out or due > out[-1], (entry, out, due)
        from_ms(due)
        out.append(due)
        with bounded(f"the run of {entry!r} after {due}"):
            due = entry.next_due_ms(due, due, tz)
    return out


EPHEM: Any = ephem  # untyped


def celery_solar(sched: Solar) -> Any:
    """Celery's own solar schedule for the same event and place."""
    event: Any = sched.event
    return solar(event, sched.lat, sched.lon)


def solar_height(sched: Solar, ms: int) -> float:
    """Degrees the sun (its upper limb, or centre) stands above the event's horizon."""
    proto = celery_solar(sched)
    observer = proto.cal.copy()
    observer.date = datetime(1970, 1, 1) + timedelta(milliseconds=ms)
    sun = EPHEM.Sun()
    sun.compute(observer)
    limb = 0.0 if proto.use_center else sun.radius
    return math.degrees(sun.alt + limb - observer.horizon)


def check_solar_runs(sched: Solar, runs: list[int]) -> None:
    """A rising or setting run is the sun crossing the event's horizon, the right way."""
    proto = celery_solar(sched)
    if proto.method not in ("next_rising", "next_setting"):
        return
    ten_minutes = 600_000
    for run in runs:
        assert abs(solar_height(sched, run)) < 0.02, (sched, from_ms(run))
        rise = solar_height(sched, run + ten_minutes) - solar_height(sched, run - ten_minutes)
        assert (rise > 0) == (proto.method == "next_rising"), (sched, from_ms(run), rise)


def wall_to_ms(wall: datetime, zone_name: str, sched: Crontab | Cron) -> list[int] | None:
    """The instants a naive wall time fires at by the documented DST rules and the
    schedule's policies (None: unknown)."""
    zone = ZoneInfo(zone_name)
    first, second = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
    first_offset, second_offset = first.utcoffset(), second.utcoffset()
    assert first_offset is not None and second_offset is not None
    if first_offset == second_offset:  # an ordinary wall time
        return [to_ms(first)]
    if first_offset > second_offset:  # repeated: the first pass, and the second if "twice"
        return [to_ms(first), to_ms(second)] if sched.dst_fold == "twice" else [to_ms(first)]
    if sched.dst_gap == "skip":
        return []
    # Skipped by a gap: fires at the transition, between the two readings of the wall time.
    lo, hi = to_ms(second), to_ms(first)
    at = next((s * 1000 for s in transitions(zone_name) if lo < s * 1000 <= hi), None)
    return None if at is None else [at]


def wall_clock_oracle(sched: Crontab | Cron, after_ms: int, zone_name: str) -> list[int]:
    """The next runs by brute force: every wall time from well before, placed by the rules."""
    spec = cron_spec(sched)
    zone = ZoneInfo(zone_name)
    # A wall time's first instant never decreases as the wall time grows, and no zone
    # repeats more than three hours: the wall clock three hours before ``after`` is early
    # enough for every run after it, second passes included.
    start = (from_ms(after_ms) - timedelta(hours=3)).astimezone(zone).replace(tzinfo=None)
    walls = croniter(spec.expr, start, day_or=spec.day_or, second_at_beginning=spec.seconds_first)
    out: set[int] = set()
    with bounded(f"the oracle for {sched!r}"):
        while True:
            try:
                at = wall_to_ms(walls.get_next(datetime), zone_name, sched)
            except CroniterBadDateError:
                break
            if at is None:  # past the transitions table
                break
            if at and len(out) >= RUNS and at[0] > sorted(out)[RUNS - 1]:
                break
            out.update(ms for ms in at if ms > after_ms)
    return sorted(out)[:RUNS]


def zone_of(sched: Schedule, default: str) -> str:
    return (sched.tz or default) if isinstance(sched, (Crontab, Cron)) else default


# --- the properties -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    yield client
    client.close()


@pytest.mark.parametrize("kind", sorted(SCHEDULES))
@settings(
    max_examples=budget(25), deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
@given(data=st.data())
def test_an_entry_stored_in_redis_loads_back_equal_with_the_same_next_runs(
    shared_client: redis.Redis, kind: str, data: st.DataObject
) -> None:
    tz = data.draw(st.sampled_from(ZONES), label="store timezone")
    entry = data.draw(entries(SCHEDULES[kind]()), label="entry")
    store = ScheduleStore(shared_client, prefix=f"prop-{uuid.uuid4().hex[:10]}", timezone=tz)
    expected = entry.with_default_tz(tz)
    if data.draw(st.booleans(), label="upsert_many"):
        assert store.upsert_many([entry]) == 1
    else:
        assert store.upsert(entry) is True
    back = store.get(entry.name)
    assert back == expected
    assert back.dumps() == expected.dumps()
    assert Entry.loads(entry.dumps(), entry.name) == entry
    assert store.upsert(back) is False  # what was loaded is what is stored
    after = data.draw(instants(zone_of(expected.schedule, tz)), label="after")
    anchor = data.draw(st.none() | instants("UTC"), label="anchor")
    runs = schedule_runs(entry.schedule, after, tz, anchor)
    assert schedule_runs(back.schedule, after, tz, anchor) == runs
    assert entry_runs(back, after, tz) == entry_runs(entry, after, tz)
    if isinstance(back.schedule, (Interval, Crontab, Cron)):
        assert len(runs) == RUNS  # periodic kinds never run out within the bound
    elif isinstance(back.schedule, Clocked):
        assert len(runs) <= 1
    elif isinstance(back.schedule, Solar):
        assert runs, "every solar event happens at least once a year, even at the poles"
    shared_client.delete(*[k for k in shared_client.scan_iter(f"{{{store.keys.prefix}}}:*")])


@pytest.mark.parametrize("kind", sorted(SCHEDULES))
@settings(
    max_examples=budget(40), deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
@given(data=st.data())
def test_a_schedule_keeps_its_next_runs_through_its_json_form(
    kind: str, data: st.DataObject
) -> None:
    sched = data.draw(SCHEDULES[kind](), label="schedule")
    tz = data.draw(st.sampled_from(ZONES), label="default zone")
    back = from_json(json.loads(json.dumps(to_json(sched), allow_nan=False)))
    assert back == sched
    assert to_json(back) == to_json(sched)
    after = data.draw(instants(zone_of(sched, tz)), label="after")
    runs = schedule_runs(sched, after, tz, None)
    assert schedule_runs(back, after, tz, None) == runs
    if isinstance(sched, (Crontab, Cron)):
        zone_name = zone_of(sched, tz)
        expected = wall_clock_oracle(sched, after, zone_name)
        assert expected and runs[: len(expected)] == expected
    if isinstance(sched, Solar):
        check_solar_runs(sched, runs)
    if isinstance(sched, Crontab):  # Celery's own reading of the fields, at the wall
        ct: Any = crontab(*(getattr(sched, name) for name in CRONTAB_FIELDS))
        changes = set(transitions(zone_name))
        for run in runs:
            wall = from_ms(run).astimezone(ZoneInfo(zone_name))
            assert run // 1000 in changes or (
                (wall.second, wall.microsecond) == (0, 0)
                and wall.minute in ct.minute
                and wall.hour in ct.hour
                and wall.isoweekday() % 7 in ct.day_of_week
                and wall.day in ct.day_of_month
                and wall.month in ct.month_of_year
            ), (sched, wall)


def _fires_or_names_the_field(
    build: Callable[[], Schedule], fields: set[str], after_ms: int, tz: str
) -> None:
    """``build()`` gives a schedule with 3 next runs, or InvalidSchedule on one of ``fields``."""
    try:
        with bounded("building the schedule"):
            sched = build()
    except InvalidSchedule as exc:
        assert exc.field in fields, exc
        assert str(exc).startswith(f"{exc.field}: ")
        return
    runs = schedule_runs(sched, after_ms, tz, None)
    assert len(runs) == RUNS, f"{sched!r} accepted but does not fire after {from_ms(after_ms)}"


CRON_TOKENS = st.sampled_from([*"0123456789*/-,?#LWHR@ \t", "MON", "jan", "Fri", "@daily"])
CRON_TEXT = st.lists(CRON_TOKENS, max_size=20).map("".join)


@settings(max_examples=budget(300), deadline=None)
@given(
    expr=CRON_TEXT | st.text(max_size=30),
    tz=st.sampled_from(ZONES),
    data=st.data(),
)
def test_any_cron_text_either_fires_or_is_rejected_naming_the_expression(
    expr: str, tz: str, data: st.DataObject
) -> None:
    after = data.draw(instants(tz), label="after")
    _fires_or_names_the_field(lambda: Cron(expr, tz=tz), {"schedule.expr"}, after, tz)


@settings(max_examples=budget(300), deadline=None)
@given(
    expr=cron_fields(wild=True) | cron_fields(wild=False), tz=st.sampled_from(ZONES), data=st.data()
)
def test_structured_cron_fields_either_fire_or_are_rejected_naming_the_expression(
    expr: str, tz: str, data: st.DataObject
) -> None:
    after = data.draw(instants(tz), label="after")
    _fires_or_names_the_field(lambda: Cron(expr, tz=tz), {"schedule.expr"}, after, tz)


def test_impossible_dates_are_rejected_and_rare_ones_accepted_in_both_cron_forms() -> None:
    after = to_ms(datetime(2026, 1, 1, tzinfo=UTC))
    for expr in ["0 0 30 2 *", "0 0 0 30 2 *", "* * * 31 4 *", "0 0 31 2,4,6,9,11 *"]:
        with pytest.raises(InvalidSchedule, match="never fires"):
            Cron(expr)
    for expr in ["0 0 29 2 *", "0 0 0 29 2 *", "0 0 L 2 *", "0 0 * 2 1#5", "0 0 * 2 L1"]:
        assert len(schedule_runs(Cron(expr), after, "UTC", None)) == RUNS


CRONTAB_TEXT = st.text(st.sampled_from("0123456789*/-,monfrisatuejd "), max_size=12)


@settings(max_examples=budget(200), deadline=None)
@given(
    values=st.fixed_dictionaries(
        {name: st.just("*") | CRONTAB_TEXT | st.text(max_size=8) for name in CRONTAB_FIELDS}
    ),
    tz=st.sampled_from(ZONES),
    data=st.data(),
)
def test_any_crontab_fields_either_fire_or_are_rejected_naming_a_field(
    values: dict[str, str], tz: str, data: st.DataObject
) -> None:
    after = data.draw(instants(tz), label="after")
    restricted = {f"schedule.{name}" for name, value in values.items() if value != "*"}
    # The days and months together can also never meet: that is day_of_month's fault.
    fields = restricted | {"schedule.day_of_month"}
    minute, hour, dow, dom, moy = (values[name] for name in CRONTAB_FIELDS)
    _fires_or_names_the_field(lambda: Crontab(minute, hour, dow, dom, moy, tz), fields, after, tz)


# --- what the properties found, kept as plain examples ------------------------------------

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    "wall",
    [
        datetime(2026, 10, 25, 2, 30),  # the first 02:30 of a repeated hour
        datetime(2026, 10, 25, 2, 30, fold=1),  # the second one
        datetime(2026, 3, 29, 2, 30),  # skipped by the gap
    ],
    ids=["first-pass", "second-pass", "gap"],
)
def test_an_entry_at_a_repeated_or_skipped_wall_time_loads_back_equal_and_keeps_its_timing(
    store: ScheduleStore, wall: datetime
) -> None:
    at = wall.replace(tzinfo=BERLIN)
    entry = Entry("dst", "proj.ping", Clocked(at), start_at=at, end_at=at + timedelta(days=1))
    store.upsert(entry)
    assert store.get("dst") == entry
    assert to_ms(store.get("dst").schedule.at) == to_ms(at)  # type: ignore[union-attr]
    # The one-off has fired and left the schedule (for good: the finish of its send says so
    # in the spent index); a later edit of its description used to count as a timing change
    # (the loaded datetimes differed) and made it fire again.
    store.client.zrem(store.keys.schedule, "dst")
    store.client.zadd(store.keys.spent, {"dst": store.now_ms()})
    assert store.upsert(dataclasses.replace(entry, description="edited")) is True
    assert store.client.zscore(store.keys.schedule, "dst") is None


@pytest.mark.parametrize(
    "expr", ["R * * * *", "0 r * * *", "R(0-29)/5 * * * * *", "0 0 * * R/2", "0 0 R * *"]
)
def test_a_random_cron_field_is_rejected_as_each_beat_would_draw_its_own(expr: str) -> None:
    with pytest.raises(InvalidSchedule, match="random") as caught:
        Cron(expr)
    assert caught.value.field == "schedule.expr"


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Interval(1.7e308), "schedule.every"),  # its milliseconds overflowed a float
        (lambda: Interval(MAX_INTERVAL * 2), "schedule.every"),
        (lambda: Solar("sunrise", 10**400, 0), "schedule.lat"),  # OverflowError, not this
        (
            lambda: Clocked(datetime(9999, 12, 31, 23, tzinfo=ZoneInfo("America/New_York"))),
            "schedule.at",
        ),
        (lambda: Clocked(datetime(1, 1, 1, tzinfo=ZoneInfo("Asia/Kathmandu"))), "schedule.at"),
    ],
)
def test_schedules_beyond_what_a_datetime_can_hold_are_rejected(
    build: Callable[[], object], field: str
) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        build()
    assert caught.value.field == field


def test_nothing_is_due_past_the_last_year_a_datetime_can_hold() -> None:
    late = to_ms(datetime(9999, 12, 31, 23, 59, tzinfo=UTC))
    kinds: list[Schedule] = [Cron("0 0 1 1 *"), Crontab("0"), Solar("sunrise", 10, 10)]
    for sched in [*kinds, Interval(3600)]:
        assert next_due_ms(sched, late, anchor_ms=0) is None
    assert next_due(Cron("* * * * * *", tz="Pacific/Kiritimati"), from_ms(late)) is None
    assert next_due_ms(Interval(30), late, anchor_ms=0) == late + 30_000  # still 9999
    assert next_due_ms(Interval(60), late, anchor_ms=0) is None  # 10000-01-01
