"""ScheduleStore: the editors' API (add, change, remove, enable, run now, read state).

A store is also what a beat uses (:mod:`.beats`, :mod:`.changes`); this module holds the calls
people and programs make. Writes are compare-and-set against the definition read, so
concurrent editors and beats never lose each other's changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from itertools import islice
from typing import Any, TypeVar

from ..config import Config
from ..errors import CorruptEntry, OwnershipError, RedisBeatError
from ..schedule.clock import valid_ms
from ..schedule.entry import Entry
from .activity_log import ActivityLog
from .backfill import BackfillCalls
from .beats import BeatCalls
from .changes import ChangeFeed
from .errors import LayoutChanged, translated
from .listing import EntryListing
from .moving import placed
from .pausing import Hold, PauseCalls
from .receipts import ReceiptCalls
from .records import SyncReport, text_or_none, wire
from .run_state import claimed_due
from .runs import RunCalls
from .scripts import Scripts, Upsert
from .shards import Layout
from .upsert_reads import is_lost, read_for_write, said_back

log = logging.getLogger(__name__)

CHUNK = 1000
MAX_CAS_ATTEMPTS = 10

T = TypeVar("T")


class ScheduleStore(
    BeatCalls,
    ChangeFeed,
    EntryListing,
    BackfillCalls,
    PauseCalls,
    RunCalls,
    ReceiptCalls,
    ActivityLog,
):
    """Periodic entries in Redis: CRUD for people and programs, claims for beats."""

    @classmethod
    def from_config(cls, config: Config) -> ScheduleStore:
        store: ScheduleStore = super().from_config(config)
        return store

    @classmethod
    def from_app(cls, app: Any) -> ScheduleStore:
        """A store with the same settings as ``celery beat -S redisbeat.RedisScheduler``."""
        return cls.from_config(Config.from_app(app))

    # -- writing ------------------------------------------------------------------------------

    @translated
    def upsert(self, entry: Entry, *, force: bool = False) -> bool:
        """Add or replace an entry; True when something changed.

        An edit that leaves the timing alone (schedule, start/end, enabled) keeps the next due
        time; any other change reschedules from now. ``force`` takes over an entry that
        another source owns (otherwise :class:`OwnershipError`).
        """
        return bool(self.upsert_many([entry], force=force))

    @translated
    def upsert_many(self, entries: Iterable[Entry], *, force: bool = False) -> int:
        """Add or replace many entries, pipelined; returns how many changed."""
        written = 0
        for chunk in _chunks(entries, CHUNK):
            results = self._write(chunk, force=force).values()
            written += sum(1 for r in results if r in ("added", "updated"))
        return written

    @translated
    def upsert_owned(self, entries: Iterable[Entry]) -> dict[str, str]:
        """Add or replace entries, leaving alone names that another source owns.

        Returns, per name, ``"added"``, ``"updated"``, ``"unchanged"`` or ``"foreign"``.
        """
        results: dict[str, str] = {}
        for chunk in _chunks(entries, CHUNK):
            results.update(self._write(chunk, force=False, foreign="skip"))
        return results

    @translated
    def reschedule_lost(self) -> int:
        """Put back on its schedule every entry off it though not for good (its schedule key
        was deleted, say), from its stored definition, written again only as it is (an edit
        made meanwhile stands); returns how many went back."""
        back = 0
        for chunk in _chunks(self, CHUNK):
            results = self._write(chunk, force=False, foreign="skip", as_stored=True)
            back += sum(1 for r in results.values() if r == "updated")
        return back

    def _write(
        self, chunk: list[Entry], *, force: bool, foreign: str = "raise", as_stored: bool = False
    ) -> dict[str, str]:
        """Write a chunk with compare-and-set, shard by shard (``as_stored``: only entries
        still stored as they are given, to put them back on their schedule).

        Result per name: ``added``, ``updated``, ``unchanged`` or ``foreign``.
        """
        results: dict[str, str] = {}

        def write(layout: Layout) -> dict[str, str]:
            pending = [e for e in chunk if e.name not in results]
            groups: dict[int, list[Entry]] = {}
            where = placed(self, [e.name for e in pending], layout)
            for entry in pending:
                groups.setdefault(where[entry.name], []).append(entry)
            for index, group in groups.items():
                shard = self.shard_scripts[index]
                self._write_shard(
                    shard, group, layout, results, force=force, foreign=foreign, stored=as_stored
                )
            return results

        return self._with_layout(write)

    def _write_shard(
        self,
        shard: Scripts,
        chunk: list[Entry],
        layout: Layout,
        results: dict[str, str],
        *,
        force: bool,
        foreign: str,
        stored: bool,
    ) -> None:
        """Write one shard's entries, reading again what changed meanwhile; each result is
        kept in ``results`` as it is known. With ``stored``, one no longer stored as given is
        left as it is."""
        pending = {e.name: self.with_defaults(e) for e in chunk}
        for _ in range(MAX_CAS_ATTEMPTS):
            read = read_for_write(self.connection, shard.keys, list(pending))
            now_ms, olds, scores, states, claims, spent = read
            writes: list[Upsert] = []
            for name, old_raw, score, state, claim, gone in zip(
                pending, olds, scores, states, claims, spent, strict=True
            ):
                entry = pending[name]
                if stored and old_raw != entry.dumps():
                    results[name] = "unchanged"  # edited meanwhile: the edit stands
                    continue
                lost = is_lost(entry, score, gone, text_or_none(state))
                outcome = self._plan(entry, old_raw, score, lost, force=force, foreign=foreign)
                if isinstance(outcome, str):
                    results[name] = outcome
                    continue
                hold = Hold.of(text_or_none(state), now_ms)
                # A claim decided its occurrence: the new timing starts after it.
                in_hand = claimed_due(text_or_none(claim), score)
                since = now_ms if in_hand is None else max(now_ms, in_hand + 1)
                due = hold.due(entry, since, self.timezone)
                spelled = "" if score is None else repr(float(score))
                writes.append(replace(outcome, due_ms=due, pause=hold.token, score=spelled))
            # Even with nothing to write: WAIT confirms that what was read is replicated.
            _results(writes, shard.upsert(writes, layout.spelled), results)
            pending = {n: e for n, e in pending.items() if n not in results}
            if not pending:
                return
        raise RedisBeatError(f"entries changed concurrently too often: {sorted(pending)[:5]}")

    def _plan(
        self,
        entry: Entry,
        old_raw: str | None,
        score: Any,
        lost: bool,
        *,
        force: bool,
        foreign: str,
    ) -> str | Upsert:
        """What writing ``entry`` over ``old_raw`` takes: a result already known, or a write
        (``lost``: the entry is off its schedule, though not for good)."""
        new_raw = entry.dumps()
        broken = score is not None and not valid_ms(score)
        if old_raw == new_raw and broken:
            return self._mend(entry.name, score)
        if old_raw == new_raw and not lost:
            return "unchanged"
        old = _load_or_none(old_raw, entry.name)
        if old is not None and old.source != entry.source and not force:
            if foreign == "skip":
                return "foreign"
            raise OwnershipError(entry.name, old.source, entry.source)
        keep = old is not None and old.timing_key() == entry.timing_key()
        keep = keep and not broken and not lost
        return Upsert(
            name=entry.name,
            read=old_raw or "",
            definition=new_raw,
            due_ms=None,
            keep_schedule=keep,
            source=entry.source,
            previous_source=old.source if old else entry.source,
        )

    def _mend(self, name: str, score: float) -> str:
        """An unchanged entry whose due time is not a valid time: put it back on its
        schedule (an "update" of its timing), and say so."""
        what = self.repair(name, repr(score), "api")
        log.warning(
            "redisbeat: entry %r had a due time in Redis that is not a valid time (%s); %s",
            name,
            score,
            what,
        )
        return "updated"

    @translated
    def remove(self, name: str, *, source: str | None = None) -> bool:
        """Remove an entry, its state and any claim on it; False when there was none.

        With ``source``, the entry is removed only when that source owns it.
        """

        def remove(layout: Layout) -> bool:
            shard = self.shard_scripts[placed(self, [name], layout)[name]]
            owner = source
            if owner is None:
                raw = self.client.hget(shard.keys.entries, wire(name))
                old = _load_or_none(text_or_none(raw), name)
                owner = old.source if old is not None else "api"
            return shard.remove(name, owner, source is not None, layout.spelled)

        return self._with_layout(remove)

    @translated
    def enable(self, name: str) -> bool:
        return self._set_enabled(name, True)

    @translated
    def disable(self, name: str) -> bool:
        return self._set_enabled(name, False)

    def _set_enabled(self, name: str, enabled: bool) -> bool:
        entry = self.get(name)
        # Written even when unchanged, so that wait_replicas confirms what was read.
        return self.upsert(replace(entry, enabled=enabled), force=True)

    @translated
    def run_now(self, name: str) -> None:
        """Make an entry due at once (its schedule continues afterwards)."""

        def run_now(layout: Layout) -> None:
            self.shard_scripts[placed(self, [name], layout)[name]].run_now(name, layout.spelled)

        self._with_layout(run_now)

    @translated
    def sync_source(
        self, source: str, entries: Iterable[Entry], *, keep: Iterable[str] = ()
    ) -> SyncReport:
        """Make the entries owned by ``source`` exactly ``entries``.

        Entries of that source not given are removed, but for the names in ``keep``; names
        owned by another source are left alone and reported in ``foreign``.
        """
        wanted = {e.name: e for e in entries}
        for entry in wanted.values():
            if entry.source != source:
                raise ValueError(
                    f"entry {entry.name!r} has source {entry.source!r}, not {source!r}"
                )
        owned = self.names(source)
        results: dict[str, str] = {}
        for chunk in _chunks(wanted.values(), CHUNK):
            results.update(self._write(chunk, force=False, foreign="skip"))
        gone = owned - set(wanted) - set(keep)
        removed = [n for n in sorted(gone) if self.remove(n, source=source)]
        return SyncReport(
            added=sorted(n for n, r in results.items() if r == "added"),
            updated=sorted(n for n, r in results.items() if r == "updated"),
            removed=removed,
            unchanged=sum(1 for r in results.values() if r == "unchanged"),
            foreign=sorted(n for n, r in results.items() if r == "foreign"),
        )


def _results(writes: list[Upsert], replies: list[Any], results: dict[str, str]) -> None:
    """Keep in ``results`` what each write did (one changed since it was read is left out,
    to be read again), and say which unchanged ones went back on their schedule."""
    back: list[str] = []
    for write, reply in zip(writes, replies, strict=True):
        if isinstance(reply, Exception):
            raise reply
        if reply == -2:
            raise LayoutChanged()
        if reply != -1:
            results[write.name] = ("updated" if write.read else "added") if reply else "unchanged"
        if reply == 1 and write.read == write.definition:
            back.append(write.name)
    if back:
        said_back(back)


def _chunks(items: Iterable[Entry], size: int) -> Iterator[list[Entry]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _load_or_none(raw: str | None, name: str) -> Entry | None:
    if raw is None:
        return None
    try:
        return Entry.loads(raw, name)
    except CorruptEntry:
        return None
