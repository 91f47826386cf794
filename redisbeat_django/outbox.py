"""The delayed-call outbox: calls written with the caller's transaction, pushed in order.

A call of :mod:`.delayed` made with ``on_commit=True`` is a :class:`~.models.DelayedCall`
row written in the caller's transaction: it exists exactly when the caller's own writes
do. Once the transaction commits, the waiting rows are pushed to Redis in ``id`` order and
deleted. When Redis cannot be reached they stay, and a background retry pushes them, still
in order, when it answers again; a beat starting and the ``redisbeat_django.reconcile``
task push them too, so a process that died before pushing loses nothing.

Rows are taken with ``SELECT ... FOR UPDATE``, so processes pushing at once take turns on
databases with row locks (PostgreSQL, MySQL). A countdown runs from when the call was made,
not from when Redis took it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.utils import timezone

from redisbeat import ScheduleStore
from redisbeat.errors import InvalidEntry, RedisBeatError
from redisbeat.schedule.clock import from_ms
from redisbeat.schedule.delayed import Delay

from .conf import get_store
from .models import CallKind, DelayedCall
from .retry import Retrier

log = logging.getLogger(__name__)

#: Rows taken (and locked) per transaction while pushing.
BATCH = 500


@dataclass
class Pushed:
    """What a push did: calls Redis took, and those it took too late to act on."""

    pushed: int = 0
    #: Cancels and reschedules that came too late (a beat was sending the task, or had).
    too_late: int = 0
    #: Calls refused for good (kept, with their error).
    refused: int = 0


def delay_row(d: Delay) -> DelayedCall:
    arguments = d.record()
    if d.at_ms is not None:
        arguments["at_ms"] = d.at_ms
    else:
        arguments["countdown_ms"] = d.countdown_ms or 0
    return DelayedCall(op=CallKind.DELAY, key=d.key, arguments=arguments)


def change_row(key: str, op: str, amount: int) -> DelayedCall:
    """A reschedule (``op``: 'at', 'in' or 'by', see ``change_of``) or a cancel."""
    if op == "cancel":
        return DelayedCall(op=CallKind.CANCEL, key=key)
    return DelayedCall(op=CallKind.RESCHEDULE, key=key, arguments={op: amount})


def record(rows: Sequence[DelayedCall], using: str | None) -> None:
    """Write ``rows`` in the current transaction, and push them once it commits."""
    alias = using or DEFAULT_DB_ALIAS
    DelayedCall.objects.using(alias).bulk_create(rows)
    pusher = _PUSHERS.setdefault(alias, partial(push_soon, alias))
    queued = getattr(connections[alias], "run_on_commit", None) or []
    # One push per transaction is enough: it takes every waiting row.
    if not any(len(item) > 1 and item[1] is pusher for item in queued):
        transaction.on_commit(pusher, using=alias)


_PUSHERS: dict[str, Callable[[], None]] = {}


def push_soon(using: str = DEFAULT_DB_ALIAS) -> None:
    """Push now, unless a retry is already waiting for Redis (it keeps the order)."""
    if retrier.running:
        return
    try:
        push(using)
    except (RedisBeatError, DatabaseError) as exc:
        log.warning("redisbeat: delayed calls wait for Redis (%s); retrying in the background", exc)
        retrier.kick()


def push(using: str = DEFAULT_DB_ALIAS) -> Pushed:
    """Push every waiting call in order. Raises :class:`~redisbeat.RedisBeatError` when Redis
    cannot take the next one; it and those after it stay waiting."""
    store, result = get_store(), Pushed()
    calls = DelayedCall.objects.using(using)
    while True:
        with transaction.atomic(using=using):
            rows = list(calls.select_for_update().filter(error="").order_by("id")[:BATCH])
            if not rows:
                return result
            done, failure = _push_rows(store, rows, result)
            calls.filter(pk__in=done).delete()
            pushed = set(done)
            waiting = [r for r in rows if r.pk not in pushed and not r.error]
            if failure is not None and waiting:
                calls.filter(pk=waiting[0].pk).update(attempts=waiting[0].attempts + 1)
        if failure is not None:
            raise failure


def _push_rows(
    store: ScheduleStore, rows: list[DelayedCall], result: Pushed, *, pipelined: bool = True
) -> tuple[list[int], RedisBeatError | None]:
    """Push rows in order until one cannot reach Redis; returns the pks of those pushed,
    and that failure. A call refused for good keeps its row, with its error."""
    done: list[int] = []
    for group in _groups(rows, pipelined):
        try:
            _push_group(store, group, result)
        except InvalidEntry as exc:
            if len(group) > 1:  # one of the pipelined delays: find it
                more, failure = _push_rows(store, group, result, pipelined=False)
                done += more
                if failure is not None:
                    return done, failure
                continue
            _refuse(group[0], exc, result)
            continue
        except RedisBeatError as exc:
            return done, exc
        done += [r.pk for r in group]
    return done, None


def _groups(rows: list[DelayedCall], pipelined: bool) -> Iterator[list[DelayedCall]]:
    """Consecutive delays in one group (pushed pipelined), every other call alone."""
    group: list[DelayedCall] = []
    for row in rows:
        if group and not (pipelined and row.op == group[0].op == CallKind.DELAY):
            yield group
            group = []
        group.append(row)
    if group:
        yield group


def _push_group(store: ScheduleStore, group: list[DelayedCall], result: Pushed) -> None:
    first = group[0]
    if first.op == CallKind.DELAY:
        store.delay_many([delay_item(row) for row in group])
    elif first.op == CallKind.CANCEL:
        _took(result, first, store.cancel(first.key))
    elif first.op == CallKind.CANCEL_OWNER:
        store.cancel_owner(first.key)
    elif first.op == CallKind.RESCHEDULE:
        _took(result, first, store.reschedule(first.key, **_move(first)) is not None)
    else:
        raise InvalidEntry(first.key, "op", f"is not a delayed call: {first.op!r}")
    result.pushed += len(group)


def _took(result: Pushed, row: DelayedCall, effect: bool) -> None:
    if not effect:
        result.too_late += 1
        log.info(
            "redisbeat: %s of delayed task %r came too late: it is being sent, or was",
            row.op,
            row.key,
        )


def _refuse(row: DelayedCall, exc: InvalidEntry, result: Pushed) -> None:
    row.error = str(exc)
    row.save(update_fields=["error"])
    result.refused += 1
    log.error("redisbeat: delayed call %s %r refused, kept in the outbox: %s", row.op, row.key, exc)


def delay_item(row: DelayedCall) -> dict[str, Any]:
    """A delay row as an item of ``ScheduleStore.delay_many``."""
    arguments = _arguments(row)
    item = {k: v for k, v in arguments.items() if k not in ("at_ms", "countdown_ms")}
    item["key"] = row.key
    if "at_ms" in arguments:
        item["eta"] = from_ms(_number(row, "at_ms"))
    else:
        item["countdown"] = _left(row, _number(row, "countdown_ms"))
    return item


def _move(row: DelayedCall) -> dict[str, Any]:
    """A stored reschedule as ``reschedule``'s keyword argument."""
    arguments = _arguments(row)
    if "at" in arguments:
        return {"eta": from_ms(_number(row, "at"))}
    if "in" in arguments:
        return {"countdown": _left(row, _number(row, "in"))}
    return {"by": timedelta(milliseconds=_number(row, "by"))}


def _left(row: DelayedCall, countdown_ms: int) -> float:
    """What is left of a countdown that started when the call was made."""
    waited = (timezone.now() - row.made_at).total_seconds()
    return max(0.0, countdown_ms / 1000 - max(0.0, waited))


def _arguments(row: DelayedCall) -> dict[str, Any]:
    if not isinstance(row.arguments, dict):
        raise InvalidEntry(row.key, "arguments", f"must be a JSON object: {row.arguments!r}")
    return row.arguments


def _number(row: DelayedCall, name: str) -> int:
    value = _arguments(row).get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEntry(row.key, name, f"must be a whole number of milliseconds: {value!r}")
    return value


def _retry() -> str:
    result = push()
    return f"pushed {result.pushed} delayed call(s)"


retrier = Retrier("delayed-call outbox", _retry)
