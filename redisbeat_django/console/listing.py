"""One page of the deployment's entries in next-run order, filtered and searched, with the
cursor the next page goes on from.

A page is a slice of the store's walk (:meth:`redisbeat.ScheduleStore.walk`): every entry
with a next run, soonest first, then those with none, then the definitions set aside
(quarantined) that left no entry behind. An exact name, and a source of at most
:data:`SMALL_SOURCE` entries, read only the names the store's indexes give; the disabled and
finished filters only the entries with no next run; the quarantined filter only the
quarantine records. The other filters (a large source's too) and a search pattern keep the
rows that match among those the walk gives, looking at no more than :data:`SCAN_LIMIT` a
page: a page that stops there says so (``bounded``), and the next goes on from the last row
looked at. Nothing holds more than a page of entries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from redisbeat import Entry, ScheduleStore
from redisbeat.errors import CorruptEntry
from redisbeat.store.run_state import TROUBLE, EntryState

#: What the sources redisbeat writes stand for; an entry of any other names its source.
SOURCES = {"config": "beat_schedule", "django": "Django", "api": "API or CLI"}
STATES = ("enabled", "disabled", "paused", "quarantined", "finished", "failing")
PER_PAGE = 100
#: The most rows a page looks at for a filter or a pattern no index answers.
SCAN_LIMIT = 5_000
#: The most names of a source whose index a page reads: ordering a larger one by next run
#: costs more than walking every entry, where a large source's entries are soon found.
SMALL_SOURCE = 2_000
#: How a cursor of the set-aside definitions, after the walk, begins.
SET_ASIDE = "q:"
#: Filters whose entries all have no next run: their walk skips the schedule.
UNSCHEDULED = ("disabled", "finished")
#: How the walk says a name has no definition (removed meanwhile, or set aside).
NO_DEFINITION = "no definition stored"


@dataclass(frozen=True)
class Query:
    """What a page shows: a source, a state, a search (an exact name, or a pattern with
    ``*``, ``?`` or ``[`` matched against names and tasks, case-insensitively)."""

    source: str | None = None
    state: str | None = None
    search: str = ""

    @property
    def pattern(self) -> bool:
        return any(c in self.search for c in "*?[")

    @property
    def exact_name(self) -> str | None:
        return self.search if self.search and not self.pattern else None

    @property
    def scans(self) -> bool:
        """Whether rows no index rules out are looked at and dropped."""
        return self.pattern or self.state not in (None, "quarantined")


@dataclass(frozen=True)
class Row:
    """One entry of a page, or a definition set aside (``entry`` None, ``problem`` why)."""

    name: str
    entry: Entry | None
    state: EntryState
    cursor: str
    problem: str | None = None
    #: What a definition that does not load says of itself (its task and source), if JSON.
    loose: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.entry.source if self.entry else str(self.loose.get("source") or "")

    @property
    def task(self) -> str:
        return self.entry.task if self.entry else str(self.loose.get("task") or "")

    @property
    def states(self) -> list[str]:
        return states_of(self.entry, self.state)


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    #: The cursor of the next page (None: this is the last).
    next: str | None
    #: Rows looked at; ``bounded``: the page stopped at :data:`SCAN_LIMIT` of them.
    scanned: int = 0
    bounded: bool = False


def states_of(entry: Entry | None, state: EntryState) -> list[str]:
    """The filter states an entry is in: enabled or disabled, and paused, quarantined,
    finished (enabled, with no next run: its runs are over) and failing (sends refused,
    data redisbeat did not write, or a last run that failed on a worker or could not start
    there)."""
    found = []
    if entry is not None:
        found.append("enabled" if entry.enabled else "disabled")
    if state.paused is not None:
        found.append("paused")
    if state.quarantined is not None:
        found.append("quarantined")
    idle = state.next_run_at is None and not state.running and state.paused is None
    if entry is not None and entry.enabled and idle and state.quarantined is None:
        found.append("finished")
    last = state.last_outcome
    if state.failures or state.problem or (last and last.outcome in TROUBLE):
        found.append("failing")
    return found


def matches(row: Row, query: Query) -> bool:
    if query.state is not None and query.state not in row.states:
        return False
    if query.source is not None and row.source != query.source:
        return False
    if query.pattern:
        pattern = query.search.lower()
        return fnmatchcase(row.name.lower(), pattern) or fnmatchcase(row.task.lower(), pattern)
    return not query.search or row.name == query.search


def read_page(
    store: ScheduleStore,
    query: Query,
    after: str | None = None,
    *,
    per_page: int | None = None,
    scan_limit: int | None = None,
) -> Page:
    """The page after the cursor ``after`` (None: the first), of ``per_page`` rows (default
    :data:`PER_PAGE`). ValueError: a cursor this listing did not write."""
    per_page = per_page or PER_PAGE
    scan_limit = scan_limit or SCAN_LIMIT
    rows: list[Row] = []
    scanned = 0
    if not (after or "").startswith(SET_ASIDE) and query.state != "quarantined":
        start = after or ("n:" if query.state in UNSCHEDULED else None)
        source = query.source
        if source is not None and store.count_source(source) > SMALL_SOURCE:
            source = None  # walk every entry (their rows say their source)
        scans = query.scans or (query.source is not None and source is None)
        read = 1000 if scans else per_page + 1
        for listed in store.walk(start, page=read, source=source, name=query.exact_name):
            scanned += 1
            row = Row(listed.name, listed.entry, listed.state, listed.cursor, listed.problem)
            if _stored(row) and matches(row, query):
                rows.append(row)
                if len(rows) > per_page:
                    return Page(rows[:per_page], rows[per_page - 1].cursor, scanned)
            if scanned >= scan_limit:
                return Page(rows, listed.cursor, scanned, bounded=True)
        after = SET_ASIDE
    after_name = (after or SET_ASIDE)[len(SET_ASIDE) :]
    rows += set_aside(store, query, after_name, per_page + 1 - len(rows))
    if len(rows) > per_page:
        return Page(rows[:per_page], rows[per_page - 1].cursor, scanned)
    return Page(rows, None, scanned)


def set_aside(store: ScheduleStore, query: Query, after: str, most: int) -> list[Row]:
    """Up to ``most`` quarantined definitions after the name ``after``, by name: those that
    left no entry behind, or with the quarantined filter every one."""
    records = store.quarantined()
    names = sorted(n for n in records if n > after)
    if not names:
        return []
    stored = store.definitions(names)
    if query.state != "quarantined":
        names = [n for n in names if n not in stored]
    rows = []
    for name in names:
        record = records[name]
        entry, problem = load_definition(stored.get(name), name)
        loose = loose_fields(record.definition)
        placeholder = EntryState(name, None, quarantined=record)
        row = Row(name, entry, placeholder, SET_ASIDE + name, problem or record.error, loose)
        if matches(row, query):
            rows.append(row)
            if len(rows) == most:
                break
    states = {s.name: s for s in store.states([r.name for r in rows])}
    return [Row(r.name, r.entry, states[r.name], r.cursor, r.problem, r.loose) for r in rows]


def _stored(row: Row) -> bool:
    """Whether a row of the walk stands for a stored definition: an exact name's walk gives
    the name whatever Redis holds, and one set aside is listed with the quarantine."""
    return row.entry is not None or not (row.problem or "").startswith(NO_DEFINITION)


def load_definition(raw: str | None, name: str) -> tuple[Entry | None, str | None]:
    if raw is None:
        return None, None
    try:
        return Entry.loads(raw, name), None
    except CorruptEntry as exc:
        return None, str(exc)


def loose_fields(definition: str) -> Mapping[str, Any]:
    try:
        data = json.loads(definition)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}
