"""Dispatcher: one beat's loop step, independent of Celery.

Claim the due occurrences, send them (:mod:`.batch`), finish the batch, and say how long to
wait. Redis trouble is expected: an outage, and error replies too (out of memory, a read-only
replica, an ACL denial, a key of the wrong type). The dispatcher says which once
(:mod:`.outage`), backs off, keeps any batch it could not finish, and carries on when Redis
answers normally again. A store this release cannot work with (:class:`StoreIncompatible`:
a server too old, a newer stored format) is no such trouble: it leaves
:meth:`Dispatcher.tick`, and the beat stops. Nor, after a few attempts, is a login refused
or a database the server lacks (:data:`~.outage.FATAL_KINDS`).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable

from ..config import Config
from ..store import ScheduleStore
from ..store.errors import RedisTrouble, StoreError, StoreIncompatible, StoreRefused
from ..store.records import ClaimBatch, FinishResult, Outcome
from .activity import Activity
from .batch import BatchSender, Sender
from .heartbeats import Heartbeats
from .lease import LeaseKeeper
from .observe import Observer
from .outage import PROBE_INTERVAL, BrokerOutage, Outage

log = logging.getLogger(__name__)

#: How far the Redis clock worked out from the last claim may be off.
CLOCK_MARGIN_MS = 2000


def make_beat_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Dispatcher:
    """One beat's loop, step by step: :meth:`tick` works, :meth:`wait` waits."""

    def __init__(
        self,
        store: ScheduleStore,
        config: Config,
        sender: Sender,
        *,
        beat_id: str | None = None,
        on_heartbeat: Callable[[str | None], None] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.beat_id = beat_id or make_beat_id()
        self.stop_requested = False
        self.leases = LeaseKeeper(store, self.beat_id, config.lease_seconds)
        self.activity = Activity(config.summary_seconds)
        self.observer = Observer(
            self.beat_id, self.activity, config.quarantine_after, config.persistence_warning
        )
        self.batches = BatchSender(
            store, config, sender, self.beat_id, self.leases, self.activity, self.observer
        )
        self.outage = Outage(lambda: store.where)
        self.broker = BrokerOutage(sender.probe)
        self.heartbeats = Heartbeats(store, config, self.beat_id, self.observer, on_heartbeat)
        self._unfinished: tuple[int, list[Outcome]] | None = None
        #: Why this beat cannot listen for changes, while it cannot.
        self._deaf: RedisTrouble | None = None
        #: When the next claim is needed (monotonic): by the earliest score the last claim or
        #: finish saw, or the loop interval. Until then a wake-up for the heartbeat claims
        #: nothing; a change heard on the events channel (new, edited, handed-back entries)
        #: brings it forward to now.
        self._claim_by = 0.0
        #: The Redis clock (ms) at the last claim, and the monotonic time it was asked for.
        self._clock: tuple[int, float] | None = None
        #: Set when a claim failed: the earliest Redis time a claim whose reply was lost ran.
        self._lost_since: int | None = None
        #: Whether the last claim left something due: a beat behind claims only what is due,
        #: since waiting for an occurrence claimed ahead would hold back the backlog.
        self._behind = False

    # -- the loop step ------------------------------------------------------------------------

    def tick(self) -> float:
        """Do one round of work; return how many seconds to wait before the next."""
        try:
            self.heartbeats.maybe()
            self._finish_leftovers()
            self._hand_back_lost()
            if self._listen():
                self._claim_by = 0.0
            if time.monotonic() < self._claim_by and not self.stop_requested:
                return self._sleep_until_claim()
            if not self.broker.reachable():
                self._claim_by = 0.0
                return PROBE_INTERVAL
            batch, outcomes = self._claim_and_send()
            now_ms, next_due_ms = batch.now_ms, batch.next_due_ms
            if batch.claims:
                finished = self._finish_leftovers()
                if finished is not None:
                    now_ms, next_due_ms = finished.now_ms, finished.next_due_ms
        except StoreIncompatible:
            raise  # retrying cannot help: the beat stops
        except StoreError as exc:
            delay = self._backoff(exc)
            self.outage.give_up()  # a login refused, say, after its last attempt
            return delay
        self.outage.over()
        self.observer.summary(self.store)
        # A claim handed back because its entry changed while it was held is no trouble.
        changed = self.batches.changed_back
        if any(o.action == "release" and o.name not in changed for o in outcomes) and (
            not self.stop_requested
        ):
            return self._backoff(None)
        self.outage.failures = 0
        if self.stop_requested or len(batch.claims) >= self.config.batch_size:
            return 0.0
        return self._delay(now_ms, next_due_ms)

    def _claim_and_send(self) -> tuple[ClaimBatch, list[Outcome]]:
        # The lease runs from the moment Redis ran the claim, which is no earlier than this:
        # a reply delayed on the way back must not stretch the time to send.
        requested = time.monotonic()
        asked_ms = self._redis_now_ms(requested)
        try:
            batch = self.store.claim(
                self.beat_id,
                self.config.lease_ms,
                self.config.batch_size,
                # A beat that cannot hear changes could not tell that an entry it holds
                # ahead was changed meanwhile: it claims only what is due.
                0 if self._deaf is not None or self._behind else self.config.claim_ahead_ms,
            )
        except StoreError:
            # The claim may have run with its reply lost: hand such claims back once Redis
            # answers, rather than leave them to their lease.
            self._lost_since = min(self._lost_since or asked_ms, asked_ms)
            raise
        self._clock = (batch.now_ms, requested)
        self._behind = batch.next_due_ms is not None and batch.next_due_ms <= batch.now_ms
        self.observer.claimed(len(batch.claims))
        outcomes: list[Outcome] = []
        # Registered before sending, so a failure mid-batch still finishes what was sent.
        self._unfinished = (batch.lease_until_ms, outcomes)
        if batch.claims:
            self.leases.hold(batch.lease_until_ms, [c.name for c in batch.claims], requested)
            try:
                self.batches.run(batch, outcomes, lambda: self.stop_requested)
            finally:
                self._unfinished = (self.leases.release(), outcomes)
                self.broker.settled(self.batches.broker_failed, outcomes)
        return batch, outcomes

    def _redis_now_ms(self, at: float) -> int:
        """The Redis clock at the monotonic time ``at``, from the last claim's (0: unknown),
        less a margin for the two clocks' drift."""
        if self._clock is None:
            return 0
        redis_ms, then = self._clock
        return redis_ms + int((at - then) * 1000) - CLOCK_MARGIN_MS

    def _hand_back_lost(self) -> None:
        if self._lost_since is None:
            return
        # No claim this beat knows of is in hand here: any other it holds was lost.
        count = self.store.expire_lost(self.beat_id, self._lost_since, self.config.lease_ms)
        self._lost_since = None
        if count:
            self._claim_by = 0.0
            log.warning(
                "redisbeat: handed back %d claim(s) whose reply was lost with the connection",
                count,
            )

    def _listen(self) -> bool:
        """Subscribe to changes before claiming (again after a reconnect), so none published
        from then on is missed; True when one was heard, or may have been missed."""
        if self._deaf is not None:
            # It cannot hear what was added meanwhile: every shard may hold something due.
            self.store.may_have_changed()
            return False
        try:
            return self.store.changes_pending()
        except StoreRefused as exc:
            self._cannot_listen(exc)
            return True

    def _sleep_until_claim(self) -> float:
        return max(0.0, min(self._claim_by, self.heartbeats.next_wake()) - time.monotonic())

    def _finish_leftovers(self) -> FinishResult | None:
        if self._unfinished is None:
            return None
        lease_until, outcomes = self._unfinished
        result = None
        if outcomes:
            result = self.store.finish(
                self.beat_id, lease_until, outcomes, self.config.quarantine_after
            )
            self.observer.finished(result, outcomes, self.batches.loaded)
        self._unfinished = None
        return result

    # -- waiting ------------------------------------------------------------------------------

    def _delay(self, now_ms: int, next_due_ms: int | None) -> float:
        delay = self.config.max_loop_interval
        if next_due_ms is not None:
            delay = min(delay, max(0.0, (next_due_ms - now_ms) / 1000))
        # Only a beat that hears changes can skip claims until then.
        self._claim_by = time.monotonic() + delay if self._deaf is None else 0.0
        return min(delay, max(0.0, self.heartbeats.next_wake() - time.monotonic()))

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``; a schedule change wakes the beat at once."""
        if seconds <= 0:
            return
        if self.outage.troubled:
            self._claim_by = 0.0
            time.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        try:
            if self.store.wait_for_change(seconds):
                self._claim_by = 0.0
        except StoreRefused as exc:
            self._cannot_listen(exc)
            time.sleep(max(0.0, deadline - time.monotonic()))
        except StoreError as exc:
            self._backoff(exc)
        else:
            if self._deaf is not None:
                log.warning("redisbeat: this beat listens for changes again")
                self._deaf = None

    def _cannot_listen(self, exc: StoreRefused) -> None:
        # Listening was refused (an ACL without the events channel, say): the beat works on,
        # and notices changes when it next wakes up on its own.
        self._claim_by = 0.0
        if self._deaf is None:
            self._deaf = exc.trouble
            log.warning(
                "redisbeat: %s; this beat cannot listen for changes on %s and notices "
                "them only when it next wakes up",
                self._deaf.describe(self.store.describe()),
                self.store.channel,
            )

    def _backoff(self, exc: StoreError | None) -> float:
        self._claim_by = 0.0
        if exc is not None:
            self.observer.redis_error(exc)
            # Redis may have restarted, and lost its data: the first tick that reaches it
            # heartbeats, which notices a lost beat_schedule (or layout, or schedule) at once.
            self.heartbeats.after_trouble()
        return self.outage.delay(exc)

    def close(self) -> None:
        """Finish what is in hand and deregister; Redis trouble here is logged, not raised."""
        try:
            self.leases.close()
            self._finish_leftovers()
            self.store.deregister(self.beat_id)
            log.info("redisbeat: beat %s stopped and deregistered", self.beat_id)
        except StoreIncompatible:
            pass  # said once, where the beat stopped
        except StoreError as exc:
            if not self.outage.gave_up:  # else said once, where the beat stopped
                log.warning(
                    "redisbeat: beat %s stopped without reaching Redis (%s): the claims it "
                    "held go to the other beats when their lease ends, and it leaves the "
                    "beats listed after three heartbeat periods",
                    self.beat_id,
                    exc,
                )
        finally:
            self.observer.stopped()
            self.store.close()
