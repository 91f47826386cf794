"""The schedule kinds an entry can have, their validation and their JSON form.

Five frozen dataclasses say when an entry fires: ``Interval``, ``Crontab``, ``Cron``,
``Clocked`` and ``Solar``. Each validates itself on construction, so an invalid schedule
(bad field, unknown zone, a date that never comes) cannot exist. ``as_schedule`` converts
what Celery users already write; ``to_json``/``from_json`` give the flat dict stored in Redis.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, NamedTuple, TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from celery import schedules as celery_schedules
from croniter import CroniterBadDateError, croniter

from ..errors import InvalidSchedule

__all__ = [
    "CRONTAB_FIELDS",
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
    "from_json",
    "get_zone",
    "to_json",
    "with_default_tz",
]

CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
MIN_INTERVAL = 0.001  # one millisecond: the scheduler's clock resolution
MAX_INTERVAL = 100 * 365.25 * 86400  # a century: every due time stays a datetime
# The events celery.schedules.solar accepts (a test keeps the two in step).
SOLAR_EVENTS = frozenset(
    {"dawn_astronomical", "dawn_nautical", "dawn_civil", "sunrise", "solar_noon"}
    | {"sunset", "dusk_civil", "dusk_nautical", "dusk_astronomical"}
)
# "Never fires" is a bounded search from a fixed date. Feb 29 on a given weekday recurs
# at most every 28 years between 1901 and 2099, so 30 years accepts every date that
# exists while an impossible one (Feb 31) is rejected in about a millisecond.
_NEVER_FIRES_FROM = datetime(2000, 1, 1)
_NEVER_FIRES_YEARS = 30
# croniter's "R" fields draw random values at every parse: each beat would differ.
_RANDOM_FIELD = re.compile(r"^r(\(\d+-\d+\))?(/\d+)?$", re.ASCII | re.IGNORECASE)


class CronSpec(NamedTuple):
    """How to drive croniter for a Crontab or Cron: expression and flags."""

    expr: str
    day_or: bool
    seconds_first: bool


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
    """Celery crontab fields: day of week AND day of month must both match."""

    minute: str = "*"
    hour: str = "*"
    day_of_week: str = "*"
    day_of_month: str = "*"
    month_of_year: str = "*"
    tz: str | None = None

    def __post_init__(self) -> None:
        _check_tz(self.tz)
        for name in CRONTAB_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InvalidSchedule(f"schedule.{name}", f"must be a string, got {value!r}")
        _crontab_expr(
            self.minute, self.hour, self.day_of_week, self.day_of_month, self.month_of_year
        )


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron string (5 fields, 6 with seconds first, or an @alias); dom OR dow."""

    expr: str
    tz: str | None = None

    def __post_init__(self) -> None:
        _check_tz(self.tz)
        if not isinstance(self.expr, str):
            raise InvalidSchedule("schedule.expr", f"must be a string, got {self.expr!r}")
        _check_cron(self.expr)


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


def _check_fires(spec: CronSpec, field: str, shown: str) -> None:
    try:
        croniter(
            spec.expr,
            _NEVER_FIRES_FROM,
            day_or=spec.day_or,
            second_at_beginning=spec.seconds_first,
            max_years_between_matches=_NEVER_FIRES_YEARS,
        ).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidSchedule(field, f"never fires: no date matches {shown}") from None


def _field_expr(values: set[int], size: int) -> str:
    return "*" if len(values) == size else ",".join(str(v) for v in sorted(values))


@lru_cache(maxsize=1024)
def _crontab_expr(minute: str, hour: str, dow: str, dom: str, moy: str) -> str:
    """Validate Crontab fields and return the equivalent 5-field croniter expression."""
    fields = dict(zip(CRONTAB_FIELDS, (minute, hour, dow, dom, moy), strict=True))
    for name, value in fields.items():
        # One field at a time, so the error can name the field that is wrong.
        try:
            celery_schedules.crontab(**{name: value})
        except (ValueError, TypeError, IndexError, celery_schedules.ParseException) as exc:
            raise InvalidSchedule(f"schedule.{name}", f"invalid field {value!r}: {exc}") from None
    shown = f"day_of_month={dom!r}, month_of_year={moy!r}, day_of_week={dow!r}"
    try:
        ct: Any = celery_schedules.crontab(**fields)
    except ValueError:  # every field is fine alone: the days and months never meet
        raise InvalidSchedule("schedule.day_of_month", f"never fires: {shown}") from None
    # In croniter's field order; Celery and croniter both count Sunday as day 0.
    sets = (ct.minute, ct.hour, ct.day_of_month, ct.month_of_year, ct.day_of_week)
    expr = " ".join(_field_expr(v, n) for v, n in zip(sets, (60, 24, 31, 12, 7), strict=True))
    _check_fires(CronSpec(expr, False, False), "schedule.day_of_month", shown)
    return expr


@lru_cache(maxsize=1024)
def _check_cron(expr: str) -> None:
    parts = expr.split()
    alias = len(parts) == 1 and parts[0].startswith("@")
    if not alias and len(parts) not in (5, 6):
        raise InvalidSchedule(
            "schedule.expr",
            f"expected 5 fields, 6 with seconds first, or an @alias; got {expr!r}",
        )
    if any(_RANDOM_FIELD.match(part) for part in parts):
        raise InvalidSchedule(
            "schedule.expr",
            f"random 'R' fields are not supported (each beat would draw its own): {expr!r}",
        )
    try:
        croniter(expr, _NEVER_FIRES_FROM, second_at_beginning=True)
    except (ValueError, TypeError, KeyError, IndexError) as exc:  # CroniterError is a ValueError
        raise InvalidSchedule("schedule.expr", f"invalid cron expression {expr!r}: {exc}") from None
    _check_fires(CronSpec(expr, True, True), "schedule.expr", repr(expr))


def cron_spec(schedule: Crontab | Cron) -> CronSpec:
    """The croniter expression and flags that enumerate a Crontab's or Cron's wall times."""
    if isinstance(schedule, Cron):
        return CronSpec(schedule.expr, True, True)
    s = schedule
    expr = _crontab_expr(s.minute, s.hour, s.day_of_week, s.day_of_month, s.month_of_year)
    return CronSpec(expr, False, False)  # day_or=False keeps Celery's AND of the days


def with_default_tz(schedule: Schedule, tz_name: str) -> Schedule:
    """A copy with ``tz`` set to ``tz_name`` if it is a Crontab/Cron without a zone."""
    get_zone(tz_name)
    if isinstance(schedule, (Crontab, Cron)) and schedule.tz is None:
        return dataclasses.replace(schedule, tz=tz_name)
    return schedule


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
    raise InvalidSchedule("schedule", f"unsupported schedule type {type(value).__name__}")


_KINDS = {cls: cls.__name__.lower() for cls in (Interval, Crontab, Cron, Clocked, Solar)}
_CLASSES = {kind: cls for cls, kind in _KINDS.items()}
_NUMBER = (int, float)
_ZONE = (str, type(None))
# The JSON types each kind's fields must have; every field is required.
_FIELD_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "interval": {"every": _NUMBER, "relative": (bool,)},
    "crontab": {**{name: (str,) for name in CRONTAB_FIELDS}, "tz": _ZONE},
    "cron": {"expr": (str,), "tz": _ZONE},
    "clocked": {"at": (str,)},
    "solar": {"event": (str,), "lat": _NUMBER, "lon": _NUMBER},
}


def to_json(schedule: Schedule) -> dict[str, Any]:
    """The flat JSON dict for a schedule: ``{"kind": ..., <fields>}``."""
    kind = _KINDS.get(type(schedule))
    if kind is None:
        raise InvalidSchedule("schedule", f"unsupported schedule type {type(schedule).__name__}")
    data: dict[str, Any] = {"kind": kind}
    for field in dataclasses.fields(schedule):
        value = getattr(schedule, field.name)
        data[field.name] = value.isoformat() if isinstance(value, datetime) else value
    return data


def _parse_at(text: str) -> datetime:
    # Python 3.10's fromisoformat does not read a trailing "Z".
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        return datetime.fromisoformat(iso)
    except ValueError:
        raise InvalidSchedule("schedule.at", f"not an ISO 8601 datetime: {text!r}") from None


def from_json(data: Any) -> Schedule:
    """Build a schedule from its JSON dict; anything malformed raises InvalidSchedule."""
    if not isinstance(data, dict):
        raise InvalidSchedule("schedule", f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in _FIELD_TYPES:
        raise InvalidSchedule(
            "schedule.kind", f"unknown kind {kind!r}; expected one of {sorted(_FIELD_TYPES)}"
        )
    types = _FIELD_TYPES[kind]
    for key in data:
        if key != "kind" and key not in types:
            raise InvalidSchedule(f"schedule.{key}", f"unknown field for kind {kind!r}")
    values: dict[str, Any] = {}
    for name, allowed in types.items():
        if name not in data:
            raise InvalidSchedule(f"schedule.{name}", f"missing (required for kind {kind!r})")
        value = data[name]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise InvalidSchedule(f"schedule.{name}", f"must be {names}, got {value!r}")
        values[name] = value
    if kind == "clocked":
        values["at"] = _parse_at(values["at"])
    schedule: Schedule = _CLASSES[kind](**values)
    return schedule
