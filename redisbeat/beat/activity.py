"""Activity: what one beat did lately, logged as one INFO line a minute.

At Celery's default log level a beat prints its banner and then nothing; at INFO, besides
the line per send, this line says the beat is alive and keeping time: how many occurrences
it sent, how late (p50/p99/max, from the due time to the send, by the Redis clock), how
many claims of a dead beat it recovered, and what failed or was handed back.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter

from ..store.records import Outcome

log = logging.getLogger(__name__)

#: Seconds between two summary lines.
PERIOD = 60.0
#: Lateness samples kept per period (a uniform sample of every send: p99 within a few ms).
SAMPLES = 2000


class Activity:
    """Counts one beat's outcomes and their lateness; :meth:`report` logs a line a minute."""

    def __init__(self, period: float = PERIOD) -> None:
        self.period = period
        self._random = random.Random(0)
        self._reset(time.monotonic())

    def _reset(self, now: float) -> None:
        self._since = now
        self._counts: Counter[str] = Counter()
        self._late: list[int] = []
        self._seen = 0
        self._max = 0

    def record(self, outcome: Outcome, late_ms: int, recovered: bool) -> None:
        self._counts[outcome.action] += 1
        if recovered:
            self._counts["recovered"] += 1
        if outcome.action != "sent":
            return
        late = max(0, late_ms)
        self._max = max(self._max, late)
        self._seen += 1
        # Reservoir sampling: a fair sample of the period's sends in bounded memory.
        if len(self._late) < SAMPLES:
            self._late.append(late)
        else:
            slot = self._random.randrange(self._seen)
            if slot < SAMPLES:
                self._late[slot] = late

    def report(self) -> dict[str, float] | None:
        """Log the summary line when a period has passed, start the next period, and return
        the summary (None: the period goes on)."""
        now = time.monotonic()
        if now - self._since < self.period:
            return None
        counts, late = self._counts, sorted(self._late)
        summary = {
            "seconds": round(now - self._since, 1),
            "sent": counts["sent"],
            "late_p50_ms": _pct(late, 0.5) if late else 0,
            "late_p99_ms": _pct(late, 0.99) if late else 0,
            "late_max_ms": self._max,
            "recovered": counts["recovered"],
            "skipped": counts["skipped"],
            "failed": counts["failed"],
            "handed_back": counts["release"],
        }
        lateness = (
            f"late p50 {summary['late_p50_ms']} ms, p99 {summary['late_p99_ms']} ms, "
            f"max {self._max} ms"
            if late
            else "late n/a"
        )
        log.info(
            "redisbeat: in the last %.0f s this beat sent %d occurrence(s) (%s); "
            "recovered %d claim(s) of stopped beats; skipped %d, failed %d, handed back %d",
            now - self._since,
            counts["sent"],
            lateness,
            counts["recovered"],
            counts["skipped"],
            counts["failed"],
            counts["release"],
        )
        self._reset(now)
        return summary


def _pct(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))]
