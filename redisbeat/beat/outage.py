"""Redis trouble as one beat lives through it: how long to wait, and what to log, once.

An outage (no connection) is probed every :data:`PROBE_INTERVAL`, so the beats are back within
a fraction of a second of Redis; a refusal (out of memory, an ACL denial, a read-only replica)
or a failing broker backs off, doubling. Each kind of trouble is logged once per episode, and
the end of the episode once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..store.errors import RedisTrouble, StoreError

log = logging.getLogger(__name__)

MIN_BACKOFF = 0.5
MAX_BACKOFF = 10.0
#: While Redis cannot be reached, try it this often (seconds): a refused connection costs
#: nothing, and the beats must be back within a fraction of a second of Redis.
PROBE_INTERVAL = 0.2


class Outage:
    """The current episode of trouble, if any; ``where`` names the Redis for log lines."""

    def __init__(self, where: Callable[[], str]) -> None:
        self._where = where
        #: Refusals (or broker failures) in a row: the backoff doubles with each.
        self.failures = 0
        self.down_since: float | None = None
        #: The latest trouble of the current episode, and every kind logged in it (once each).
        self._trouble: RedisTrouble | None = None
        self._logged: set[tuple[str, str | None]] = set()

    @property
    def troubled(self) -> bool:
        return self.down_since is not None or self.failures > 0

    def delay(self, exc: StoreError | None) -> float:
        """Seconds to wait after ``exc`` (None: the broker failed); logs it once per kind."""
        trouble = None if exc is None else exc.trouble
        if trouble is not None and trouble.kind == "unavailable":
            delay = PROBE_INTERVAL
        else:
            # Redis answers but refuses (or the broker fails): back off, doubling.
            self.failures += 1
            delay = min(MAX_BACKOFF, MIN_BACKOFF * 2.0 ** (self.failures - 1))
        if trouble is not None:
            if self.down_since is None:
                self.down_since = time.monotonic()
            # One line per kind of trouble for the whole episode, however many ticks it lasts.
            if (trouble.kind, trouble.key) not in self._logged:
                self._logged.add((trouble.kind, trouble.key))
                log.error(
                    "redisbeat: %s; %s",
                    trouble.describe(self._where()),
                    f"trying again every {delay} s"
                    if trouble.kind == "unavailable"
                    else "retrying with backoff",
                )
            self._trouble = trouble
        return delay

    def over(self) -> None:
        """Redis answered normally: end the episode (said once)."""
        if self.down_since is None:
            return
        seconds = time.monotonic() - self.down_since
        if self._trouble is None or self._trouble.kind == "unavailable":
            log.warning("redisbeat: Redis is available again after %.1f s", seconds)
        else:
            log.warning(
                "redisbeat: Redis at %s answers normally again after %.1f s (it was %s)",
                self._where(),
                seconds,
                self._trouble.was,
            )
        self.down_since = None
        self._trouble = None
        self._logged.clear()
