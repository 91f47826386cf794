"""Schedules in plain English, for people reading a list of entries (the CLI, the admin).

Cron text comes from ``cron_descriptor``, with the one difference cron and Celery's crontab
have spelled out: a cron string fires on the day of month OR the day of week.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cron_descriptor import ExpressionDescriptor, Options

from .kinds import Clocked, Cron, Crontab, Interval, Schedule, Solar

__all__ = ["cron_text", "describe", "dst_text", "every_text", "solar_text"]

# croniter's aliases, spelled out for cron_descriptor (which reads five or six fields).
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_UNRESTRICTED = {"*", "?"}
_UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))


def describe(schedule: Schedule, default_tz: str = "UTC") -> str:
    """One line saying when a schedule fires, e.g. "At 09:00, Monday through Friday (UTC)"."""
    if isinstance(schedule, Interval):
        return every_text(schedule.every)
    if isinstance(schedule, (Crontab, Cron)):
        if isinstance(schedule, Crontab):
            fields = (
                schedule.minute,
                schedule.hour,
                schedule.day_of_month,
                schedule.month_of_year,
                schedule.day_of_week,
            )
            text = cron_text(" ".join(f.strip() or "*" for f in fields), either=False)
        else:
            text = cron_text(schedule.expr.strip(), either=True)
        zone = schedule.tz or default_tz
        return f"{text} ({zone}{dst_text(schedule.dst_gap, schedule.dst_fold)})"
    if isinstance(schedule, Clocked):
        return f"Once, at {schedule.at.isoformat()}"
    if isinstance(schedule, Solar):
        return solar_text(schedule.event, schedule.lat, schedule.lon)
    return f"Unknown schedule {schedule!r}"


def dst_text(gap: str | None, fold: str | None) -> str:
    """The DST policies that differ from the usual ones, e.g. "; no run in the DST gap"."""
    parts = [
        text
        for on, text in (
            (gap == "skip", "no run in the DST gap"),
            (fold == "twice", "both passes of the DST overlap"),
        )
        if on
    ]
    return "".join(f"; {part}" for part in parts)


def every_text(seconds: float) -> str:
    """``Every 90 seconds``, ``Every 2 hours``, ``Every day``: the largest unit that divides."""
    for unit, size in _UNITS:
        count, left = divmod(seconds, size)
        if count and not left:
            return f"Every {unit}" if count == 1 else f"Every {count:g} {unit}s"
    return f"Every {seconds:g} seconds"


@lru_cache(maxsize=1024)
def cron_text(expr: str, *, either: bool) -> str:
    """cron_descriptor's description; ``either``: day of month OR day of week (cron)."""
    spelled = _ALIASES.get(expr.lower(), expr)
    options = Options()
    options.use_24hour_time_format = True
    try:
        text = str(ExpressionDescriptor(spelled, options).get_description())
    except Exception:  # its errors share no base class; the raw expression still informs
        return f"cron {expr}" if either else f"crontab {expr}"
    parts = spelled.split()
    dom, dow = (parts[-3], parts[-1]) if len(parts) in (5, 6) else ("*", "*")
    if either and dom not in _UNRESTRICTED and dow not in _UNRESTRICTED:
        # cron fires on either day; cron_descriptor words it as both ("..., only on Monday").
        either_text = text.replace(", only on ", " or on ", 1)
        text = either_text if either_text != text else f"{text} (either day matches)"
    return text


def solar_text(event: str, latitude: Any, longitude: Any) -> str:
    """``At sunset, seen from 52.5°N 13.4°E``."""
    if not event or latitude is None or longitude is None:
        return "Solar event (incomplete)"
    words = event.split("_")
    name = f"{words[1]} {words[0]}" if words[0] in ("dawn", "dusk") else " ".join(words)
    lat, lon = float(latitude), float(longitude)
    where = f"{abs(lat):g}°{'N' if lat >= 0 else 'S'} {abs(lon):g}°{'E' if lon >= 0 else 'W'}"
    return f"At {name}, seen from {where}"
