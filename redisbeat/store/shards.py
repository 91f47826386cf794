"""Which shard a beat claims from next: the one whose earliest entry is due soonest.

Each claim and finish reports its shard's earliest remaining due time; a shard not yet seen,
or one a change was heard for, counts as due now. Ties go round from a starting shard of the
beat's own, so beats spread over the shards rather than all starting with the same one.
"""

from __future__ import annotations

import math
import random


class ShardCursor:
    """Per shard: when its earliest entry is due (ms, that shard's Redis clock)."""

    def __init__(self, shards: int) -> None:
        self._due = [-math.inf] * shards
        self._next = random.randrange(shards)

    def pick(self) -> int:
        """The shard due soonest; among equals, the next one round from the last pick."""
        count = len(self._due)
        order = [(self._next + i) % count for i in range(count)]
        shard = min(order, key=lambda s: self._due[s])
        self._next = (shard + 1) % count
        return shard

    def seen(self, shard: int, next_due_ms: int | None) -> None:
        """A claim or finish on ``shard`` said when its earliest entry is due (None: none)."""
        self._due[shard] = math.inf if next_due_ms is None else next_due_ms

    def changed(self) -> None:
        """A change was heard (or may have been missed): every shard may be due now."""
        self._due = [-math.inf] * len(self._due)

    def earliest(self, now_ms: int) -> int | None:
        """When the next claim is needed, on the clock of ``now_ms`` (None: nothing is due)."""
        soonest = min(self._due)
        if soonest == math.inf:
            return None
        return now_ms if soonest == -math.inf else int(soonest)
