"""Dispatcher: one beat's loop step, independent of Celery.

Claim the due occurrences, send each (through a callable the Celery adapter supplies),
finish the batch, and say how long to wait. Redis trouble is expected: an outage, and error
replies too (out of memory, a read-only replica, an ACL denial, a key of the wrong type). The
dispatcher logs one line saying which, backs off, keeps any batch it could not finish, and
carries on when Redis answers normally again.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

import redis

from .activity import Activity
from .cache import EntryCache
from .config import Config
from .entry import Entry, occurrence_id
from .errors import CorruptEntry, MessageRefused, RedisBeatError, RedisTrouble
from .lease import LeaseKeeper
from .records import Claim, ClaimBatch, FinishResult, Outcome
from .store import ScheduleStore
from .timing import from_ms

log = logging.getLogger(__name__)

#: publish(entry, task_id, due_ms, now_ms): send one occurrence; raise to hand the claim back.
#: ``now_ms`` is the Redis clock at the moment of sending (the clock every beat shares).
Publish = Callable[[Entry, str, int, int], None]
#: flush(): for a publish that buffers, send the batch; returns the task ids not sent, each
#: with None (the broker failed: the claim is handed back) or the reason the message was
#: refused for its entry (the occurrence is recorded as failed).
Flush = Callable[[], Mapping[str, str | None]]

MIN_BACKOFF = 0.5
MAX_BACKOFF = 10.0
#: While Redis cannot be reached, try it this often (seconds): a refused connection costs
#: nothing, and the beats must be back within a fraction of a second of Redis.
PROBE_INTERVAL = 0.2
#: How far the Redis clock worked out from the last claim may be off.
CLOCK_MARGIN_MS = 2000


def make_beat_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Dispatcher:
    def __init__(
        self,
        store: ScheduleStore,
        config: Config,
        publish: Publish,
        *,
        flush: Flush | None = None,
        beat_id: str | None = None,
        on_heartbeat: Callable[[str | None], None] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.publish = publish
        self.flush = flush
        self.entries = EntryCache(config.entry_cache_size)
        self.beat_id = beat_id or make_beat_id()
        #: Called at every heartbeat with the version of the beat_schedule the deployment
        #: follows (None: none, or Redis lost its data); retried at the next tick if it fails.
        self.on_heartbeat = on_heartbeat
        self.stop_requested = False
        self._next_heartbeat = 0.0
        self._unfinished: tuple[int, list[Outcome]] | None = None
        self._failures = 0
        self._down_since: float | None = None
        #: The latest trouble of the current episode, and every kind logged in it (once each).
        self._trouble: RedisTrouble | None = None
        self._logged: set[tuple[str, str | None]] = set()
        #: Why this beat cannot listen for changes, while it cannot.
        self._deaf: RedisTrouble | None = None
        self._quarantined: set[str] = set()
        #: (entry, what) pairs of bad data already logged: each is said once per process.
        self._told: set[tuple[str, str]] = set()
        #: When the next claim is needed (monotonic): by the earliest score the last claim or
        #: finish saw, or the loop interval. Until then a wake-up for the heartbeat claims
        #: nothing; a change heard on the events channel (new, edited, handed-back entries)
        #: brings it forward to now.
        self._claim_by = 0.0
        self.leases = LeaseKeeper(store, self.beat_id, config.lease_seconds)
        self.activity = Activity()
        #: The Redis clock (ms) at the last claim, and the monotonic time it was asked for.
        self._clock: tuple[int, float] | None = None
        #: Set when a claim failed: the earliest Redis time a claim whose reply was lost ran.
        self._lost_since: int | None = None

    # -- the loop step ------------------------------------------------------------------------

    def tick(self) -> float:
        """Do one round of work; return how many seconds to wait before the next."""
        try:
            self._maybe_heartbeat()
            self._finish_leftovers()
            self._hand_back_lost()
            if self._listen():
                self._claim_by = 0.0
            if time.monotonic() < self._claim_by and not self.stop_requested:
                return self._sleep_until_claim()
            batch, outcomes = self._claim_and_send()
            now_ms, next_due_ms = batch.now_ms, batch.next_due_ms
            if batch.claims:
                finished = self._finish_leftovers()
                if finished is not None:
                    now_ms, next_due_ms = finished.now_ms, finished.next_due_ms
        except (redis.RedisError, OSError) as exc:
            return self._backoff(exc)
        self._recovered()
        self.activity.report()
        if any(o.action == "release" for o in outcomes) and not self.stop_requested:
            return self._backoff(None)
        self._failures = 0
        if self.stop_requested or len(batch.claims) >= self.config.batch_size:
            return 0.0
        return self._delay(now_ms, next_due_ms)

    def _claim_and_send(self) -> tuple[ClaimBatch, list[Outcome]]:
        # The lease runs from the moment Redis ran the claim, which is no earlier than this:
        # a reply delayed on the way back must not stretch the time to send.
        requested = time.monotonic()
        asked_ms = self._redis_now_ms(requested)
        try:
            batch = self.store.claim(self.beat_id, self.config.lease_ms, self.config.batch_size)
        except (redis.RedisError, OSError):
            # The claim may have run with its reply lost: hand such claims back once Redis
            # answers, rather than leave them to their lease.
            self._lost_since = min(self._lost_since or asked_ms, asked_ms)
            raise
        self._clock = (batch.now_ms, requested)
        outcomes: list[Outcome] = []
        # Registered before sending, so a failure mid-batch still finishes what was sent.
        self._unfinished = (batch.lease_until_ms, outcomes)
        if batch.claims:
            self.leases.hold(batch.lease_until_ms, [c.name for c in batch.claims], requested)
            try:
                self._handle(batch, outcomes)
            finally:
                self._unfinished = (self.leases.release(), outcomes)
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
            return False
        try:
            return self.store.changes_pending()
        except redis.ResponseError as exc:
            self._cannot_listen(exc)
            return True

    def _sleep_until_claim(self) -> float:
        return max(0.0, min(self._claim_by, self._next_heartbeat) - time.monotonic())

    def _handle(self, batch: ClaimBatch, outcomes: list[Outcome]) -> None:
        try:
            self._send_all(batch, outcomes)
        finally:
            # Whatever stopped the loop, what was buffered goes out (or is handed back).
            self._flush(outcomes)

    def _send_all(self, batch: ClaimBatch, outcomes: list[Outcome]) -> None:
        received = time.monotonic()
        for claim in batch.claims:
            if self.stop_requested or time.monotonic() > self.leases.deadline():
                # Not started: hand it back so another beat sends it now.
                outcomes.append(Outcome(claim.name, "release", claim.due_ms))
                continue
            try:
                entry = self.entries.load(claim.definition, claim.name)
            except CorruptEntry as exc:
                self._quarantine(claim.name, claim.definition, exc)
                continue
            # The Redis clock now, read off the claim's TIME plus the time spent since.
            now_ms = batch.now_ms + int((time.monotonic() - received) * 1000)
            if claim.impossible:
                outcomes.append(self._reschedule(entry, now_ms))
                continue
            outcome = self._send(entry, claim, now_ms)
            self.activity.record(outcome, now_ms - outcome.due_ms, claim.recovered)
            outcomes.append(outcome)

    def _send(self, entry: Entry, claim: Claim, now_ms: int) -> Outcome:
        tz = self.store.timezone
        recovered = claim.recovered
        # Claimed a period or more late: the last occurrence due by the claim stands for all
        # those missed (the same one whichever beat sends it, after a crash too).
        due_ms = entry.latest_due_ms(claim.due_ms, claim.claimed_ms, tz)
        # A recovered occurrence may have run already, so it cannot stand in for the ones
        # that fell due while its claim was stuck: those come next, under the catch-up policy.
        next_due = entry.next_due_ms(due_ms, due_ms if recovered else now_ms, tz)
        task_id = occurrence_id(self.config.key_prefix, entry.name, due_ms)
        # A recovered claim was already decided (and maybe sent) by a beat that died: send
        # the same occurrence again, whatever its lateness now.
        if not recovered and entry.is_missed(due_ms, now_ms):
            log.info(
                "redisbeat: %s missed its occurrence due %d ms ago; skipped (catch_up=%s)",
                entry.name,
                now_ms - due_ms,
                entry.catch_up,
            )
            return Outcome(entry.name, "skipped", due_ms, next_due)
        sent = Outcome(entry.name, "sent", due_ms, next_due, task_id)
        try:
            self.publish(entry, task_id, due_ms, now_ms)
        except MessageRefused as exc:
            return self._failed(sent, exc.reason)
        except Exception:
            log.exception("redisbeat: could not send %s; handing it back", entry.name)
            return Outcome(entry.name, "release", due_ms)
        return sent

    def _reschedule(self, entry: Entry, now_ms: int) -> Outcome:
        # Its due time in Redis was not a valid time: nothing to send, only a schedule to mend.
        due = entry.first_due_ms(now_ms, self.store.timezone)
        log.warning(
            "redisbeat: entry %r had a due time in Redis that is not a valid time; "
            "rescheduled from its definition to %s",
            entry.name,
            "nothing (no occurrence left)" if due is None else from_ms(due).isoformat(),
        )
        return Outcome(entry.name, "skipped", now_ms, due)

    def _once(self, name: str, what: str) -> bool:
        """True the first time this beat meets ``what`` about entry ``name``."""
        if (name, what) in self._told:
            return False
        self._told.add((name, what))
        return True

    def _failed(self, sent: Outcome, reason: str) -> Outcome:
        # Sending it again would fail the same way: the occurrence is recorded as failed and
        # the entry moves on to its next one, so it never holds up the others.
        log.error(
            "redisbeat: entry %r could not be sent: %s; its occurrence due at %s is recorded "
            "as failed",
            sent.name,
            reason,
            from_ms(sent.due_ms).isoformat(),
        )
        return replace(sent, action="failed", error=reason)

    def _flush(self, outcomes: list[Outcome]) -> None:
        if self.flush is None:
            return
        failed = self.flush()
        if failed:
            for i, o in enumerate(outcomes):
                if o.action == "sent" and o.task_id in failed:
                    reason = failed[o.task_id]
                    outcomes[i] = (
                        Outcome(o.name, "release", o.due_ms)
                        if reason is None
                        else self._failed(o, reason)
                    )

    def _finish_leftovers(self) -> FinishResult | None:
        if self._unfinished is None:
            return None
        lease_until, outcomes = self._unfinished
        result = None
        if outcomes:
            result = self.store.finish(
                self.beat_id, lease_until, outcomes, self.config.quarantine_after
            )
            for name, what in result.garbled.items():
                if self._once(name, f"state: {what}"):
                    log.warning(
                        "redisbeat: entry %r: its run state in Redis was not what redisbeat "
                        "wrote (%s); rewritten, keeping the fields that were valid",
                        name,
                        what,
                    )
            for name in result.quarantined:
                error = next((o.error for o in outcomes if o.name == name), "")
                log.error(
                    "redisbeat: entry %r was set aside after %d failed sends in a row (last: %s); "
                    "saving the entry again releases it",
                    name,
                    self.config.quarantine_after,
                    error,
                )
        self._unfinished = None
        return result

    def _quarantine(self, name: str, definition: str, exc: CorruptEntry) -> None:
        if self.store.quarantine(name, definition, str(exc), self.beat_id) or (
            name not in self._quarantined
        ):
            log.error("redisbeat: entry %r is corrupt and was set aside: %s", name, exc)
        self._quarantined.add(name)

    def _maybe_heartbeat(self) -> None:
        now = time.monotonic()
        if now < self._next_heartbeat:
            return
        beat = self.store.heartbeat(self.beat_id)
        self._next_heartbeat = now + self.config.heartbeat_seconds
        for name, score in beat.beyond:
            # Past any valid time (+inf, say), so never due: mended here, said once.
            what = self.store.repair(name, score, self.beat_id)
            log.warning(
                "redisbeat: entry %r had a due time in Redis that is not a valid time (%s); %s",
                name,
                score,
                what,
            )
        version = beat.config_version
        if self.on_heartbeat is None:
            return
        try:
            self.on_heartbeat(version)
        except RedisBeatError as exc:
            log.error("redisbeat: could not sync beat_schedule, will retry: %s", exc)
            self._next_heartbeat = now  # again at the next tick
        except (redis.RedisError, OSError):
            self._next_heartbeat = now
            raise

    # -- waiting ------------------------------------------------------------------------------

    def _delay(self, now_ms: int, next_due_ms: int | None) -> float:
        delay = self.config.max_loop_interval
        if next_due_ms is not None:
            delay = min(delay, max(0.0, (next_due_ms - now_ms) / 1000))
        # Only a beat that hears changes can skip claims until then.
        self._claim_by = time.monotonic() + delay if self._deaf is None else 0.0
        return min(delay, max(0.0, self._next_heartbeat - time.monotonic()))

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``; a schedule change wakes the beat at once."""
        if seconds <= 0:
            return
        if self._down_since is not None or self._failures:
            self._claim_by = 0.0
            time.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        try:
            if self.store.wait_for_change(seconds):
                self._claim_by = 0.0
        except redis.ResponseError as exc:
            self._cannot_listen(exc)
            time.sleep(max(0.0, deadline - time.monotonic()))
        except (redis.RedisError, OSError) as exc:
            self._backoff(exc)
        else:
            if self._deaf is not None:
                log.warning("redisbeat: this beat listens for changes again")
                self._deaf = None

    def _cannot_listen(self, exc: redis.ResponseError) -> None:
        # Listening was refused (an ACL without the events channel, say): the beat works on,
        # and notices changes when it next wakes up on its own.
        self._claim_by = 0.0
        if self._deaf is None:
            self._deaf = RedisTrouble.of(exc)
            log.warning(
                "redisbeat: %s; this beat cannot listen for changes on %s and notices "
                "them only when it next wakes up",
                self._deaf.describe(self.store.describe()),
                self.store.keys.events,
            )

    # -- outages and refusals -----------------------------------------------------------------

    def _backoff(self, exc: BaseException | None) -> float:
        self._claim_by = 0.0
        trouble = None if exc is None else RedisTrouble.of(exc)
        if trouble is not None and trouble.kind == "unavailable":
            delay = PROBE_INTERVAL
        else:
            # Redis answers but refuses (or the broker fails): back off, doubling.
            self._failures += 1
            delay = min(MAX_BACKOFF, MIN_BACKOFF * 2.0 ** (self._failures - 1))
        if trouble is not None:
            if self._down_since is None:
                self._down_since = time.monotonic()
            # One line per kind of trouble for the whole episode, however many ticks it lasts.
            if (trouble.kind, trouble.key) not in self._logged:
                self._logged.add((trouble.kind, trouble.key))
                log.error(
                    "redisbeat: %s; %s",
                    trouble.describe(self.store.describe()),
                    f"trying again every {delay} s"
                    if trouble.kind == "unavailable"
                    else "retrying with backoff",
                )
            self._trouble = trouble
        return delay

    def _recovered(self) -> None:
        if self._down_since is None:
            return
        seconds = time.monotonic() - self._down_since
        if self._trouble is None or self._trouble.kind == "unavailable":
            log.warning("redisbeat: Redis is available again after %.1f s", seconds)
        else:
            log.warning(
                "redisbeat: Redis at %s answers normally again after %.1f s (it was %s)",
                self.store.describe(),
                seconds,
                self._trouble.was,
            )
        self._down_since = None
        self._trouble = None
        self._logged.clear()

    def close(self) -> None:
        """Finish what is in hand and deregister; Redis trouble here is logged, not raised."""
        try:
            self.leases.close()
            self._finish_leftovers()
            self.store.deregister(self.beat_id)
            log.info("redisbeat: beat %s stopped and deregistered", self.beat_id)
        except (redis.RedisError, OSError) as exc:
            log.warning("redisbeat: could not deregister beat %s: %s", self.beat_id, exc)
        finally:
            self.store.close()
