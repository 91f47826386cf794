"""Pausing an entry, until a time or until it is resumed, and resuming it.

A pause leaves the definition as it is, so an edit, a deploy or a sync while it lasts keeps
the entry paused (:meth:`~.api.ScheduleStore.upsert` reads the pause); it takes the entry
off the schedule, or moves it to its first occurrence at or after the time it is paused
until, so the beats need not know. Its record (until, note, since, and the due time it
held, which keeps an interval's grid) is a field of the entry's run state: every read shows
it and a reshard moves it. A finish that sends after ``until`` drops it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import EntryNotFound, InvalidEntry, RedisBeatError
from ..schedule.catch_up import missed_between
from ..schedule.clock import to_ms, valid_ms
from ..schedule.entry import Entry
from .errors import translated
from .moving import placed
from .reads import EntryReads
from .records import text_or_none, wire
from .run_state import state_fields
from .shards import Layout

#: The longest note a pause keeps.
MAX_NOTE = 500
MAX_ATTEMPTS = 10


class PauseCalls(EntryReads):
    """``pause`` and ``resume``, for the API, the command line and the admin."""

    @translated
    def pause(self, name: str, until: datetime | None = None, note: str = "") -> None:
        """Send none of the entry's occurrences until it is resumed (:meth:`resume`) or, with
        ``until``, until then: it resumes by itself at its first occurrence from then on.
        ``note`` says why, wherever the entry is shown. Pausing a paused entry sets a new
        ``until`` and ``note``. :class:`EntryNotFound` when there is no such entry."""
        if until is not None and (not isinstance(until, datetime) or until.utcoffset() is None):
            raise InvalidEntry(name, "until", "must be a time-zone aware datetime or None")
        if not isinstance(note, str) or len(note) > MAX_NOTE:
            raise InvalidEntry(name, "note", f"must be a string of at most {MAX_NOTE} characters")
        until_ms = None if until is None else to_ms(until)

        def plan(entry: Entry, score: int | None, hold: Hold, now: int) -> tuple[Any, str, int]:
            # The due time the entry held before any pause: an interval keeps its grid.
            base = hold.base_ms if hold.token else score
            since = hold.since_ms if hold.token and hold.since_ms is not None else now
            due = None
            record: dict[str, Any] = {"until": until_ms, "note": note, "at": since, "due": base}
            if until_ms is not None and not hold.done(entry):
                due = entry.due_at_or_after(max(until_ms, now), base, self.timezone)
                # What the pause holds back, counted as missed when it is over.
                record["missed"] = self._held_back(entry, base, since, due)
            return due, json.dumps(record), 0

        self._change_pause(name, plan)

    @translated
    def resume(self, name: str) -> bool:
        """Send the entry's occurrences again, from the first one due from now; False when
        it was not paused."""

        def plan(entry: Entry, score: int | None, hold: Hold, now: int) -> tuple[Any, str, int]:
            if not hold.token:
                return False, "", 0
            base = score if score is not None else hold.base_ms
            due = None if hold.done(entry) else entry.due_at_or_after(now, base, self.timezone)
            held = self._held_back(entry, base, hold.since_ms or now, due or now)
            return due, "", held

        return self._change_pause(name, plan) is not False

    def _held_back(self, entry: Entry, base: int | None, since: int, until: int | None) -> int:
        """How many occurrences fall due from ``since`` up to ``until``: those a pause
        holds back."""
        first = entry.due_at_or_after(since, base, self.timezone)
        if first is None or until is None:
            return 0
        return missed_between(entry, first, first, until, self.timezone)

    def _change_pause(self, name: str, plan: Any) -> Any:
        """Read the entry, its due time and its pause, ``plan`` the new due time and record,
        and write them if the due time is still the one read."""

        def change(layout: Layout) -> Any:
            shard = self.shard_scripts[placed(self, [name], layout)[name]]
            for _ in range(MAX_ATTEMPTS):
                raw = text_or_none(self.client.hget(shard.keys.entries, wire(name)))
                if raw is None:
                    raise EntryNotFound(name)
                entry = Entry.loads(raw, name).with_default_tz(self.timezone)
                score = self.client.zscore(shard.keys.schedule, wire(name))
                read = int(score) if valid_ms(score) else None
                state = text_or_none(self.client.hget(shard.keys.state, wire(name)))
                now = self.now_ms()
                due, record, held = plan(entry, read, Hold.of(state, now), now)
                if due is False:
                    return False
                reply = shard.pause(name, score, due, record, held, layout.spelled)
                if reply == 0:
                    raise EntryNotFound(name)
                if reply == 1:
                    return due
            raise RedisBeatError(f"entry {name!r} changed too often to be paused or resumed")

        return self._with_layout(change)


@dataclass(frozen=True)
class Hold:
    """What an entry's run state holds back a write's due time with: a pause, and the
    runs already sent (for ``max_runs``)."""

    #: The pause: '' none (or one that is over), '-' until resumed, else until when (ms),
    #: as upsert.lua spells the pause it finds.
    token: str = ""
    until_ms: int | None = None
    runs: int = 0
    #: The due time the entry held when it was paused (None: none, or not paused).
    base_ms: int | None = None
    #: When it was paused (None: not paused).
    since_ms: int | None = None

    @classmethod
    def of(cls, state: str | None, now_ms: int) -> Hold:
        data = state_fields(state)
        count = data.get("total_run_count")
        runs = int(count) if valid_ms(count) else 0  # a count is a non-negative number too
        held = data.get("paused")
        if not isinstance(held, dict):
            return cls(runs=runs)
        until, base, at = held.get("until"), held.get("due"), held.get("at")
        base_ms = int(base) if valid_ms(base) else None
        since_ms = int(at) if valid_ms(at) else None
        if not valid_ms(until):
            return cls("-", runs=runs, base_ms=base_ms, since_ms=since_ms)
        if until <= now_ms:
            return cls(runs=runs)
        return cls(str(int(until)), int(until), runs, base_ms, since_ms)

    def done(self, entry: Entry) -> bool:
        """Whether ``entry`` has sent its ``max_runs``."""
        return entry.max_runs is not None and self.runs >= entry.max_runs

    def due(self, entry: Entry, now_ms: int, tz: str) -> int | None:
        """When a newly written ``entry`` is first due: from now, or from the end of the
        pause (None while paused until resumed, or once it has sent ``max_runs``)."""
        if self.done(entry):
            return None
        if self.token == "":
            return entry.first_due_ms(now_ms, tz)
        if self.until_ms is None:
            return None
        return entry.due_at_or_after(self.until_ms, None, tz)
