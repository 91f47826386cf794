"""Backfill: send the occurrences of a past range once each, as if on time.

Each occurrence becomes a delayed task (:mod:`.delayed`) under a key derived from it, so a
backfill repeated while its tasks wait replaces them rather than adding more, and its message
carries the occurrence's own task id and due time (a repeated backfill, or one of an
occurrence that did go out, is a duplicate downstream deduplication can drop). The tasks
are spread ``1 / rate`` seconds apart from now: beats claim them among the other due work,
a few at a time, so on-time sends of other entries are not held up. They share an owner,
``backfill:<name>``, so ``pending`` lists them and ``cancel_owner`` stops a backfill.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime

from ..errors import InvalidEntry
from ..schedule.clock import from_ms, to_ms
from ..schedule.delayed import Delay
from ..schedule.entry import MAX_NAME_LENGTH, Entry
from ..schedule.ids import occurrence_id
from .delayed import CHUNK, DelayedCalls
from .errors import translated
from .reads import EntryReads
from .records import wire

#: The most occurrences one backfill sends.
MAX_BACKFILL = 10_000


class BackfillCalls(DelayedCalls, EntryReads):
    """``backfill``, for the API, the command line and the admin."""

    @translated
    def backfill(
        self, name: str, start: datetime, end: datetime, *, rate: float = 10.0
    ) -> list[datetime]:
        """Send each occurrence of entry ``name`` due from ``start`` to ``end`` (aware, in
        the past) once, ``rate`` per second from now; returns their due times. A range of
        more than :data:`MAX_BACKFILL` occurrences is refused."""
        for field, value in (("start", start), ("end", end)):
            if not isinstance(value, datetime) or value.utcoffset() is None:
                raise InvalidEntry(name, field, "must be a time-zone aware datetime")
        if end < start:
            raise InvalidEntry(name, "end", "is before start")
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 0 < rate <= 1000:
            raise InvalidEntry(name, "rate", "must be a number of sends per second, 0 to 1000")
        now = self.now_ms()
        if to_ms(end) > now:
            raise InvalidEntry(name, "end", "is in the future: only past occurrences are sent")
        entry = self.get(name)
        dues = self._occurrences(entry, to_ms(start), to_ms(end))
        gap = 1000 / rate
        prefix = self.keys.prefix
        delays = [_delay(prefix, entry, d, now + int(i * gap)) for i, d in enumerate(dues)]
        for first in range(0, len(delays), CHUNK):
            self._delay_chunk(delays[first : first + CHUNK])
        return [from_ms(due) for due in dues]

    def _occurrences(self, stored: Entry, start_ms: int, end_ms: int) -> list[int]:
        # Disabled or not, the schedule says which occurrences the range held; an interval's
        # grid runs through its current due time (else its start_at).
        name = stored.name
        entry = replace(stored.with_default_tz(self.timezone), enabled=True)
        score = self.client.zscore(self.shard(name).keys.schedule, wire(name))
        base = int(score) if score is not None and score >= 0 else None
        dues: list[int] = []
        due = entry.due_at_or_after(start_ms, base, self.timezone)
        while due is not None and due <= end_ms:
            if len(dues) == MAX_BACKFILL:
                raise InvalidEntry(
                    name, "start", f"the range holds over {MAX_BACKFILL} occurrences: split it"
                )
            dues.append(due)
            due = entry.next_due_ms(due, due, self.timezone)
        return dues


def owner_of_backfill(name: str) -> str:
    """The owner of an entry's backfilled occurrences while they wait."""
    owner = f"backfill:{name}"
    if len(owner) > MAX_NAME_LENGTH:
        owner = "backfill:" + hashlib.sha1(name.encode()).hexdigest()
    return owner


def _delay(prefix: str, entry: Entry, due: int, at_ms: int) -> Delay:
    """The delayed task that sends the occurrence of ``entry`` due at ``due``, at ``at_ms``."""
    delay = Delay.of(
        entry.task,
        entry.args,
        entry.kwargs,
        eta=from_ms(at_ms),
        key="backfill:" + occurrence_id(prefix, entry.name, due),
        owner=owner_of_backfill(entry.name),
        options=entry.options,
    )
    return replace(delay, backfill=(entry.name, due))
