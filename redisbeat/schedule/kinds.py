"""The schedule kinds an entry can have and their validation.

Five frozen dataclasses say when an entry fires: ``Interval``, ``Crontab``, ``Cron``,
``Clocked`` and ``Solar``. Each validates itself on construction, so an invalid schedule
(bad field, unknown zone, a date that never comes) cannot exist. ``as_schedule`` converts
what Celery users already write; ``codec`` gives their JSON form, ``cron`` checks cron fields.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from celery import schedules as celery_schedules

from ..errors import InvalidSchedule
from .cron import CRONTAB_FIELDS, CronSpec, check_cron, crontab_expr

__all__ = [
    "CRONTAB_FIELDS",
    "DST_FOLD_POLICIES",
    "DST_GAP_POLICIES",
    "MAX_INTERVAL",
    "MIN_INTERVAL",
    "SOLAR_EVENTS",
    "Clocked",
    "Cron",
    "CronSpec",
    "Crontab",
    "Interval",
    "Schedule",
    "Solar",
    "as_schedule",
    "cron_spec",
    "fixed_offset",
    "get_zone",
    "with_default_tz",
    "with_defaults",
]

MIN_INTERVAL = 0.001  # one millisecond: the scheduler's clock resolution
MAX_INTERVAL = 100 * 365.25 * 86400  # a century: every due time stays a datetime
# The events celery.schedules.solar accepts (a test keeps the two in step).
SOLAR_EVENTS = frozenset(
    {"dawn_astronomical", "dawn_nautical", "dawn_civil", "sunrise", "solar_noon"}
    | {"sunset", "dusk_civil", "dusk_nautical", "dusk_astronomical"}
)
#: A wall time skipped by a spring-forward gap: fire at the transition, or not that day.
DST_GAP_POLICIES = ("shift", "skip")
#: A wall time repeated by a fall-back overlap: fire at its first pass, or at both.
DST_FOLD_POLICIES = ("once", "twice")


@lru_cache(maxsize=512)
def get_zone(name: str) -> ZoneInfo:
    """The ZoneInfo for an IANA name; ``InvalidSchedule("schedule.tz")`` if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ValueError/OSError: names like "" or "../x" that are not even a key.
        raise InvalidSchedule("schedule.tz", f"unknown time zone {name!r}") from None


def _check_tz(tz: object) -> None:
    if tz is None:
        return
    if not isinstance(tz, str):
        raise InvalidSchedule("schedule.tz", f"must be a zone name or None, got {tz!r}")
    get_zone(tz)


def _check_dst(gap: object, fold: object) -> None:
    if gap is not None and gap not in DST_GAP_POLICIES:
        raise InvalidSchedule("schedule.dst_gap", f"must be one of {DST_GAP_POLICIES}, got {gap!r}")
    if fold is not None and fold not in DST_FOLD_POLICIES:
        raise InvalidSchedule(
            "schedule.dst_fold", f"must be one of {DST_FOLD_POLICIES}, got {fold!r}"
        )


def _check_number(field: str, value: object) -> float:
    # bool is an int subclass, but True seconds or degrees is always a mistake.
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        try:
            number = float(value)  # OverflowError: an int beyond any float
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            return number
    raise InvalidSchedule(field, f"must be a finite number, got {value!r}")


def fixed_offset(at: datetime) -> datetime:
    """An aware ``at`` with its zone replaced by its UTC offset: the same instant.

    The JSON form keeps only the offset, and a datetime in a DST zone inside a repeated or
    skipped hour never equals one in another zone: without this an entry read back from
    Redis would differ from the one written. ``ValueError`` when the instant is outside
    what a UTC datetime can hold (near year 1 or 9999).
    """
    offset = at.utcoffset()
    if offset is None:
        raise ValueError(f"must be timezone-aware, got naive {at}")
    try:
        at.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError(f"is out of range in UTC: {at}") from None
    return at.replace(tzinfo=timezone(offset), fold=0)


@dataclass(frozen=True, slots=True)
class Interval:
    """Every ``every`` seconds; ``relative`` aligns occurrences to the epoch grid."""

    every: float
    relative: bool = False

    def __post_init__(self) -> None:
        every = _check_number("schedule.every", self.every)
        if not MIN_INTERVAL <= every <= MAX_INTERVAL:
            raise InvalidSchedule(
                "schedule.every",
                f"must be at least {MIN_INTERVAL} s and at most {MAX_INTERVAL:.0f} s "
                f"(a century), got {every}",
            )
        if not isinstance(self.relative, bool):
            raise InvalidSchedule("schedule.relative", f"must be a bool, got {self.relative!r}")
        object.__setattr__(self, "every", every)


@dataclass(frozen=True, slots=True)
class Crontab:
    """Celery crontab fields: day of week AND day of month must both match.

    ``dst_gap`` and ``dst_fold`` say what a wall time that a DST change skips or repeats
    does (None: the deployment's ``redisbeat_dst_gap`` / ``redisbeat_dst_fold``).
    """

    minute: str = "*"
    hour: str = "*"
    day_of_week: str = "*"
    day_of_month: str = "*"
    month_of_year: str = "*"
    tz: str | None = None
    dst_gap: str | None = None
    dst_fold: str | None = None

    def __post_init__(self) -> None:
        _check_tz(self.tz)
        _check_dst(self.dst_gap, self.dst_fold)
        for name in CRONTAB_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InvalidSchedule(f"schedule.{name}", f"must be a string, got {value!r}")
        crontab_expr(
            self.minute, self.hour, self.day_of_week, self.day_of_month, self.month_of_year
        )


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron string (5 fields, 6 with seconds first, or an @alias); dom OR dow.

    ``dst_gap`` and ``dst_fold`` as for :class:`Crontab`.
    """

    expr: str
    tz: str | None = None
    dst_gap: str | None = None
    dst_fold: str | None = None

    def __post_init__(self) -> None:
        _check_tz(self.tz)
        _check_dst(self.dst_gap, self.dst_fold)
        if not isinstance(self.expr, str):
            raise InvalidSchedule("schedule.expr", f"must be a string, got {self.expr!r}")
        check_cron(self.expr)


@dataclass(frozen=True, slots=True)
class Clocked:
    """Once, at an aware datetime."""

    at: datetime

    def __post_init__(self) -> None:
        if not isinstance(self.at, datetime):
            raise InvalidSchedule("schedule.at", f"must be a datetime, got {self.at!r}")
        try:
            object.__setattr__(self, "at", fixed_offset(self.at))
        except ValueError as exc:
            raise InvalidSchedule("schedule.at", str(exc)) from None


@dataclass(frozen=True, slots=True)
class Solar:
    """A solar event (sunrise, sunset, ...) seen from latitude/longitude in degrees."""

    event: str
    lat: float
    lon: float

    def __post_init__(self) -> None:
        if not isinstance(self.event, str) or self.event not in SOLAR_EVENTS:
            raise InvalidSchedule(
                "schedule.event",
                f"unknown solar event {self.event!r}; expected one of {sorted(SOLAR_EVENTS)}",
            )
        lat = _check_number("schedule.lat", self.lat)
        lon = _check_number("schedule.lon", self.lon)
        if not -90 <= lat <= 90:
            raise InvalidSchedule("schedule.lat", f"must be within -90..90, got {lat}")
        if not -180 <= lon <= 180:
            raise InvalidSchedule("schedule.lon", f"must be within -180..180, got {lon}")
        object.__setattr__(self, "lat", lat)
        object.__setattr__(self, "lon", lon)


Schedule: TypeAlias = Interval | Crontab | Cron | Clocked | Solar


def cron_spec(schedule: Crontab | Cron) -> CronSpec:
    """The croniter expression and flags that enumerate a Crontab's or Cron's wall times."""
    if isinstance(schedule, Cron):
        return CronSpec(schedule.expr, True, True)
    s = schedule
    expr = crontab_expr(s.minute, s.hour, s.day_of_week, s.day_of_month, s.month_of_year)
    return CronSpec(expr, False, False)  # day_or=False keeps Celery's AND of the days


def with_default_tz(schedule: Schedule, tz_name: str) -> Schedule:
    """A copy with ``tz`` set to ``tz_name`` if it is a Crontab/Cron without a zone."""
    return with_defaults(schedule, tz_name)


def with_defaults(
    schedule: Schedule, tz_name: str, dst_gap: str | None = None, dst_fold: str | None = None
) -> Schedule:
    """A Crontab/Cron with the zone (and the DST policies, where given) it leaves to the
    deployment filled in, so that what is stored says how it runs."""
    get_zone(tz_name)
    _check_dst(dst_gap, dst_fold)
    if not isinstance(schedule, (Crontab, Cron)):
        return schedule
    filled = dataclasses.replace(
        schedule,
        tz=schedule.tz or tz_name,
        dst_gap=schedule.dst_gap or dst_gap,
        dst_fold=schedule.dst_fold or dst_fold,
    )
    return schedule if filled == schedule else filled


def _cronspec_str(value: object) -> str:
    # celery's crontab keeps ints and iterables as given; ours are always strings.
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Iterable):
        return ",".join(str(v) for v in sorted(value))
    raise InvalidSchedule("schedule", f"unsupported crontab field {value!r}")


def as_schedule(value: object) -> Schedule:
    """Convert a schedule, Celery schedule, timedelta, seconds or aware datetime."""
    if isinstance(value, (Interval, Crontab, Cron, Clocked, Solar)):
        return value
    if isinstance(value, timedelta):
        return Interval(value.total_seconds())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Interval(float(value))
    if isinstance(value, datetime):
        return Clocked(value)
    if isinstance(value, celery_schedules.crontab):
        orig = [_cronspec_str(getattr(value, f"_orig_{name}")) for name in CRONTAB_FIELDS]
        return Crontab(*orig)
    if isinstance(value, celery_schedules.solar):
        return Solar(value.event, value.lat, value.lon)
    if isinstance(value, celery_schedules.schedule):
        run_every: timedelta = getattr(value, "run_every")  # noqa: B009 (not in the stubs)
        return Interval(run_every.total_seconds(), relative=bool(value.relative))
    raise InvalidSchedule(
        "schedule",
        f"unsupported schedule type {type(value).__name__}: give seconds, a timedelta, a "
        "datetime, celery.schedules.crontab, schedule or solar, or redisbeat's Interval, "
        "Crontab, Cron, Clocked or Solar",
    )
