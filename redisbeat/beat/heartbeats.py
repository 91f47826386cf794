"""Heartbeats: a beat telling the deployment it is alive, and what rides along.

An idle beat's heartbeats are nearly all it asks of Redis, so an ordinary one does only what
must be fresh: liveness, the layout (a reshard), the version of the ``beat_schedule`` the
deployment follows (a deploy, lost data). Every :data:`HOUSEKEEPING_EVERY` th one, the first
included, and the first after Redis trouble also forgets beats silent too long, mends
scores past any valid time, puts back on their schedule the entries of a shard whose
schedule key was deleted, and sweeps the store API's spent entries. The gauges and the
beats alive are read on a cadence of their own, and only while metrics are served or a
receiver wants them. Failover never waits for a heartbeat: a killed beat's claims go back
at the end of their lease.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..config import Config
from ..errors import RedisBeatError
from ..store import ScheduleStore
from ..store.errors import StoreError, StoreRefused
from .metrics import Metrics
from .observe import Observer

log = logging.getLogger(__name__)

#: The most seconds between two sweeps of spent entries (redisbeat_spent_retention_seconds).
SWEEP_EVERY = 600.0
#: Every this many heartbeats one also does the housekeeping.
HOUSEKEEPING_EVERY = 10
#: The most seconds between two reads of the deployment's gauges and the beats alive, when
#: metrics are served or a beat_joined/beat_left receiver is connected.
GAUGES_EVERY = 15.0
#: What a beat serving metrics needs besides a beat's commands (docs/security.md).
GAUGES_ACL = "; a beat that serves metrics needs +zcard +zcount +hgetall (docs/security.md)"


class Heartbeats:
    """When one beat's next heartbeat is due, and what each one does."""

    def __init__(
        self,
        store: ScheduleStore,
        config: Config,
        beat_id: str,
        observer: Observer,
        on_heartbeat: Callable[[str | None], None] | None,
    ) -> None:
        self.store = store
        self.config = config
        self.beat_id = beat_id
        self.observer = observer
        #: Called at every heartbeat with the version of the beat_schedule the deployment
        #: follows (None: none, or Redis lost its data); retried at the next tick if it fails.
        self.on_heartbeat = on_heartbeat
        #: When the next heartbeat is due (monotonic; 0: at the next tick).
        self.next_at = 0.0
        self._count = 0
        self._next_gauges = 0.0
        self._next_sweep = 0.0
        self._gauges_failing = False
        #: Whether the next heartbeat also does the housekeeping (after Redis trouble).
        self._housekeep = False

    def after_trouble(self) -> None:
        """Heartbeat at the next tick, with the housekeeping: Redis may have lost its data,
        or an operator deleted a key to repair it."""
        self.next_at = 0.0
        self._housekeep = True

    def next_wake(self) -> float:
        """When the beat must wake next for a heartbeat (or the gauges, where read)."""
        if self.observer.watching:
            return min(self.next_at, self._next_gauges)
        return self.next_at

    def maybe(self) -> None:
        """Heartbeat if one is due; read the gauges if they are."""
        now = time.monotonic()
        self._maybe_gauges(now)
        if now < self.next_at:
            return
        housekeeping = self._housekeep or self._count % HOUSEKEEPING_EVERY == 0
        beat = self.store.heartbeat(self.beat_id, housekeeping)
        self._count += 1
        if not self.observer.serving:  # the first heartbeat: this object is a running beat
            self.observer.serve(Metrics.maybe(self.config))
            self.observer.started(self.store)
        self.next_at = now + self.config.heartbeat_seconds
        self._next_gauges = 0.0  # read with each heartbeat too: who joined and left
        self._maybe_gauges(now)
        if housekeeping:
            self._maybe_sweep(now)
            if self.store.schedule_lost():
                self.store.reschedule_lost()  # says which went back, in a line a page
            self._housekeep = False
        for name, score in beat.beyond:
            # Past any valid time (+inf, say), so never due: mended here, said once.
            what = self.store.repair(name, score, self.beat_id)
            log.warning(
                "redisbeat: entry %r had a due time in Redis that is not a valid time (%s); %s",
                name,
                score,
                what,
            )
        if self.on_heartbeat is None:
            return
        try:
            self.on_heartbeat(beat.config_version)
        except StoreError:
            self.next_at = now
            raise
        except RedisBeatError as exc:
            log.error("redisbeat: could not sync beat_schedule, will retry: %s", exc)
            self.next_at = now  # again at the next tick

    def _maybe_gauges(self, now: float) -> None:
        """Read the gauges and the beats alive (nothing when no one asks for them)."""
        if now < self._next_gauges or not self.observer.serving or not self.observer.watching:
            return
        self._next_gauges = now + min(GAUGES_EVERY, self.config.heartbeat_seconds)
        try:
            self.observer.heartbeat(self.store)
        except StoreError as exc:
            # The gauges are for watching: a read they cannot do (a permission the beat's
            # user lacks, say) never stops the sending. Said once, until they are read again.
            if not self._gauges_failing:
                log.warning(
                    "redisbeat: could not read the deployment's gauges for the metrics "
                    "(sending goes on; they are read again every %g s): %s%s",
                    min(GAUGES_EVERY, self.config.heartbeat_seconds),
                    exc,
                    GAUGES_ACL if isinstance(exc, StoreRefused) else "",
                )
            self._gauges_failing = True
            return
        self._gauges_failing = False

    def _maybe_sweep(self, now: float) -> None:
        """Forget the store API's spent one-off entries now and then."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(SWEEP_EVERY, self.config.spent_retention_seconds)
        try:
            forgotten = self.store.sweep_spent()
        except RedisBeatError as exc:  # garbage in the index, say: sending goes on
            log.error("redisbeat: could not forget spent entries, will retry: %s", exc)
            return
        if forgotten:
            log.info("redisbeat: forgot %d spent one-off entries", forgotten)
