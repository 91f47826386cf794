"""The garbage collector in a beat process, kept out of the way of sending.

CPython's full collections scan every long-lived object. Before its first claim a beat
freezes what start-up made (Celery's app, the modules, the connections), so a full
collection scans only what the beat made since. A beat whose entry cache turns over (more
entries fall due than ``redisbeat_entry_cache_size`` holds) still makes long-lived objects
as fast as it sends, and CPython then runs a full collection every second or so, each one
scanning the whole cache: 50 to 70 ms in which nothing is sent, most of a busy beat's late
p99. So a beat takes full collections into its own hands: one when it is about to wait at
least as long as the last one took, at most every :data:`QUIET_EVERY` seconds, and one
whatever the wait every :data:`MOST_EVERY` seconds (a beat that never waits still frees
what only a full collection finds). CPython collects the young generations as before.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable

#: The fewest seconds between two full collections run at quiet moments.
QUIET_EVERY = 30.0
#: The most seconds between two full collections, quiet moment or not.
MOST_EVERY = 60.0
#: CPython's third threshold (middle-generation collections before a full one is
#: considered): this high, CPython never starts one.
NEVER = 1_000_000_000


class Collector:
    """When one beat process runs its full garbage collections."""

    #: The process whose start-up objects are frozen (a forked child freezes its own).
    _started_in: int | None = None

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last = clock()
        #: How long the last full collection took (a guess until the first).
        self.took = 0.05

    def start(self) -> None:
        """Once per process, before the first claim: freeze what start-up made, and take
        full collections over from CPython."""
        if Collector._started_in == os.getpid():
            return
        Collector._started_in = os.getpid()
        gc.collect()
        gc.freeze()
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self._last = self._clock()

    def before_wait(self, seconds: float) -> float:
        """Run a full collection if it is time to (``seconds``: the wait ahead); return
        what is left of the wait."""
        now = self._clock()
        since = now - self._last
        if since < QUIET_EVERY or (seconds < self.took and since < MOST_EVERY):
            return seconds
        gc.collect()
        done = self._clock()
        self.took, self._last = done - now, done
        return max(0.0, seconds - self.took)
