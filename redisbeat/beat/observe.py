"""Where a beat reports what it does: the signals of :mod:`redisbeat.signals`, and the
Prometheus metrics when they are served. Nothing is done for a signal nobody listens to."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .. import signals
from ..schedule.clock import from_ms
from ..schedule.entry import Entry
from ..store import ScheduleStore, persistence
from ..store.errors import StoreError
from ..store.keys import bare, lane_of
from ..store.records import FinishResult, Outcome
from .activity import Activity
from .metrics import OVERDUE_AFTER, Metrics

log = logging.getLogger(__name__)


def shown_name(name: str) -> str:
    """An entry's name, or ``delayed:<key>`` for a delayed task's claim."""
    return f"delayed:{bare(name)}" if lane_of(name) == "delayed" else name


class Observer:
    """One beat's reports: called by its loop, sent on to receivers and metrics."""

    def __init__(
        self,
        beat_id: str,
        activity: Activity,
        quarantine_after: int = 3,
        persistence_warning: bool = True,
    ) -> None:
        self.beat_id = beat_id
        #: Warn at the start when the store's Redis keeps nothing on disk.
        self.persistence_warning = persistence_warning
        #: Where misses are counted, for the summary line (never a line per miss).
        self.activity = activity
        self.quarantine_after = quarantine_after
        #: Set at the first heartbeat, when the beat runs (None: no metrics served).
        self.metrics: Metrics | None = None
        #: True once the beat runs (its metrics, if any, are served).
        self.serving = False
        #: Garbled run states already logged (each once).
        self._told: set[tuple[str, str]] = set()
        #: The beats alive at the last heartbeat (None: not read yet).
        self._alive: set[str] | None = None
        #: The last summary recorded was of an idle period.
        self._quiet_recorded = False

    def serve(self, metrics: Metrics | None) -> None:
        """Serve metrics from now on (a beat starts them at its first heartbeat: Celery
        makes a second scheduler to print its banner, which never runs)."""
        self.metrics = metrics
        self.serving = True

    def started(self, store: ScheduleStore) -> None:
        """Say where this beat runs and what it found there (best effort: a user without
        the reads, or a Redis that stops answering, costs only the figures)."""
        try:
            found = f"{len(store.beats())} beat(s) alive, {len(store)} entries stored"
        except StoreError as exc:
            found = f"could not count beats and entries: {exc.trouble.kind}"
        log.info("redisbeat: beat %s started on %s: %s", self.beat_id, store.describe(), found)
        if self.persistence_warning:
            self._warn_if_volatile(store)

    def _warn_if_volatile(self, store: ScheduleStore) -> None:
        """Say once, at the start, that the store's Redis keeps nothing on disk (best
        effort: a server that will not say, or stops answering, is not warned about)."""
        try:
            volatile = store.volatile_servers()
        except StoreError as exc:
            log.debug("redisbeat: could not ask whether Redis keeps data on disk: %s", exc)
            return
        for where in volatile:
            log.warning("redisbeat: %s", persistence.warning(where))

    def sent(self, entry: Entry, outcome: Outcome, late_ms: int, recovered: bool) -> None:
        """An occurrence went out."""
        late = max(0, late_ms) / 1000
        if self.metrics is not None:
            self.metrics.sent.labels(entry.task, entry.source).inc()
            self.metrics.lateness.observe(late)
            if recovered:
                self.metrics.recovered.inc()
        if signals.entry_sent.receivers or (recovered and signals.entry_recovered.receivers):
            about = {
                "name": shown_name(outcome.name),
                "task": entry.task,
                "task_id": outcome.task_id,
                "due": from_ms(outcome.due_ms),
            }
            signals.entry_sent.send_robust(self.beat_id, **about, late=late, recovered=recovered)
            if recovered:
                signals.entry_recovered.send_robust(self.beat_id, **about)

    def missed(self, entry: Entry, count: int, reason: str, before_ms: int) -> None:
        """``count`` occurrences of the entry due before ``before_ms`` were not sent within
        their grace (``reason``: ``"late"``) or were held back by a pause (``"paused"``):
        counted for the summary line, the metrics and the signal, never logged one by one."""
        self.activity.missed(entry.name, count, reason)
        if self.metrics is not None:
            self.metrics.missed.labels(entry.task, entry.source).inc(count)
        if signals.occurrence_missed.receivers:
            signals.occurrence_missed.send_robust(
                self.beat_id,
                name=shown_name(entry.name),
                task=entry.task,
                count=count,
                reason=reason,
                before=from_ms(before_ms),
            )

    def expired(self, count: int) -> None:
        """``count`` messages were sent after their expiry had passed (workers discard
        them): counted for the summary line and the metrics, never logged one by one."""
        self.activity.expired(count)
        if self.metrics is not None:
            self.metrics.expired.inc(count)

    def claimed(self, size: int) -> None:
        if self.metrics is not None and size:
            self.metrics.batch.observe(size)

    def quarantined(self, name: str, error: str) -> None:
        signals.entry_quarantined.send_robust(self.beat_id, name=shown_name(name), error=error)

    def finished(
        self, result: FinishResult, outcomes: list[Outcome], entries: Mapping[str, Entry]
    ) -> None:
        """What finishing a batch found: run states rewritten (logged once each), entries
        set aside after too many failed sends, occurrences a pause held back (``entries``:
        the batch's, by name)."""
        for name, count in result.paused_missed.items():
            entry = entries.get(name)
            due = next((o.due_ms for o in outcomes if o.name == name), None)
            if entry is not None and due is not None:
                self.missed(entry, count, "paused", due)
        for name, what in result.garbled.items():
            if (name, what) not in self._told:
                self._told.add((name, what))
                log.warning(
                    "redisbeat: entry %r: its run state in Redis was not what redisbeat "
                    "wrote (%s); rewritten, keeping the fields that were valid",
                    name,
                    what,
                )
        for name in result.quarantined:
            error = next((o.error for o in outcomes if o.name == name), "") or ""
            log.error(
                "redisbeat: entry %r was set aside after %d failed sends in a row (last: %s); "
                "saving the entry again releases it",
                name,
                self.quarantine_after,
                error,
            )
            self.quarantined(name, f"{self.quarantine_after} failed sends in a row: {error}")

    def summary(self, store: ScheduleStore) -> None:
        """The period's summary, logged and kept in Redis for ``status`` (best effort)."""
        activity = self.activity
        quiet = activity.quiet
        summary = activity.report()
        if summary is None or (quiet and self._quiet_recorded):
            return
        # An idle beat records one empty summary, then nothing until it works again: its
        # last record expires, which ``status`` shows as nothing sent.
        self._quiet_recorded = quiet
        try:
            store.record_activity(self.beat_id, summary, int(3 * activity.period))
        except StoreError as exc:
            log.debug("redisbeat: could not record this beat's activity: %s", exc)

    def redis_error(self, exc: StoreError) -> None:
        if self.metrics is not None:
            self.metrics.redis_errors.labels(exc.trouble.kind).inc()

    @property
    def watching(self) -> bool:
        """Whether anyone wants the gauges or the beats alive (metrics, or a receiver)."""
        return signals.listened(signals.beat_joined, signals.beat_left) or self.metrics is not None

    def heartbeat(self, store: ScheduleStore) -> None:
        """Who joined and left, and the deployment's gauges, where anyone listens or
        metrics are served."""
        if not self.watching:
            return
        listening = signals.listened(signals.beat_joined, signals.beat_left)
        beats = store.beats()
        alive = {beat.id for beat in beats}
        if listening:
            known = self._alive or set()
            for beat in beats:
                if beat.id not in known:
                    signals.beat_joined.send_robust(self.beat_id, beat=beat)
            for gone in sorted(known - alive):
                signals.beat_left.send_robust(self.beat_id, beat_id=gone)
        self._alive = alive
        if self.metrics is not None:
            self.metrics.deployment(store.counts(OVERDUE_AFTER), len(alive))
            self.metrics.not_started(store.not_started())
            self.metrics.keep_served()  # shared with other beats: take the port if it is free

    def stopped(self) -> None:
        """This beat deregistered."""
        signals.beat_left.send_robust(self.beat_id, beat_id=self.beat_id)
        if self.metrics is not None:
            self.metrics.close()
