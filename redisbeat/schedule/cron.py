"""Cron expressions: validate Crontab fields and cron strings, and say how croniter reads them.

A schedule that can never fire (Feb 31, or days and months that never meet) is refused here,
with the field to blame, so that no invalid cron schedule can be constructed.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from celery import schedules as celery_schedules
from croniter import CroniterBadDateError, croniter

from ..errors import InvalidSchedule

__all__ = ["CRONTAB_FIELDS", "CronSpec", "check_cron", "crontab_expr"]

CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
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


def check_fires(spec: CronSpec, field: str, shown: str) -> None:
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
def crontab_expr(minute: str, hour: str, dow: str, dom: str, moy: str) -> str:
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
    check_fires(CronSpec(expr, False, False), "schedule.day_of_month", shown)
    return expr


@lru_cache(maxsize=1024)
def check_cron(expr: str) -> None:
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
    check_fires(CronSpec(expr, True, True), "schedule.expr", repr(expr))
