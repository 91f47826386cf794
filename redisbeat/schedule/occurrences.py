"""When an entry is due: its occurrences, from its schedule, ``start_at``, ``end_at`` and
``one_off``. A mixin of :class:`~.entry.Entry`, kept apart from its fields and JSON form."""

from __future__ import annotations

import math
from datetime import datetime

from .clock import to_ms
from .kinds import Clocked, Interval, Schedule
from .timing import last_due_ms, next_due_ms

#: How late (seconds) an occurrence of a ``catch_up="skip"`` entry may be and still be sent.
DEFAULT_SKIP_GRACE = 5.0


class Occurrences:
    """The occurrence arithmetic of an entry (its fields are the dataclass's)."""

    schedule: Schedule
    enabled: bool
    start_at: datetime | None
    end_at: datetime | None
    one_off: bool
    catch_up: str
    grace: float | None

    def first_due_ms(self, now_ms: int, tz: str = "UTC") -> int | None:
        """When a newly written entry is first due (None: never)."""
        if not self.enabled:
            return None
        schedule = self.schedule
        start = to_ms(self.start_at) if self.start_at else None
        if isinstance(schedule, Clocked):
            due: int | None = to_ms(schedule.at)
        elif isinstance(schedule, Interval):
            if start is not None and start >= now_ms:
                due = start
            else:
                due = next_due_ms(schedule, now_ms, anchor_ms=start)
        else:
            after = now_ms if start is None else max(now_ms, start - 1)
            due = next_due_ms(schedule, after, tz=tz)
        return self._bounded(due)

    def due_at_or_after(self, at_ms: int, base_ms: int | None, tz: str = "UTC") -> int | None:
        """The first occurrence at or after ``at_ms`` (None: none), an interval on the grid
        through ``base_ms``, a due time it had (else through ``start_at``): where a paused
        entry resumes."""
        if not self.enabled:
            return None
        schedule = self.schedule
        if isinstance(schedule, Clocked):
            due = to_ms(schedule.at)
            return due if due >= at_ms else None
        if self.start_at is not None:  # the first occurrence, and an interval's grid
            at_ms = max(at_ms, to_ms(self.start_at))
            base_ms = to_ms(self.start_at) if isinstance(schedule, Interval) else base_ms
        if base_ms is None and isinstance(schedule, Interval):
            return self._bounded(at_ms)  # no grid yet: it starts there
        return self._bounded(next_due_ms(schedule, at_ms - 1, anchor_ms=base_ms, tz=tz))

    def next_due_ms(self, due_ms: int, now_ms: int, tz: str = "UTC") -> int | None:
        """The next due time after the occurrence due at ``due_ms`` is handled at ``now_ms``.

        Interval entries stay on their grid (anchored at ``start_at``, else at the occurrence
        just handled), so they never drift; occurrences already past coalesce.
        """
        if self.one_off or not self.enabled or isinstance(self.schedule, Clocked):
            return None
        anchor = to_ms(self.start_at) if self.start_at else due_ms
        return self._bounded(
            next_due_ms(self.schedule, max(now_ms, due_ms), anchor_ms=anchor, tz=tz)
        )

    def latest_due_ms(self, due_ms: int, now_ms: int, tz: str = "UTC") -> int:
        """The occurrence a claim of the one due at ``due_ms`` stands for at ``now_ms``: the
        last one due by then (and not after ``end_at``). Those before it coalesce into it.

        A late send thus carries the newest missed occurrence's due time and task id, which
        no beat can have sent yet: had the oldest been kept, a failover that undid the finish
        of an occurrence already sent would make the catch-up send repeat it, and downstream
        deduplication would drop the occurrences that only it stood for.
        """
        if self.one_off or not self.enabled or isinstance(self.schedule, Clocked):
            return due_ms
        until = now_ms if self.end_at is None else min(now_ms, to_ms(self.end_at))
        anchor = to_ms(self.start_at) if self.start_at else due_ms
        return last_due_ms(self.schedule, due_ms, until, anchor_ms=anchor, tz=tz)

    def is_missed(self, due_ms: int, now_ms: int) -> bool:
        """True when an occurrence is too late to send under this entry's catch-up policy."""
        grace = self.grace
        if grace is None:
            grace = DEFAULT_SKIP_GRACE if self.catch_up == "skip" else math.inf
        return now_ms - due_ms > grace * 1000

    def _bounded(self, due: int | None) -> int | None:
        if due is None or (self.end_at is not None and due > to_ms(self.end_at)):
            return None
        return due
