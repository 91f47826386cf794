"""The next solar event (sunrise, dusk, ...) after an instant, with ephem as Celery uses it.

Celery's own ``solar`` schedule gives the observer and the method; near the poles, where
ephem's rising and setting drift or go missing, the horizon crossing is searched directly.
"""

from __future__ import annotations

import importlib
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

from celery import schedules as celery_schedules

from .clock import to_ms
from .kinds import Solar

__all__ = ["next_solar"]

_EPOCH_NAIVE = datetime(1970, 1, 1)
# Like celery's solar: polar days and nights are shorter than a year.
_SOLAR_SEARCH_DAYS = 366
_HOUR_MS = 3_600_000
# Closer to a pole than this, ephem's rising and setting times drift off the horizon (and
# it misses some): the crossing is searched for directly instead.
_POLAR_LAT = 89.5
_CROSSINGS = ("next_rising", "next_setting")


#: What to do when ephem is missing, as the other optional parts say it.
EPHEM_HINT = "Solar schedules need the ephem package: pip install 'celery-redisbeat[solar]'"


def _ephem() -> Any:
    """ephem, an optional dependency (untyped); a missing one says how to install it."""
    try:
        return importlib.import_module("ephem")
    except ImportError:
        raise ModuleNotFoundError(EPHEM_HINT, name="ephem") from None


@lru_cache(maxsize=256)
def _celery_solar(schedule: Solar) -> Any:
    return celery_schedules.solar(schedule.event, schedule.lat, schedule.lon)  # type: ignore[arg-type]


def next_solar(schedule: Solar, after_ms: int) -> int | None:
    """The first occurrence of the event strictly after ``after_ms``, or None in a year."""
    ephem = _ephem()
    proto = _celery_solar(schedule)
    if abs(schedule.lat) >= _POLAR_LAT and proto.method in _CROSSINGS:
        return _next_crossing(ephem, proto, after_ms)
    observer = proto.cal.copy()  # observers are mutable: one per call, for threads
    observer.date = _EPOCH_NAIVE + timedelta(milliseconds=after_ms)
    kwargs = {"use_center": True} if proto.use_center else {}
    sun = ephem.Sun()
    start = observer.date
    for _ in range(_SOLAR_SEARCH_DAYS):
        try:
            event = getattr(observer, proto.method)(sun, start=start, **kwargs)
        except ephem.CircumpolarError:  # no such event that day: try the next one
            start = observer.next_antitransit(sun, start=start)
            continue
        due_ms = to_ms(event.datetime().replace(tzinfo=timezone.utc))
        if due_ms > after_ms:
            return due_ms
        start = ephem.Date(event + ephem.second)
    if proto.method in _CROSSINGS:
        # Where the sun crosses the horizon slowly, ephem's day-by-day search can miss it.
        return _next_crossing(ephem, proto, after_ms)
    return None


def _next_crossing(ephem: Any, proto: Any, after_ms: int) -> int | None:
    """The first instant after ``after_ms`` the sun crosses the event's horizon its way.

    Samples the sun's height hourly for a year, then bisects the first crossing to the
    millisecond: the upper limb (the centre when the event says so) against the horizon,
    as ephem's rising and setting use them. Near a pole that is once a year.
    """
    observer = proto.cal.copy()
    sun = ephem.Sun()
    rising = proto.method == "next_rising"

    def above(ms: int) -> bool:
        observer.date = _EPOCH_NAIVE + timedelta(milliseconds=ms)
        sun.compute(observer)
        limb = 0.0 if proto.use_center else sun.radius
        return bool(sun.alt + limb >= observer.horizon)

    lo, was_above = after_ms, above(after_ms)
    for _ in range(_SOLAR_SEARCH_DAYS * 24):
        hi = lo + _HOUR_MS
        is_above = above(hi)
        if is_above != was_above and is_above == rising:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if above(mid) == rising else (mid, hi)
            return hi
        lo, was_above = hi, is_above
    return None
