"""The policies that may hold an occurrence back when it falls due: jitter and overlap.

Both defer the claim rather than wait in the beat: the finish keeps the occurrence as a
lease without a beat that ends when it is to be sent (:mod:`redisbeat.store`'s ``defer``),
so any beat sends it then, under its own task id, and a beat that stops meanwhile loses
nothing. Entries with neither policy cost nothing here: no read, no arithmetic.
"""

from __future__ import annotations

import logging

from ..schedule.entry import Entry
from ..schedule.ids import jitter_ms
from ..store import ScheduleStore
from ..store.errors import StoreError
from ..store.keys import lane_of
from ..store.records import Claim, ClaimBatch, Outcome
from ..store.runs import Running

log = logging.getLogger(__name__)

#: An occurrence waiting for a run to end (``buffer_one``) is looked at again this often at
#: least: the worker hook wakes it when the run ends, this is for a run whose end was lost.
RECHECK_MS = 30_000


class Holds:
    """Decides, per claim, whether jitter or a run still going holds its occurrence back."""

    def __init__(self, store: ScheduleStore) -> None:
        self.store = store
        self._names: list[str] = []
        self._running: dict[str, Running] | None = None
        #: The claims marked as running before their send, by name: their task ids.
        self.marked: dict[str, str] = {}

    def begin(self, batch: ClaimBatch) -> None:
        """A new batch: the runs going on are read once, when an entry first needs them."""
        self._names = [c.name for c in batch.claims]
        self._running = None
        self.marked = {}

    def hold(
        self,
        entry: Entry,
        claim: Claim,
        due_ms: int,
        next_due: int | None,
        task_id: str,
        now_ms: int,
    ) -> Outcome | None:
        """The outcome that holds this occurrence back (None: send it now)."""
        if entry.jitter and not claim.deferred and not claim.recovered:
            room = None if next_due is None else next_due - due_ms
            at = due_ms + jitter_ms(entry.name, due_ms, entry.jitter, room)
            if at > now_ms:
                return Outcome(claim.name, "defer", due_ms, at, task_id, error="jitter")
        if entry.overlap == "allow":
            return None
        try:
            run = self._runs(now_ms).get(claim.name)
        except StoreError as exc:
            log.warning(
                "redisbeat: could not read whether %s is still running (%s); handing it back",
                entry.name,
                exc,
            )
            return Outcome(claim.name, "release", claim.due_ms)
        if run is None or run.task_id == task_id:
            return self._mark(claim, task_id, due_ms, now_ms)
        if entry.overlap == "skip":
            log.info(
                "redisbeat: %s skipped its occurrence: task %s still runs", entry.name, run.task_id
            )
            return Outcome(claim.name, "skipped", due_ms, next_due, task_id, error="overlap")
        recheck = min(run.until_ms, now_ms + RECHECK_MS)
        return Outcome(claim.name, "defer", due_ms, max(recheck, now_ms + 1), task_id, "overlap")

    def _mark(self, claim: Claim, task_id: str, due_ms: int, now_ms: int) -> Outcome | None:
        """Mark the run as going on before its message goes out (a worker may start it at
        once): None to send it, or a hand-back when Redis does not take the mark."""
        try:
            self.store.mark_sending(claim.name, task_id, due_ms, now_ms)
        except StoreError as exc:
            log.warning(
                "redisbeat: could not mark %s as running (%s); handing it back", claim.name, exc
            )
            return Outcome(claim.name, "release", claim.due_ms)
        self.marked[claim.name] = task_id
        return None

    def unmark(self, name: str, task_id: str) -> None:
        """The message marked by :meth:`hold` was not sent: take the mark back (best effort;
        it lapses after ``redisbeat_run_expiry_seconds`` anyway)."""
        if self.marked.pop(name, None) != task_id:
            return
        try:
            self.store.unmark_sending(name, task_id)
        except StoreError as exc:
            log.warning("redisbeat: could not take back the running mark of %s: %s", name, exc)

    def _runs(self, now_ms: int) -> dict[str, Running]:
        if self._running is None:
            periodic = [n for n in self._names if lane_of(n) == "periodic"]
            self._running = self.store.running(periodic, now_ms)
        return self._running
