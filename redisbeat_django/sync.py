"""Push PeriodicTask rows to Redis: after each commit, and by a full reconcile.

A push that fails because Redis is unreachable leaves the rows marked ``pending`` and starts
a background retry in this process, which reconciles everything once Redis answers again.
The reconcile compares every row with what Redis holds for the ``django`` source and fixes
each difference, so changes made by bulk updates or outside the ORM are caught as well.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from redisbeat import Entry, ScheduleStore, StoreError
from redisbeat.errors import EntryNotFound, InvalidEntry

from .conf import get_store
from .describe import store_trouble
from .entries import SOURCE, row_error
from .models import PeriodicTask, SyncStatus
from .retry import Retrier

log = logging.getLogger(__name__)

CHUNK = 500


@dataclass
class SyncResult:
    """What a push or a reconcile did, by entry name."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    #: name -> why the row was not accepted (invalid, or the name belongs to another source).
    rejected: dict[str, str] = field(default_factory=dict)
    #: Set when Redis could not be reached; the rows stay pending.
    unavailable: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def push_on_commit(
    pks: Iterable[Any] = (),
    *,
    names: Iterable[str] = (),
    removed: Iterable[str] = (),
    using: str | None = None,
) -> None:
    """Push these rows (and remove these names) once the current transaction commits."""
    callback = partial(push, list(pks), names=list(names), removed=list(removed))
    transaction.on_commit(callback, using=using)


def push(
    pks: Sequence[Any] = (), *, names: Sequence[str] = (), removed: Sequence[str] = ()
) -> SyncResult:
    """Push the current state of these rows to Redis; names in ``removed`` with no row go."""
    result = SyncResult()
    try:
        store = get_store()
        for chunk in _chunks(list(pks), CHUNK):
            _push_rows(store, PeriodicTask.objects.filter(pk__in=chunk), result)
        for chunk in _chunks(list(names), CHUNK):
            _push_rows(store, PeriodicTask.objects.filter(name__in=chunk), result)
        for chunk in _chunks(list(removed), CHUNK):
            present = set(
                PeriodicTask.objects.filter(name__in=chunk).values_list("name", flat=True)
            )
            for name in chunk:
                if name not in present and store.remove(name, source=SOURCE):
                    result.removed.append(name)
    except StoreError as exc:
        result.unavailable = store_trouble(exc)
        _mark_pending(Q(pk__in=list(pks)) | Q(name__in=list(names)), result.unavailable)
        log.warning(
            "redisbeat: could not push periodic tasks (%s); retrying in the background", exc
        )
        retrier.kick()
    return result


def _push_rows(store: ScheduleStore, rows: Iterable[PeriodicTask], result: SyncResult) -> None:
    rows = list(rows)
    entries: list[Entry] = []
    for row in rows:
        try:
            entries.append(row.to_entry())
        except InvalidEntry as exc:
            result.rejected[row.name] = row_error(row, exc)
    outcome = store.upsert_owned(entries)
    for name, what in outcome.items():
        if what == "added":
            result.added.append(name)
        elif what == "updated":
            result.updated.append(name)
        elif what == "unchanged":
            result.unchanged += 1
        else:
            result.rejected[name] = _foreign_message(store, name)
    _mark_done([r.pk for r in rows if r.name not in result.rejected], result.rejected)


def reconcile(store: ScheduleStore | None = None) -> SyncResult:
    """Make Redis hold exactly the rows of the table, and mark every row's sync status.

    Raises :class:`~redisbeat.StoreError` when Redis cannot be reached (nothing is marked then).
    """
    store = store or get_store()
    entries: list[Entry] = []
    rejected: dict[str, str] = {}
    pks: list[Any] = []
    for row in PeriodicTask.objects.all().iterator(chunk_size=2000):
        try:
            entries.append(row.to_entry())
            pks.append(row.pk)
        except InvalidEntry as exc:
            rejected[row.name] = row_error(row, exc)
    # A row made invalid outside the admin keeps its last good version scheduled.
    for name in rejected:
        try:
            kept = store.get(name)
        except (EntryNotFound, InvalidEntry):
            continue
        if kept.source == SOURCE:
            entries.append(kept)
    report = store.sync_source(SOURCE, entries)
    for name in report.foreign:
        rejected[name] = _foreign_message(store, name)
    result = SyncResult(
        added=report.added,
        updated=report.updated,
        removed=report.removed,
        unchanged=report.unchanged,
        rejected=rejected,
    )
    _mark_done([], rejected, everything_else=True)
    return result


def _foreign_message(store: ScheduleStore, name: str) -> str:
    try:
        owner = store.get(name).source
    except (EntryNotFound, InvalidEntry):
        owner = "another source"
    return (
        f"entry {name!r}: field 'name': is already used by an entry of source {owner!r} "
        "(for example the beat_schedule setting); choose another name"
    )


def _mark_done(pks: list[Any], rejected: dict[str, str], *, everything_else: bool = False) -> None:
    now = timezone.now()
    for name, message in rejected.items():
        PeriodicTask.objects.filter(name=name).update(
            sync_status=SyncStatus.ERROR, sync_error=message, synced_at=None
        )
    done = {"sync_status": SyncStatus.SYNCED, "sync_error": "", "synced_at": now}
    if everything_else:
        rows = PeriodicTask.objects.exclude(sync_status=SyncStatus.SYNCED, sync_error="")
        for chunk in _chunks(sorted(rejected), CHUNK):
            rows = rows.exclude(name__in=chunk)
        rows.update(**done)
        return
    for chunk in _chunks(pks, CHUNK):
        PeriodicTask.objects.filter(pk__in=chunk).update(**done)


def _mark_pending(rows: Q, reason: str) -> None:
    try:
        PeriodicTask.objects.filter(rows).update(sync_status=SyncStatus.PENDING, sync_error=reason)
    except Exception:  # the database may be the thing that is down; the row stays as it was
        log.exception("redisbeat: could not mark periodic tasks as pending")


def _chunks(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def _retry() -> str:
    result = reconcile()
    return (
        f"pushed periodic tasks (added {len(result.added)}, updated {len(result.updated)}, "
        f"removed {len(result.removed)})"
    )


retrier = Retrier("periodic task sync", _retry)
