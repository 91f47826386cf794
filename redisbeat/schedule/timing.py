"""Next-occurrence arithmetic for every schedule kind: pure functions, no I/O.

``next_due_ms`` works on integer milliseconds since the Unix epoch and is what the
scheduler calls on its hot path; ``next_due`` is the datetime face of the same computation.

Crontab and Cron name wall-clock times, enumerated naively with croniter and then placed
on the time line by the schedule's DST policies. A wall time skipped by a spring-forward gap
fires at the transition (the first instant after the gap; ``dst_gap="shift"``, the default)
or not at all (``"skip"``); a wall time repeated by a fall-back overlap fires at its first
pass only (``dst_fold="once"``, the default) or at both (``"twice"``). A wall time's first
instant never decreases as the wall time grows, so one forward scan finds the first
occurrence strictly after a given instant; with ``"twice"`` it starts a little earlier,
since a wall time behind the clock may still have its second pass ahead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache, partial
from typing import Any, cast
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from .clock import MAX_MS, from_ms, to_ms, valid_ms
from .kinds import (
    Clocked,
    Cron,
    Crontab,
    Interval,
    Schedule,
    Solar,
    as_schedule,
    cron_spec,
    get_zone,
)
from .solar import next_solar

__all__ = ["MAX_MS", "from_ms", "last_due_ms", "next_due", "next_due_ms", "to_ms", "valid_ms"]

_EPOCH_NAIVE = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
# last_due_ms steps this many occurrences forward before it bisects.
_STEPS = 4
# How many years of wall times a scan reads, at most, when every one is skipped by a gap.
_SEARCH_YEARS = 50
# The last millisecond a datetime holds (9999-12-31 23:59:59.999 UTC): a later due time
# counts as none, so every due time converts back to a datetime.
_MAX_MS = to_ms(datetime.max.replace(tzinfo=timezone.utc))
# From here on croniter's or ephem's search may step past year 9999 and fail.
_LATE_MS = to_ms(datetime(9900, 1, 1, tzinfo=timezone.utc))


def next_due_ms(
    schedule: Schedule, after_ms: int, *, anchor_ms: int | None = None, tz: str = "UTC"
) -> int | None:
    """The first occurrence strictly after ``after_ms``, or None if there is none.

    ``anchor_ms`` places an Interval's grid (ignored when relative, which uses the epoch);
    ``tz`` is the zone for a Crontab/Cron whose own ``tz`` is None.
    """
    if isinstance(schedule, Interval):
        return _within_calendar(partial(_next_interval, schedule, after_ms, anchor_ms), after_ms)
    if isinstance(schedule, (Crontab, Cron)):
        zone = get_zone(schedule.tz or tz)
        return _within_calendar(partial(_next_wall_clock, schedule, after_ms, zone), after_ms)
    return _within_calendar(partial(_next_other, schedule, after_ms), after_ms)


def last_due_ms(
    schedule: Schedule,
    due_ms: int,
    until_ms: int,
    *,
    anchor_ms: int | None = None,
    tz: str = "UTC",
) -> int:
    """The last occurrence at or before ``until_ms``, counting from the one due at ``due_ms``
    (``due_ms`` itself when the next one is later): what a late send stands for."""

    def after(ms: int) -> int | None:
        return next_due_ms(schedule, ms, anchor_ms=anchor_ms, tz=tz)

    if isinstance(schedule, Interval) and (schedule.relative or anchor_ms is not None):
        grid = 0 if schedule.relative else cast(int, anchor_ms)
        every_ms = round(schedule.every * 1000)
        return max(due_ms, grid + (until_ms - grid) // every_ms * every_ms)
    last = due_ms
    # A few steps cover a claim late by a period or two; a longer outage is bisected: the
    # answer is after(x) for the largest x whose next occurrence is not later than until_ms.
    for _ in range(_STEPS):
        step = after(last)
        if step is None or step > until_ms:
            return last
        last = step
    lo, hi = last, until_ms
    while hi - lo > 1:
        mid = (lo + hi) // 2
        step = after(mid)
        if step is not None and step <= until_ms:
            lo = mid
        else:
            hi = mid
    found = after(lo)
    return found if found is not None and found <= until_ms else last


def next_due(
    schedule: object, after: datetime, *, anchor: datetime | None = None
) -> datetime | None:
    """The first occurrence strictly after ``after`` as an aware UTC datetime, or None.

    ``schedule`` is anything ``as_schedule`` accepts. Works at millisecond precision. A
    Crontab/Cron without its own zone runs in the zone of ``after``, which must then be a
    ``ZoneInfo`` or a fixed-offset ``datetime.timezone`` (a fixed offset has no DST).
    """
    if after.utcoffset() is None:
        raise ValueError(f"next_due needs a timezone-aware 'after', got naive {after}")
    sched = as_schedule(schedule)
    after_ms = to_ms(after)
    anchor_ms = None if anchor is None else to_ms(anchor)
    if isinstance(sched, (Crontab, Cron)):
        zone = get_zone(sched.tz) if sched.tz else _zone_of(after)
        due = _within_calendar(partial(_next_wall_clock, sched, after_ms, zone), after_ms)
    else:
        due = next_due_ms(sched, after_ms, anchor_ms=anchor_ms)
    return None if due is None else from_ms(due)


def _within_calendar(find: Callable[[], int | None], after_ms: int) -> int | None:
    """``find()``, or None when the occurrence is past year 9999, where datetime ends."""
    try:
        due = find()
    except (OverflowError, ValueError):
        if after_ms < _LATE_MS:
            raise
        return None  # croniter or ephem stepped past the last year
    return None if due is None or due > _MAX_MS else due


def _zone_of(after: datetime) -> tzinfo:
    zone = after.tzinfo
    if isinstance(zone, (ZoneInfo, timezone)):
        return zone
    raise ValueError(
        f"cannot run a crontab in the zone of 'after' ({zone!r}): use a zoneinfo.ZoneInfo "
        "or datetime.timezone for 'after', or give the schedule a tz"
    )


def _next_interval(schedule: Interval, after_ms: int, anchor_ms: int | None) -> int:
    every_ms = round(schedule.every * 1000)
    if schedule.relative:
        anchor_ms = 0
    if anchor_ms is None:
        return after_ms + every_ms
    # Floor division keeps the grid exact for anchors on either side of after_ms.
    return anchor_ms + ((after_ms - anchor_ms) // every_ms + 1) * every_ms


def _next_other(schedule: Schedule, after_ms: int) -> int | None:
    if isinstance(schedule, Clocked):
        at_ms = to_ms(schedule.at)
        return at_ms if at_ms > after_ms else None
    if isinstance(schedule, Solar):
        return next_solar(schedule, after_ms)
    raise TypeError(f"not a schedule: {schedule!r}")


def _offset_s(dt: datetime) -> int:
    offset = dt.utcoffset()
    return 0 if offset is None else offset // _SECOND


def _offset_at(zone: tzinfo, instant_s: int) -> int:
    return _offset_s(datetime.fromtimestamp(instant_s, zone))


def _first_change(zone: tzinfo, lo_s: int, hi_s: int) -> int:
    """The first second in (lo_s, hi_s] whose UTC offset differs from lo_s's."""
    before = _offset_at(zone, lo_s)
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if _offset_at(zone, mid) == before:
            lo_s = mid
        else:
            hi_s = mid
    return hi_s


def _instants(wall: datetime, zone: tzinfo, skip_gap: bool, twice: bool) -> tuple[int, ...]:
    """The instants (epoch seconds, ascending) at which naive wall time ``wall`` fires in
    ``zone`` under the DST policies."""
    wall_s = (wall - _EPOCH_NAIVE) // _SECOND
    first = _offset_s(wall.replace(tzinfo=zone, fold=0))
    second = _offset_s(wall.replace(tzinfo=zone, fold=1))
    if first == second:
        return (wall_s - first,)
    if first > second:  # repeated: fold=0 is the first pass
        return (wall_s - first, wall_s - second) if twice else (wall_s - first,)
    if skip_gap:
        return ()
    # Skipped by a gap: fold=1 reads it with the later offset (an instant before the
    # transition), fold=0 with the earlier one (after it); the transition lies between.
    return (_first_change(zone, wall_s - second, wall_s - first),)


def _scan_start(after_s: int, zone: tzinfo) -> datetime:
    """The naive wall time to scan forward from for occurrences after ``after_s``."""
    local = datetime.fromtimestamp(after_s, zone)
    earlier = _offset_s(local.replace(fold=0))
    delta = earlier - _offset_s(local)
    if local.fold == 1 and delta > 0:
        # In the second pass of a repeated hour every wall time up to the hour's end maps
        # to its first pass, already gone; jump past it rather than skip each candidate.
        transition = _first_change(zone, after_s - delta, after_s)
        return _EPOCH_NAIVE + timedelta(seconds=transition + earlier - 1)
    return local.replace(tzinfo=None)


class _Croniter(croniter):  # type: ignore[misc]
    """croniter that parses each expression once: parsing is most of the cost of a call."""

    @classmethod
    def _expand(cls, expr_format: str, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs.get("hash_id") or kwargs.get("from_timestamp") is not None:
            return super()._expand(expr_format, *args, **kwargs)
        seconds_first = bool(kwargs.get("second_at_beginning"))
        expanded, nth, expressions, nearest = _parsed(expr_format, seconds_first)
        return (
            [list(f) for f in expanded],
            {k: set(v) for k, v in nth.items()},
            list(expressions),
            set(nearest),
        )


@lru_cache(maxsize=1024)
def _parsed(expr: str, seconds_first: bool) -> Any:
    return croniter._expand(expr, second_at_beginning=seconds_first)


def _next_wall_clock(schedule: Crontab | Cron, after_ms: int, zone: tzinfo) -> int | None:
    spec = cron_spec(schedule)
    skip_gap, twice = schedule.dst_gap == "skip", schedule.dst_fold == "twice"
    after_s = after_ms // 1000
    start = _both_passes_start(after_s, zone) if twice else _scan_start(after_s, zone)
    walls = _Croniter(spec.expr, start, day_or=spec.day_or, second_at_beginning=spec.seconds_first)
    best: int | None = None
    try:
        while True:
            wall = walls.get_next(datetime)
            if wall.year > start.year + _SEARCH_YEARS:  # every one skipped as in a gap
                return best
            instants = _instants(wall, zone, skip_gap, twice)
            if instants and best is not None and instants[0] * 1000 > best:
                return best  # later wall times fire later still
            # Earlier ones are first passes of a repeated hour (or second passes, once
            # passed): already gone.
            later = [s * 1000 for s in instants if s * 1000 > after_ms]
            if later:
                best = later[0] if best is None else min(best, later[0])
                if not twice:
                    return best
    except CroniterBadDateError:  # nothing within croniter's 50-year search window
        return best


def _both_passes_start(after_s: int, zone: tzinfo) -> datetime:
    """Where to scan from when repeated wall times fire twice: as far behind the wall clock
    as the next day's fall-back repeats, since those wall times' second passes lie ahead."""
    behind = max(0, _offset_at(zone, after_s) - _offset_at(zone, after_s + 86_400))
    local = datetime.fromtimestamp(after_s, zone).replace(tzinfo=None)
    return local - timedelta(seconds=behind)
