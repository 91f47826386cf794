"""How a deployment's entries are split over shards (:class:`Layout`), and which shard a beat
claims from next (:class:`ShardCursor`).

A layout is the count the entries use, and while ``redisbeat reshard`` moves them, the count
they are moving to. Every process follows the layout recorded in Redis: a moving entry is in
its old shard until the move takes it, then in its new one, and a beat claims from every shard
of both counts until the move ends.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from .keys import shard_of


@dataclass(frozen=True)
class Layout:
    shards: int
    #: The count a reshard is moving the entries to (None: no reshard is running).
    moving_to: int | None = None

    @classmethod
    def from_fields(cls, shards: object, moving_to: object) -> Layout:
        """From the layout record's fields; a field that is not a count reads as 0 (which
        no store follows)."""
        return cls(_count(shards), None if moving_to in (None, "") else _count(moving_to))

    @property
    def span(self) -> int:
        """How many shards may hold entries: those of both counts while moving."""
        return max(self.shards, self.moving_to or 0)

    @property
    def spelled(self) -> str:
        """As the write scripts compare it with each shard's record: ``4`` or ``4>8``."""
        return str(self.shards) if self.moving_to is None else f"{self.shards}>{self.moving_to}"

    def home(self, name: str) -> int:
        """Where the entry lives once every move is done."""
        return shard_of(name, self.moving_to or self.shards)

    def origin(self, name: str) -> int:
        """Where the entry lived before the reshard (its home when none runs)."""
        return shard_of(name, self.shards)


def _count(field: object) -> int:
    text = field.decode() if isinstance(field, bytes) else str(field)
    return int(text) if text.isdigit() else 0


class ShardCursor:
    """Per shard: when its earliest entry is due (ms, that shard's Redis clock).

    Each claim and finish reports its shard's earliest remaining due time; a shard not yet
    seen, or one a change was heard for, counts as due now. Ties go round from a starting
    shard of the beat's own, so beats spread over the shards rather than all start with one.
    """

    def __init__(self, shards: int, *, at_least_one: bool = True) -> None:
        self._due = [-math.inf] * shards
        #: Whether :meth:`due` names the shard due soonest when none is due (a beat's
        #: periodic claims always read one shard: it learns when the next is due).
        self.at_least_one = at_least_one
        self._next = random.randrange(shards)
        #: The Redis clock at the last report (ms) and the monotonic time it came, to tell
        #: which shards are due by now.
        self._clock: tuple[int, float] | None = None

    def resize(self, shards: int) -> None:
        """Follow a new layout: a shard added counts as due now."""
        if shards != len(self._due):
            self._due = (self._due + [-math.inf] * shards)[:shards]
            self._next %= shards

    def pick(self) -> int:
        """The shard due soonest; among equals, the next one round from the last pick."""
        shard = min(self._order(), key=lambda s: self._due[s])
        self._next = (shard + 1) % len(self._due)
        return shard

    def due(self, ahead_ms: int) -> list[int]:
        """The shards with an entry due within ``ahead_ms`` of now (by the clock the last
        report gave), round from the next one; at least the shard due soonest."""
        horizon = -math.inf  # no clock yet: the shards not seen yet are due
        if self._clock is not None:
            redis_ms, then = self._clock
            horizon = redis_ms + (time.monotonic() - then) * 1000 + ahead_ms
        shards = [s for s in self._order() if self._due[s] <= horizon]
        if not shards:
            return [self.pick()] if self.at_least_one else []
        self._next = (shards[0] + 1) % len(self._due)
        return shards

    def seen(self, shard: int, next_due_ms: int | None, now_ms: int | None = None) -> None:
        """A claim or finish on ``shard`` said when its earliest entry is due (None: none),
        at ``now_ms`` by its Redis clock."""
        if shard < len(self._due):
            self._due[shard] = math.inf if next_due_ms is None else next_due_ms
        if now_ms is not None:
            self._clock = (now_ms, time.monotonic())

    def due_ms(self, shard: int) -> float:
        """When ``shard``'s earliest entry is due, as last reported (-inf: not known)."""
        return self._due[shard] if shard < len(self._due) else -math.inf

    def changed(self) -> None:
        """A change was heard (or may have been missed): every shard may be due now."""
        self._due = [-math.inf] * len(self._due)

    def earliest(self, now_ms: int) -> int | None:
        """When the next claim is needed, on the clock of ``now_ms`` (None: nothing is due)."""
        soonest = min(self._due)
        if soonest == math.inf:
            return None
        return now_ms if soonest == -math.inf else int(soonest)

    def _order(self) -> list[int]:
        count = len(self._due)
        return [(self._next + i) % count for i in range(count)]
