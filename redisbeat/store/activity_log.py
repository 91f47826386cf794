"""The deployment's last hour of beat summaries: what the admin's overview charts.

Each beat records its summary of a period (:mod:`redisbeat.beat.activity`) twice in one round
trip: as its own latest record (``activity:<beat>``, what ``status`` shows) and as an entry
of one capped stream for the whole deployment (:attr:`Keys.activity_log`). The stream's ids
are the Redis clock at each record, so every beat's summaries are on the one clock beats
share; ``MAXLEN ~`` keeps it to :data:`LOG_CAP` entries whatever the number of beats, and it
expires two hours after the last record, once no beat runs. Reading the last hour is one
``XREVRANGE`` from its start: it never walks older entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from .base import StoreBase
from .errors import translated
from .keys import Keys
from .records import text

#: The most summaries the stream keeps (about: trimmed with ``~``): an hour of 100 beats at
#: the default minute-long summary period.
LOG_CAP = 6000
#: The stream expires this long after the last summary recorded (no beat runs any more).
LOG_TTL_S = 7200
#: The numbers of a summary the stream keeps (each an int or float).
FIELDS = (
    "seconds",
    "sent",
    "late_p50_ms",
    "late_p99_ms",
    "late_max_ms",
    "recovered",
    "skipped",
    "failed",
    "handed_back",
    "missed",
    "missed_entries",
    "expired",
)


@dataclass(frozen=True)
class LoggedSummary:
    """One beat's summary of one period, as the stream keeps it."""

    beat: str
    #: When it was recorded, the end of its period (ms, Redis clock).
    at_ms: int
    #: The summary's numbers (:data:`FIELDS`; a field a beat did not write reads 0).
    numbers: dict[str, float]

    def get(self, field: str) -> float:
        return self.numbers.get(field, 0.0)


def log_summary(pipe: Any, keys: Keys, beat_id: str, summary: dict[str, Any]) -> None:
    """Queue on ``pipe`` what adds a summary to the deployment's stream (cap and expiry
    included): the caller's round trip carries it."""
    fields: dict[str, Any] = {"beat": beat_id}
    fields.update((f, summary[f]) for f in FIELDS if isinstance(summary.get(f), (int, float)))
    pipe.xadd(keys.activity_log, fields, maxlen=LOG_CAP, approximate=True)
    pipe.expire(keys.activity_log, LOG_TTL_S)


class ActivityLog(StoreBase):
    """Reading the deployment's recent summaries."""

    @translated
    def activity_since(self, since_ms: int, most: int = LOG_CAP) -> list[LoggedSummary]:
        """The summaries recorded since ``since_ms`` (Redis clock), oldest first; the newest
        ``most`` of them when there are more."""
        reply = self.client.xrevrange(self.keys.activity_log, "+", since_ms, count=most)
        rows = cast("list[tuple[Any, dict[Any, Any]]]", reply)  # redis-py types this loosely
        found = [_summary(text(entry_id), fields) for entry_id, fields in rows]
        return [s for s in reversed(found) if s is not None]


def _summary(entry_id: str, fields: dict[Any, Any]) -> LoggedSummary | None:
    """A stream entry as a summary (None: not one a beat wrote)."""
    values = {text(k): text(v) for k, v in fields.items()}
    beat = values.pop("beat", None)
    if beat is None:
        return None
    numbers: dict[str, float] = {}
    for field, value in values.items():
        try:
            numbers[field] = float(value)
        except ValueError:
            continue
    return LoggedSummary(beat, int(entry_id.split("-", 1)[0]), numbers)
