"""Activity: what one beat did lately, logged as one line a minute.

A beat never writes a line per send or per missed occurrence: behind schedule that would be
thousands a second, a log bill and a flooded pipeline at the worst moment, and the writing
itself would slow the beat further. Instead it counts, and every summary period logs one
line: how many occurrences it sent, how late (p50/p99/max, from the due time to the send, by
the Redis clock), how many claims of a dead beat it recovered, what failed or was handed
back, how many occurrences were missed, of how many entries, and why, and how many messages
went out after their expiry had passed (Celery would warn once per message). The line is
INFO while the beat keeps time, WARNING in a period when occurrences were missed or
messages expired (so a beat at Celery's default log level says so, once a period).
Per-entry detail goes to the metrics and the ``occurrence_missed`` signal.
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
    """Counts one beat's outcomes, lateness and misses; :meth:`report` logs a line a period."""

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
        #: Occurrences missed, by why ("late", "paused"), and the entries that missed any.
        self._missed: Counter[str] = Counter()
        self._missing: set[str] = set()
        #: Messages sent after their expiry had passed.
        self._expired = 0

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

    def missed(self, name: str, count: int, reason: str) -> None:
        """``count`` occurrences of entry ``name`` were missed (``reason``: late, paused)."""
        self._missed[reason] += count
        self._missing.add(name)

    def expired(self, count: int) -> None:
        """``count`` messages were sent after their expiry had passed."""
        self._expired += count

    @property
    def quiet(self) -> bool:
        """Nothing happened in this period (an idle beat need not record its summary)."""
        return not self._counts and not self._missed and not self._expired

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
            "missed": sum(self._missed.values()),
            "missed_entries": len(self._missing),
            "expired": self._expired,
        }
        trouble = self._missed_words() + self._expired_words()
        log.log(
            logging.WARNING if trouble else logging.INFO,
            "redisbeat: in the last %.0f s this beat sent %d occurrence(s) (%s); "
            "recovered %d claim(s) of stopped beats; skipped %d, failed %d, handed back %d%s",
            now - self._since,
            counts["sent"],
            _lateness(summary) if late else "late n/a",
            counts["recovered"],
            counts["skipped"],
            counts["failed"],
            counts["release"],
            trouble,
        )
        self._reset(now)
        return summary

    def _missed_words(self) -> str:
        if not self._missed:
            return ""
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(self._missed.items()))
        total = sum(self._missed.values())
        return f"; missed {total} occurrence(s) of {len(self._missing)} entries ({why})"

    def _expired_words(self) -> str:
        if not self._expired:
            return ""
        return (
            f"; {self._expired} message(s) sent after their expiry had passed "
            "(options 'expires'; the workers discard them)"
        )


def _lateness(summary: dict[str, float]) -> str:
    return (
        f"late p50 {summary['late_p50_ms']} ms, p99 {summary['late_p99_ms']} ms, "
        f"max {summary['late_max_ms']} ms"
    )


def _pct(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))]
