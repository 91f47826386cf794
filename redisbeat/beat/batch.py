"""Sending a claimed batch: what each claim becomes (sent, skipped, failed or handed back).

For each claim the beat works out which occurrence it stands for, its task id and the next
due time, decides whether the catch-up policy skips it, and hands the message to the
:class:`Sender`. Nothing here talks to Redis but to set aside a definition that cannot load.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from ..config import Config
from ..errors import CorruptEntry, MessageRefused
from ..schedule.cache import EntryCache
from ..schedule.entry import Entry, occurrence_id
from ..schedule.timing import from_ms
from ..store import ScheduleStore
from ..store.errors import StoreError
from ..store.records import Claim, ClaimBatch, Outcome
from .activity import Activity
from .lease import LeaseKeeper

log = logging.getLogger(__name__)

#: Claims taken ahead that fall due within this many ms of each other are waited for
#: together and checked in one read of Redis (so each may go out up to this much later).
GROUP_MS = 2


class Sender(Protocol):
    """Where a beat's messages go (:class:`redisbeat.sending.Publisher` for Celery)."""

    def send(self, entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        """Send (or buffer) one occurrence. ``now_ms`` is the Redis clock at the moment of
        sending. Raise :class:`MessageRefused` when the entry's message can never be sent;
        any other error hands the claim back."""

    def flush(self) -> Mapping[str, str | None]:
        """Send what was buffered; the task ids not sent, each with None (the broker failed:
        the claim is handed back) or why the message was refused for its entry."""


class BatchSender:
    """Turns one claimed batch into outcomes, sending through a :class:`Sender`."""

    def __init__(
        self,
        store: ScheduleStore,
        config: Config,
        sender: Sender,
        beat_id: str,
        leases: LeaseKeeper,
        activity: Activity,
    ) -> None:
        self.store = store
        self.config = config
        self.sender = sender
        self.beat_id = beat_id
        self.leases = leases
        self.activity = activity
        self.entries = EntryCache(config.entry_cache_size)
        self._quarantined: set[str] = set()
        #: Of the batch's claims taken ahead: those changed since (handed back), and those
        #: found unchanged once due (sent).
        self._changed: set[str] = set()
        self._verified: set[str] = set()
        #: The claims of the last batch handed back because their entry changed meanwhile.
        self.changed_back: set[str] = set()

    def run(self, batch: ClaimBatch, outcomes: list[Outcome], stopping: Callable[[], bool]) -> None:
        """Send the batch, appending an outcome per claim; what was buffered goes out (or is
        handed back) whatever stops the loop."""
        self._changed, self._verified, self.changed_back = set(), set(), set()
        try:
            self._send_all(batch, outcomes, stopping)
        finally:
            self._flush(outcomes)

    def _send_all(
        self, batch: ClaimBatch, outcomes: list[Outcome], stopping: Callable[[], bool]
    ) -> None:
        received = time.monotonic()
        for i, claim in enumerate(batch.claims):
            if stopping() or time.monotonic() > self.leases.deadline():
                # Not started: hand it back so another beat sends it now.
                outcomes.append(Outcome(claim.name, "release", claim.due_ms))
                continue
            try:
                entry = self.entries.load(claim.definition, claim.name)
            except CorruptEntry as exc:
                self._quarantine(claim.name, claim.definition, exc)
                continue
            if claim.impossible:
                outcomes.append(self._reschedule(entry, _redis_now(batch, received)))
                continue
            # Taken ahead of its due time: sent only once due, and only if unchanged by then.
            if claim.due_ms > batch.now_ms and not self._until_due(batch, i, received, outcomes):
                continue
            now_ms = max(claim.due_ms, _redis_now(batch, received))
            outcome = self._send(entry, claim, now_ms)
            self.activity.record(outcome, now_ms - outcome.due_ms, claim.recovered)
            outcomes.append(outcome)

    def _until_due(
        self, batch: ClaimBatch, i: int, received: float, outcomes: list[Outcome]
    ) -> bool:
        """Wait for the claim ``batch.claims[i]``, taken ahead, to fall due, what is already
        due sent meanwhile; False when the entry was changed (edited, disabled, removed, run
        now) before it fell due: the claim is handed back, so the change decides what is
        sent, as if it had been made before the claim. Whether it changed is read from
        Redis once it is due, for it and the claims due by then, so a change made a moment
        before is never missed."""
        claim = batch.claims[i]
        # Those falling due within a moment of it are waited for with it: one read for all.
        last_ms = max(c.due_ms for c in batch.claims[i:] if c.due_ms <= claim.due_ms + GROUP_MS)
        wait_ms = last_ms - _redis_now(batch, received)
        while claim.name not in self._verified and claim.name not in self._changed:
            if wait_ms > 0:
                self._flush(outcomes)  # what is due goes out meanwhile
                time.sleep(wait_ms / 1000)
            due_by = max(last_ms, _redis_now(batch, received))
            ahead = [c for c in batch.claims[i:] if batch.now_ms < c.due_ms <= due_by]
            try:
                redis_ms, changed = self.store.changed_since_claimed(ahead)
            except StoreError:
                changed, redis_ms = {claim.name}, 0
            self._changed |= changed
            self._verified.update(c.name for c in ahead if c.due_ms <= redis_ms)
            wait_ms = last_ms - redis_ms  # woken early by this host's clock: wait on
        if claim.name in self._changed:
            outcomes.append(Outcome(claim.name, "release", claim.due_ms))
            self.changed_back.add(claim.name)
            return False
        return True

    def _send(self, entry: Entry, claim: Claim, now_ms: int) -> Outcome:
        tz = self.config.timezone
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
        log.info("Scheduler: Sending due task %s (%s)", entry.name, entry.task)
        try:
            self.sender.send(entry, task_id, due_ms, now_ms)
        except MessageRefused as exc:
            return _failed(sent, exc.reason)
        except Exception:
            log.exception("redisbeat: could not send %s; handing it back", entry.name)
            return Outcome(entry.name, "release", due_ms)
        return sent

    def _reschedule(self, entry: Entry, now_ms: int) -> Outcome:
        # Its due time in Redis was not a valid time: nothing to send, only a schedule to mend.
        due = entry.first_due_ms(now_ms, self.config.timezone)
        log.warning(
            "redisbeat: entry %r had a due time in Redis that is not a valid time; "
            "rescheduled from its definition to %s",
            entry.name,
            "nothing (no occurrence left)" if due is None else from_ms(due).isoformat(),
        )
        return Outcome(entry.name, "skipped", now_ms, due)

    def _flush(self, outcomes: list[Outcome]) -> None:
        failed = self.sender.flush()
        if not failed:
            return
        for i, o in enumerate(outcomes):
            if o.action == "sent" and o.task_id in failed:
                reason = failed[o.task_id]
                outcomes[i] = (
                    Outcome(o.name, "release", o.due_ms) if reason is None else _failed(o, reason)
                )

    def _quarantine(self, name: str, definition: str, exc: CorruptEntry) -> None:
        if self.store.quarantine(name, definition, str(exc), self.beat_id) or (
            name not in self._quarantined
        ):
            log.error("redisbeat: entry %r is corrupt and was set aside: %s", name, exc)
        self._quarantined.add(name)


def _redis_now(batch: ClaimBatch, received: float) -> int:
    """The Redis clock now, read off the claim's TIME plus the time spent since."""
    return batch.now_ms + int((time.monotonic() - received) * 1000)


def _failed(sent: Outcome, reason: str) -> Outcome:
    # Sending it again would fail the same way: the occurrence is recorded as failed and
    # the entry moves on to its next one, so it never holds up the others.
    log.error(
        "redisbeat: entry %r could not be sent: %s; its occurrence due at %s is recorded as failed",
        sent.name,
        reason,
        from_ms(sent.due_ms).isoformat(),
    )
    return replace(sent, action="failed", error=reason)
