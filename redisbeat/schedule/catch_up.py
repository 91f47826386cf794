"""``catch_up="all"``: which missed occurrence a late claim sends first.

After downtime such an entry sends every occurrence it missed, oldest first, one per claim
and each under its own occurrence id: the finish puts the entry back at the next one, due
at once, until it has caught up. Only those within its ``grace`` are sent, and at most the
newest ``limit`` (``redisbeat_catch_up_limit``; Kubernetes' CronJob stops at 100), so an
entry back after months does not flood the queue. Everything here is worked out from the
claim (its due time and when it was first claimed), so every beat picks the same one.
"""

from __future__ import annotations

from .entry import Entry
from .kinds import Clocked, Interval


def oldest_missed(entry: Entry, due_ms: int, claimed_ms: int, tz: str, limit: int) -> int | None:
    """The oldest occurrence still to send, counting from the one due at ``due_ms``, when
    it was claimed at ``claimed_ms`` (None: every one missed is past the grace)."""
    if entry.one_off or isinstance(entry.schedule, Clocked):
        return due_ms
    latest = entry.latest_due_ms(due_ms, claimed_ms, tz)
    first: int | None = due_ms
    if entry.grace is not None and due_ms < claimed_ms - entry.grace * 1000:
        floor = claimed_ms - int(entry.grace * 1000)
        first = entry.next_due_ms(due_ms, floor - 1, tz)  # the first at or after the floor
    if first is None or first > latest:
        return None
    if isinstance(entry.schedule, Interval):  # a grid: the newest ``limit`` by arithmetic
        every_ms = round(entry.schedule.every * 1000)
        return max(first, latest - (limit - 1) * every_ms)
    if _count(entry, due_ms, first, latest, tz, limit) <= limit:
        return first
    # Bisect for the earliest occurrence with at most ``limit`` from it to the latest.
    lo, hi = first, latest
    while hi - lo > 1:
        mid = (lo + hi) // 2
        at = entry.next_due_ms(due_ms, mid - 1, tz)
        if at is not None and _count(entry, due_ms, at, latest, tz, limit) <= limit:
            hi = mid
        else:
            lo = mid
    found = entry.next_due_ms(due_ms, hi - 1, tz)
    return latest if found is None else found


def _count(entry: Entry, due_ms: int, start: int, latest: int, tz: str, limit: int) -> int:
    """How many occurrences from ``start`` to ``latest``, counting up to ``limit`` + 1."""
    count, at = 1, start
    while count <= limit:
        nxt = entry.next_due_ms(due_ms, at, tz)
        if nxt is None or nxt > latest:
            break
        count, at = count + 1, nxt
    return count


#: The most missed occurrences counted one by one (a cron entry back after a long outage
#: says "at least" this many); an interval's are counted by arithmetic.
COUNT_LIMIT = 1000


def missed_between(entry: Entry, due_ms: int, start: int, end: int, tz: str) -> int:
    """How many occurrences fall from ``start`` (an occurrence, counting from the one due at
    ``due_ms``) up to, not including, ``end``: those a late claim did not send."""
    if end <= start or entry.one_off or isinstance(entry.schedule, Clocked):
        return 0
    if isinstance(entry.schedule, Interval):
        every_ms = round(entry.schedule.every * 1000)
        return -(-(end - start) // every_ms) if every_ms > 0 else 0
    count, at = 0, start
    while at < end and count < COUNT_LIMIT:
        count += 1
        nxt = entry.next_due_ms(due_ms, at, tz)
        if nxt is None:
            break
        at = nxt
    return count
