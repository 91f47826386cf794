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
from typing import Protocol, cast

from ..config import Config
from ..errors import CorruptEntry, MessageRefused
from ..schedule.cache import EntryCache
from ..schedule.catch_up import missed_between, oldest_missed
from ..schedule.delayed import BACKFILL_SOURCE, entry_of
from ..schedule.entry import Entry
from ..schedule.ids import occurrence_id
from ..schedule.kinds import Clocked
from ..schedule.timing import from_ms, to_ms
from ..store import ScheduleStore
from ..store.errors import StoreError
from ..store.keys import bare, lane_of
from ..store.records import Claim, ClaimBatch, Outcome
from .activity import Activity
from .lease import LeaseKeeper
from .observe import Observer
from .policies import Holds

log = logging.getLogger(__name__)

#: Why occurrences were missed: no beat claimed them within their grace (every beat was
#: stopped, or Redis could not be reached).
LATE = "late"


class Sender(Protocol):
    """Where a beat's messages go (:class:`redisbeat.sending.Publisher` for Celery)."""

    def send(self, entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        """Send (or buffer) one occurrence. ``now_ms`` is the Redis clock at the moment of
        sending. Raise :class:`MessageRefused` when the entry's message can never be sent;
        any other error hands the claim back."""

    def flush(self) -> Mapping[str, str | None]:
        """Send what was buffered; the task ids not sent, each with None (the broker failed:
        the claim is handed back) or why the message was refused for its entry."""

    def probe(self) -> None:
        """Return once the broker answers; raise its error while it does not (asked after
        a broker failure, before the beat claims again)."""

    @property
    def expired(self) -> int:
        """Messages sent so far whose expiry had passed before they were sent."""


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
        observer: Observer,
    ) -> None:
        self.store = store
        self.config = config
        self.sender = sender
        self.beat_id = beat_id
        self.leases = leases
        self.activity = activity
        self.observer = observer
        self.entries = EntryCache(config.entry_cache_size)
        self.holds = Holds(store)
        self._quarantined: set[str] = set()
        #: Changes published since the batch was claimed, for the claims it holds ahead.
        self._changed: set[str] = set()
        #: The claims of the last batch handed back because their entry changed meanwhile.
        self.changed_back: set[str] = set()
        #: The entries of the last batch's claims, by claim name.
        self.loaded: dict[str, Entry] = {}
        #: The sender's count of expired messages, as last reported.
        self._expired = 0
        #: Whether the broker failed a send of the last batch (the rest was handed back).
        self.broker_failed = False
        #: What was sent since the last flush, counted once the flush says it went out:
        #: (entry, outcome, how late, whether recovered).
        self._unreported: list[tuple[Entry, Outcome, int, bool]] = []

    def run(self, batch: ClaimBatch, outcomes: list[Outcome], stopping: Callable[[], bool]) -> None:
        """Send the batch, appending an outcome per claim; what was buffered goes out (or is
        handed back) whatever stops the loop."""
        self._changed, self.changed_back = set(), set()
        self.loaded = {}
        self.broker_failed = False
        self.holds.begin(batch)
        try:
            self._send_all(batch, outcomes, stopping)
        finally:
            self._flush(outcomes)

    def _send_all(
        self, batch: ClaimBatch, outcomes: list[Outcome], stopping: Callable[[], bool]
    ) -> None:
        received = time.monotonic()
        for claim in batch.claims:
            if stopping() or self.broker_failed or time.monotonic() > self.leases.deadline():
                # Not started: hand it back so another beat sends it now (one whose broker
                # answers, after a broker failure: this beat tries it before claiming again).
                outcomes.append(Outcome(claim.name, "release", claim.due_ms))
                continue
            try:
                entry = self._load(claim)
            except CorruptEntry as exc:
                self._quarantine(claim.name, claim.definition, exc)
                continue
            self.loaded[claim.name] = entry
            # The Redis clock now, read off the claim's TIME plus the time spent since.
            now_ms = batch.now_ms + int((time.monotonic() - received) * 1000)
            if claim.due_ms > now_ms and not claim.impossible:
                if not self._until_due(claim, claim.due_ms - now_ms, outcomes):
                    continue
                elapsed = int((time.monotonic() - received) * 1000)
                now_ms = max(claim.due_ms, batch.now_ms + elapsed)
            if claim.impossible:
                outcomes.append(self._reschedule(claim.name, entry, now_ms))
                continue
            outcome = self._send(entry, claim, now_ms)
            self._unreported.append((entry, outcome, now_ms - outcome.due_ms, claim.recovered))
            outcomes.append(outcome)

    def _until_due(self, claim: Claim, wait_ms: int, outcomes: list[Outcome]) -> bool:
        """Wait for a claim taken ahead to fall due, what is already due sent meanwhile.

        The claim decided the occurrence: a change made after it applies from the next one.
        A change heard meanwhile is still honoured (False: the claim is handed back, so the
        change decides); its wake-up may arrive too late for that, as redisbeat's
        guarantees say (a delayed task, whose change scripts refuse a held claim, is never
        changed meanwhile)."""
        self._flush(outcomes)
        time.sleep(wait_ms / 1000)
        try:
            self._changed |= self.store.changed_names()
            changed = claim.name in self._changed
        except StoreError:
            changed = True
        if changed:
            outcomes.append(Outcome(claim.name, "release", claim.due_ms))
            self.changed_back.add(claim.name)
        return not changed

    def _load(self, claim: Claim) -> Entry:
        """The entry to send: a periodic one from the cache, a delayed task as a one-off
        (each is sent once: nothing to keep)."""
        if lane_of(claim.name) == "delayed":
            return entry_of(bare(claim.name), claim.definition, claim.due_ms)
        return self.entries.load(claim.definition, claim.name)

    def _send(self, entry: Entry, claim: Claim, now_ms: int) -> Outcome:
        if entry.source == BACKFILL_SOURCE:
            return self._backfill(entry, claim, now_ms)
        due_ms, next_due = self._occurrence(entry, claim, now_ms)
        # Decided once, at the first claim: a re-send after a crash or a deferred one was.
        fresh = not claim.recovered and not claim.deferred
        # Missed occurrences are counted (the summary line, metrics, the occurrence_missed
        # signal), never logged one by one: a beat behind schedule would write a storm.
        if due_ms is None:  # catch_up="all", and every one missed is past the grace
            latest = entry.latest_due_ms(claim.due_ms, claim.claimed_ms, self.config.timezone)
            missed = self._missed(entry, claim, latest + 1)
            return Outcome(claim.name, "skipped", claim.due_ms, next_due, error=LATE, missed=missed)
        missed = self._missed(entry, claim, due_ms) if fresh and due_ms > claim.due_ms else 0
        # A delayed task's claim name (its key after a mark) keeps its ids apart from an entry's.
        task_id = occurrence_id(self.config.key_prefix, claim.name, due_ms)
        # A recovered claim was already decided (and maybe sent) by a beat that died: send
        # the same occurrence again, whatever its lateness now; catch_up="all" chose within
        # the grace already.
        if fresh and entry.catch_up != "all" and entry.is_missed(due_ms, now_ms):
            missed += 1
            return Outcome(claim.name, "skipped", due_ms, next_due, task_id, LATE, missed=missed)
        if entry.jitter or entry.overlap != "allow":
            held = self.holds.hold(entry, claim, due_ms, next_due, task_id, now_ms)
            if held is not None:
                return held
        sent = Outcome(
            claim.name,
            "sent",
            due_ms,
            next_due,
            task_id,
            LATE if missed else "",
            max_runs=entry.max_runs,
            missed=missed,
        )
        return self._hand_over(entry, sent, now_ms)

    def _backfill(self, entry: Entry, claim: Claim, now_ms: int) -> Outcome:
        """A past occurrence ``store.backfill`` sends: under the entry's own occurrence id
        and due time, whenever its delayed task falls due."""
        due_ms = to_ms(cast(Clocked, entry.schedule).at)
        task_id = occurrence_id(self.config.key_prefix, entry.name, due_ms)
        sent = Outcome(claim.name, "sent", claim.due_ms, None, task_id)
        return self._hand_over(entry, sent, now_ms, due_ms)

    def _hand_over(
        self, entry: Entry, sent: Outcome, now_ms: int, due_ms: int | None = None
    ) -> Outcome:
        """Give the occurrence to the sender (its message due at ``due_ms``, else the
        outcome's): ``sent``, or what became of it instead."""
        log.info("Scheduler: Sending due task %s (%s)", entry.name, entry.task)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "redisbeat: %s due %s sent as task %s by beat %s",
                entry.name,
                from_ms(due_ms or sent.due_ms).isoformat(),
                sent.task_id,
                self.beat_id,
            )
        try:
            self.sender.send(entry, sent.task_id, due_ms or sent.due_ms, now_ms)
        except MessageRefused as exc:
            self.holds.unmark(sent.name, sent.task_id)
            return _failed(sent, exc.reason)
        except Exception:
            log.exception("redisbeat: could not send %s; handing it back", entry.name)
            self.holds.unmark(sent.name, sent.task_id)
            self.broker_failed = True
            return Outcome(sent.name, "release", sent.due_ms)
        return sent

    def _missed(self, entry: Entry, claim: Claim, sent_ms: int) -> int:
        """How many occurrences from the claim's due time up to the one it sends were
        missed (a late claim sends one, or only those within the grace)."""
        return missed_between(entry, claim.due_ms, claim.due_ms, sent_ms, self.config.timezone)

    def _occurrence(self, entry: Entry, claim: Claim, now_ms: int) -> tuple[int | None, int | None]:
        """The occurrence a claim sends (None: none) and the entry's next due time."""
        tz = self.config.timezone
        if entry.catch_up == "all":
            # Each one missed in turn, oldest first: the next is due at once until caught up.
            limit = self.config.catch_up_limit
            oldest = oldest_missed(entry, claim.due_ms, claim.claimed_ms, tz, limit)
            if oldest is None:
                latest = entry.latest_due_ms(claim.due_ms, claim.claimed_ms, tz)
                return None, entry.next_due_ms(latest, now_ms, tz)
            return oldest, entry.next_due_ms(oldest, oldest, tz)
        # Claimed a period or more late: the last occurrence due by the claim stands for all
        # those missed (the same one whichever beat sends it, after a crash too).
        due_ms = entry.latest_due_ms(claim.due_ms, claim.claimed_ms, tz)
        # A recovered occurrence may have run already, so it cannot stand in for the ones
        # that fell due while its claim was stuck: those come next, under the catch-up policy.
        return due_ms, entry.next_due_ms(due_ms, due_ms if claim.recovered else now_ms, tz)

    def _reschedule(self, name: str, entry: Entry, now_ms: int) -> Outcome:
        # Its due time in Redis was not a valid time: nothing to send, only a schedule to mend.
        due = entry.first_due_ms(now_ms, self.config.timezone)
        log.warning(
            "redisbeat: entry %r had a due time in Redis that is not a valid time; "
            "rescheduled from its definition to %s",
            entry.name,
            "nothing (no occurrence left)" if due is None else from_ms(due).isoformat(),
        )
        return Outcome(name, "skipped", now_ms, due)

    def _flush(self, outcomes: list[Outcome]) -> None:
        failed = self.sender.flush()
        expired = self.sender.expired
        if expired > self._expired:
            self.observer.expired(expired - self._expired)
            self._expired = expired
        settled: dict[str, Outcome] = {}
        for i, o in enumerate(outcomes if failed else ()):
            if o.action == "sent" and o.task_id in failed:
                reason = failed[o.task_id]
                self.broker_failed |= reason is None
                outcomes[i] = settled[o.task_id] = (
                    Outcome(o.name, "release", o.due_ms) if reason is None else _failed(o, reason)
                )
                self.holds.unmark(o.name, o.task_id)
        self._report(settled)

    def _report(self, settled: Mapping[str, Outcome]) -> None:
        """Count what was sent since the last flush as the flush settled it: a message the
        broker did not take is a hand-back (its missed occurrences are the next claim's to
        count), not a send, in the summary, the metrics and the signals."""
        for entry, outcome, late_ms, recovered in self._unreported:
            if outcome.action == "sent":
                outcome = settled.get(outcome.task_id, outcome)
            self.activity.record(outcome, late_ms, recovered)
            if outcome.action == "sent":
                self.observer.sent(entry, outcome, late_ms, recovered)
            if outcome.missed and outcome.action != "release":
                self.observer.missed(entry, outcome.missed, outcome.error, outcome.due_ms)
        self._unreported.clear()

    def _quarantine(self, name: str, definition: str, exc: CorruptEntry) -> None:
        if self.store.quarantine(name, definition, str(exc), self.beat_id) or (
            name not in self._quarantined
        ):
            log.error(
                "redisbeat: entry %r is corrupt and was set aside: %s; write it again (`celery "
                "redisbeat quarantine restore %s --file FIXED.json`, or its source's sync)",
                name,
                exc,
                name,
            )
            self.observer.quarantined(name, str(exc))
        self._quarantined.add(name)


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
