"""When an imported task is first sent: under django-celery-beat, and under redisbeat.

django-celery-beat decides a task's first send from its row: a task never run whose
``start_time`` is set has its ``last_run_at`` back-dated thirty years, so it is sent as soon
as its start time has passed (at once, if it passed before the import); a task that ran is
next due a period after its ``last_run_at``; before its ``start_time``, its beat waits for
the start. redisbeat schedules an imported entry from its definition alone: the first
occurrence from now (an interval's grid anchored at ``start_at``, else at now). Where the
two differ, the import says so per task, so that a user moving over knows which sends will
not be the same. django-celery-beat's side is asked of its own scheduler entry
(``ModelEntry.is_due``, on a copy of the row), so it is what the installed release does.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

from redisbeat.schedule.clock import from_ms, to_ms

#: Differences smaller than this are the same send (the beats' own loop, rounding).
SAME_WITHIN = timedelta(seconds=1)


def under_django_celery_beat(task: Any, app: Any, now: datetime) -> datetime | None:
    """When django-celery-beat's beat would first send ``task`` (None: never)."""
    from django_celery_beat.schedulers import ModelEntry

    ended = task.expires is not None and now >= task.expires
    if not task.enabled or ended or (task.one_off and task.total_run_count > 0):
        return None  # what is_due would disable, saving the row: never asked
    due, delay = ModelEntry(copy.copy(task), app=app).is_due()
    return now if due else now + timedelta(seconds=float(delay))


def difference(task: Any, entry: Any, app: Any, now: datetime, timezone: str) -> str:
    """What differs between the two first sends ('' when nothing does)."""
    try:
        theirs = under_django_celery_beat(task, app, now)
        due = entry.first_due_ms(to_ms(now), timezone)
    except Exception:  # best effort: an import never fails for want of this comparison
        return ""
    ours = None if due is None else from_ms(due)
    if theirs is None or ours is None:
        return "" if theirs is ours else _said(theirs, ours)
    return "" if abs(theirs - ours) < SAME_WITHIN else _said(theirs, ours, now)


def _said(theirs: datetime | None, ours: datetime | None, now: datetime | None = None) -> str:
    def when(at: datetime | None) -> str:
        if at is None:
            return "never"
        if now is not None and at <= now + SAME_WITHIN:
            return "at once"
        return f"at {at.isoformat(timespec='seconds')}"

    return (
        f"first sent {when(ours)} by redisbeat, {when(theirs)} by django-celery-beat "
        "(redisbeat schedules from the definition, not from the task's last run)"
    )
