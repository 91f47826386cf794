"""Times as the admin shows them at a glance: "in 4 s", "2 min ago", "3 h ago", "5 d ago".

One short unit, so a time column stays one narrow line; the exact time goes in the cell's
title (:func:`redisbeat_django.describe.time_cell`).
"""

from __future__ import annotations

from datetime import datetime

#: (seconds in the unit, its abbreviation), largest first.
UNITS = ((86_400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def span(seconds: float) -> str:
    """``4 s``, ``2 min``, ``3 h``, ``5 d``: a positive duration in its largest whole unit."""
    for size, unit in UNITS:
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return "0 s"


def relative(value: datetime, now: datetime) -> str:
    """``in 4 s`` or ``2 min ago`` (``now`` within the second)."""
    seconds = (value - now).total_seconds()
    if abs(seconds) < 1:
        return "now"
    return f"in {span(seconds)}" if seconds > 0 else f"{span(-seconds)} ago"
