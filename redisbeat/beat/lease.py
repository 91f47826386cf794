"""LeaseKeeper: keeps the lease of the batch a beat has in hand alive while it is sent.

A claim's lease is short (a few seconds), so the occurrences a killed beat held are sent by
another beat soon after. A batch normally takes milliseconds; when it takes longer (a slow
or stalled broker, a long garbage-collection pause) a thread of its own renews the lease
every third of it, so no other beat takes over an occurrence that is still being sent.
"""

from __future__ import annotations

import logging
import threading
import time

from ..store import ScheduleStore
from ..store.errors import StoreError

log = logging.getLogger(__name__)

#: Renew when this share of the lease has passed since the claim or the last renewal.
RENEW_AFTER = 1 / 3
#: Stop sending a batch when less than this share of its lease is left.
LEASE_SAFETY = 0.2


class LeaseKeeper:
    """Renews one beat's claims in hand, from a daemon thread started at the first batch."""

    def __init__(self, store: ScheduleStore, beat_id: str, lease_seconds: float) -> None:
        self.store = store
        self.beat_id = beat_id
        self.lease_seconds = lease_seconds
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: The batch in hand: the lease_until its claims hold now, and their names.
        self._lease_until = 0
        self._names: list[str] | None = None
        #: When (monotonic) the current lease was asked for, and when to renew it.
        self._since = 0.0
        self._renew_at = 0.0

    def hold(self, lease_until_ms: int, names: list[str], requested: float) -> None:
        """Keep the claims on ``names`` (leased until ``lease_until_ms``, asked for at the
        monotonic time ``requested``) alive until :meth:`release`."""
        with self._cond:
            self._lease_until, self._names = lease_until_ms, names
            self._since = requested
            self._renew_at = requested + self.lease_seconds * RENEW_AFTER
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="redisbeat-lease", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def deadline(self) -> float:
        """The monotonic time after which sending on is unsafe: the lease may have ended."""
        with self._cond:
            return self._since + self.lease_seconds * (1 - LEASE_SAFETY)

    def release(self) -> int:
        """Stop renewing (waiting for a renewal under way); the lease_until the claims hold."""
        with self._cond:
            self._names = None
            return self._lease_until

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._names = None
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._names is None:
                    self._cond.wait()
                    continue
                wait = self._renew_at - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                self._renew(self._names)

    def _renew(self, names: list[str]) -> None:
        # Under the lock: release() waits for it, so finish uses the lease the claims hold.
        requested = time.monotonic()
        try:
            self._lease_until = self.store.renew(
                self.beat_id, self._lease_until, names, int(self.lease_seconds * 1000)
            )
        except StoreError as exc:
            # The beat's own next call will meet the same trouble and say so; try again soon.
            log.debug("redisbeat: could not renew a lease: %s", exc)
            # From now, not from the request: after a renewal that waited out a socket
            # timeout, _run still waits (letting release() take the lock) before the next.
            self._renew_at = time.monotonic() + self.lease_seconds * RENEW_AFTER / 2
            return
        self._since = requested
        self._renew_at = requested + self.lease_seconds * RENEW_AFTER
        log.info("redisbeat: renewed the lease of %d claim(s) still being sent", len(names))
