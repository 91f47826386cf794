"""Walking every entry in order of its next run, a page at a time, and counting what an
operator asks about first: what the ``list`` and ``status`` commands read.

A million entries are walked without holding them: each shard's schedule is read in pages
and merged, then the entries with no next run (disabled, finished) follow, shard by shard.
Every row carries a cursor; a walk given that cursor goes on after the row.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from ..errors import CorruptEntry
from ..schedule.clock import from_ms, to_ms
from ..schedule.entry import Entry
from ..schedule.ids import jitter_ms
from .errors import translated
from .keys import Keys
from .reads import EntryReads
from .records import text, wire
from .run_state import EntryState

#: How many entries one read of a walk asks for.
PAGE = 1000
#: The most names a source's index may hold for a filtered walk to read only them.
INDEXED_AT_MOST = 100_000


@dataclass(frozen=True)
class Listed:
    """One entry of a walk: its definition (None when it does not load: ``problem`` says
    why), its run state, and the cursor that goes on after it."""

    name: str
    entry: Entry | None
    state: EntryState
    cursor: str
    problem: str | None = None


@dataclass(frozen=True)
class Counts:
    """The deployment at a glance."""

    entries: int
    #: Entries with a next run (enabled, not finished).
    scheduled: int
    #: Due now and not claimed by a beat.
    due: int
    #: Due for longer than the threshold asked for.
    overdue: int
    #: Occurrences a beat has claimed and not yet finished.
    inflight: int
    quarantined: int
    now_ms: int
    #: Delayed tasks pending (or being sent).
    delayed: int = 0


class EntryListing(EntryReads):
    """The walk and the counts."""

    @translated
    def walk(
        self,
        after: str | None = None,
        *,
        page: int = PAGE,
        source: str | None = None,
        name: str | None = None,
    ) -> Iterator[Listed]:
        """Every entry: those with a next run first, soonest first, then the others.

        Given a ``source`` or an exact ``name``, a walk may yield only the entries that can
        match (from the source's index of names, when it holds at most
        :data:`INDEXED_AT_MOST`), so a filter that matches little reads little: the caller
        still filters the rows. Such a walk's cursors for entries with no next run are its
        own (``n:``)."""
        named = self._named(source, name, after)
        if named is not None:
            yield from self._loaded(named, page)
            return
        kind, _, rest = (after or "s:").partition(":")
        if kind == "n" and not rest:  # only those with no next run, the index could not say
            kind, rest = "u", "0:0:"
        if kind not in ("s", "u"):
            raise ValueError(f"not a cursor of this walk: {after!r}")
        if kind == "s":
            yield from self._loaded(self._scheduled(rest, page), page)
            rest = "0:0:"
        yield from self._loaded(self._unscheduled(rest, page), page)

    def _scheduled(self, after: str, page: int) -> Iterator[tuple[str, str]]:
        score, _, name = after.partition(":")
        start = (float(score), name) if score else None
        runs = [self._shard_schedule(s.keys, start, page) for s in self.all_shards()]
        for due, member in heapq.merge(*runs):
            yield member, f"s:{due!r}:{member}"

    def _shard_schedule(
        self, keys: Keys, start: tuple[float, str] | None, page: int
    ) -> Iterator[tuple[float, str]]:
        """One shard's schedule from ``start`` on, in (due, name) order: Redis orders the
        members of one score by name, so a page goes on from the last (due, name) read."""
        low, offset = (start[0] if start else "-inf"), 0
        while True:
            rows = cast(
                "list[tuple[Any, Any]]",  # redis-py types this loosely
                self.client.zrangebyscore(
                    keys.schedule, low, "+inf", start=offset, num=page, withscores=True
                ),
            )
            for member, due in rows:
                row = (float(due), text(member))
                if start is None or row > start:
                    yield row
            if len(rows) < page:
                return
            last = (float(rows[-1][1]), text(rows[-1][0]))
            if start is not None and last[0] == start[0]:
                offset += page  # a whole page of one due time: page on within it
            else:
                start, low, offset = last, last[0], 0

    def _unscheduled(self, after: str, page: int) -> Iterator[tuple[str, str]]:
        """Entries with no next run, shard by shard, in HSCAN order: a cursor names the
        shard, the scan cursor of the page and the last name taken from it."""
        first, scan, last = after.split(":", 2)
        shards = self.all_shards()
        for index in range(int(first), len(shards)):
            keys, cursor = shards[index].keys, int(scan) if index == int(first) else 0
            skip = last if index == int(first) else ""
            while True:
                following, rows = self.client.hscan(keys.entries, cursor, count=page)
                names = [text(n) for n in rows]
                if skip in names:
                    names = names[names.index(skip) + 1 :]
                skip = ""
                members: list[Any] = [wire(n) for n in names]  # bytes are members too
                scores = self.client.zmscore(keys.schedule, members) if names else []
                for name, score in zip(names, scores, strict=True):
                    if score is None:
                        yield name, f"u:{index}:{cursor}:{name}"
                cursor = following
                if cursor == 0:
                    break

    def _named(
        self, source: str | None, name: str | None, after: str | None
    ) -> Iterator[tuple[str, str]] | None:
        """The rows of the names a filter can match, in the walk's order (None: the index
        cannot answer, walk everything)."""
        kind, _, rest = (after or "s:").partition(":")
        if kind not in ("s", "n") or (source is None and name is None):
            return None
        if name is not None and not any(c in name for c in "*?["):
            names = {name}
        elif source is not None:
            found = self._source_names(source)
            if found is None:
                return None
            names = found
        else:
            return None
        return self._ordered(sorted(names), kind, rest)

    def _source_names(self, source: str) -> set[str] | None:
        """The names a source owns, by its index (None: too many to hold)."""
        shards = self.all_shards()
        pipe = self.client.pipeline(transaction=False)
        for shard in shards:
            pipe.scard(shard.keys.source(source))
        if sum(pipe.execute()) > INDEXED_AT_MOST:
            return None
        names: set[str] = set()
        for shard in shards:
            names.update(text(n) for n in self.client.sscan_iter(shard.keys.source(source)))
        return names

    def _ordered(self, names: list[str], kind: str, rest: str) -> Iterator[tuple[str, str]]:
        """``names`` as the walk orders them, after the cursor ``kind:rest``."""
        scores: dict[str, float | None] = {}
        for chunk in range(0, len(names), PAGE):
            by_shard: dict[int, list[str]] = {}
            for n, index in self.located(names[chunk : chunk + PAGE]).items():
                by_shard.setdefault(index, []).append(n)
            pipe = self.client.pipeline(transaction=False)
            for index, part in by_shard.items():
                members: list[Any] = [wire(n) for n in part]  # bytes are members too
                pipe.zmscore(self.shard_scripts[index].keys.schedule, members)
            for part, found in zip(by_shard.values(), pipe.execute(), strict=True):
                scores.update(zip(part, found, strict=True))
        due = sorted((float(v), n) for n, v in scores.items() if v is not None)
        if kind == "s":
            score, _, after_name = rest.partition(":")
            start = (float(score), after_name) if score else None
            for row in due:
                if start is None or row > start:
                    yield row[1], f"s:{row[0]!r}:{row[1]}"
            rest = ""
        for n in names:  # sorted
            if scores[n] is None and n > rest:
                yield n, f"n:{n}"

    def _loaded(self, rows: Iterator[tuple[str, str]], page: int) -> Iterator[Listed]:
        """Rows with their definitions and states, read a page at a time."""
        batch: list[tuple[str, str]] = []
        for row in rows:
            batch.append(row)
            if len(batch) == page:
                yield from self._load(batch)
                batch = []
        yield from self._load(batch)

    def _load(self, batch: list[tuple[str, str]]) -> list[Listed]:
        if not batch:
            return []
        names = [name for name, _ in batch]
        raws = self.definitions(names)
        listed = []
        for (name, cursor), state in zip(batch, self.states(names), strict=True):
            entry, problem = None, None
            raw = raws.get(name)
            if raw is None:
                problem = "no definition stored (set aside, or removed meanwhile)"
            else:
                try:
                    entry = Entry.loads(raw, name)
                except CorruptEntry as exc:
                    problem = str(exc)
            listed.append(Listed(name, entry, state, cursor, problem))
        return listed

    @translated
    def definitions(self, names: list[str]) -> dict[str, str]:
        """The stored definitions of those names that have one, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        located = self.located(names)
        for name in names:
            pipe.hget(self.shard_scripts[located[name]].keys.entries, wire(name))
        return {n: raw for n, raw in zip(names, pipe.execute(), strict=True) if raw is not None}

    @translated
    def counts(self, overdue_after: float = 60.0) -> Counts:
        """Entries stored, scheduled, due, overdue, claimed and set aside, and delayed tasks
        pending, in one round trip (on a cluster, one per node): each a count Redis keeps
        (HLEN, ZCARD, ZCOUNT), never a walk, so a million entries count as fast as ten."""
        now = self.now_ms()
        pipe = self.client.pipeline(transaction=False)
        for shard in self.all_shards():
            keys = shard.keys
            pipe.hlen(keys.entries)
            pipe.zcard(keys.schedule)
            pipe.zcount(keys.schedule, "-inf", now)
            pipe.zcount(keys.schedule, "-inf", now - int(overdue_after * 1000))
            pipe.hlen(keys.inflight)
            pipe.hlen(keys.quarantine)
            pipe.zcard(keys.delayed)
        replies: list[Any] = pipe.execute()
        entries, scheduled, due, overdue, inflight, quarantined, delayed = (
            sum(int(r) for r in replies[i::7]) for i in range(7)
        )
        return Counts(entries, scheduled, due, overdue, inflight, quarantined, now, delayed)

    @translated
    def beat_activity(self, beat_ids: list[str]) -> dict[str, dict[str, Any]]:
        """What each of these beats last said it did in a minute (absent: nothing yet)."""
        if not beat_ids:
            return {}
        raws = self.client.mget([self.keys.activity(b) for b in beat_ids])
        found = {}
        for beat_id, raw in zip(beat_ids, raws, strict=True):
            try:
                summary = json.loads(raw) if raw else None
            except ValueError:
                summary = None
            if isinstance(summary, dict):
                found[beat_id] = summary
        return found

    @translated
    def next_runs(self, name: str, n: int = 10) -> list[datetime]:
        """The next ``n`` times an entry is sent, from the one its schedule holds (none for
        an entry that will not run again, or is paused until resumed), each delayed by its
        ``jitter``, and no more than its ``max_runs`` leaves."""
        entry = self.get(name).with_default_tz(self.timezone)
        state = self.state(name)
        if state.next_run_at is None:
            return []
        if entry.max_runs is not None:
            n = min(n, max(0, entry.max_runs - state.total_run_count))
        runs: list[datetime] = []
        at = to_ms(state.next_run_at)
        due: int | None = at
        if state.held_due is not None and n > 0:  # an occurrence waits: it goes first
            runs.append(state.next_run_at)
            due = entry.next_due_ms(to_ms(state.held_due), at, self.timezone)
        while due is not None and len(runs) < n:
            nxt = entry.next_due_ms(due, due, self.timezone)
            delay = 0
            if entry.jitter:
                delay = jitter_ms(entry.name, due, entry.jitter, None if nxt is None else nxt - due)
            runs.append(from_ms(due + delay))
            due = nxt
        return runs

    def zone_of(self, entry: Entry) -> str:
        """The zone an entry's times are read in: its schedule's, else the app's."""
        return getattr(entry.schedule, "tz", None) or self.timezone
