"""Delayed tasks from Django code, in step with its transactions.

``delay``, ``delay_many``, ``reschedule``, ``cancel`` and ``cancel_owner`` take the
arguments of the store's methods of the same names, checked at once (a bad call raises
where it is made). With ``on_commit=True`` (the default) the call is written to the outbox
in the current transaction and reaches Redis once it commits: a rolled-back transaction
delays nothing, and a call made while Redis is unreachable waits in the database and is
pushed, in order, when it answers again (:mod:`.outbox`). Its outcome is then not known
when the call returns: ``reschedule`` and ``cancel`` return None, and a call that came too
late is logged. With ``on_commit=False`` the call goes to Redis at once and returns what the
store's method returns (or raises its error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from redisbeat.schedule.delayed import Delay, change_of, check_key
from redisbeat.schedule.task_names import check_task

from .conf import celery_app, get_store
from .models import CallKind, DelayedCall
from .outbox import change_row, delay_item, delay_row, record


def delay(
    task: Any,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    eta: datetime | None = None,
    countdown: float | timedelta | None = None,
    key: str | None = None,
    owner: str | None = None,
    options: Mapping[str, Any] | None = None,
    on_commit: bool = True,
    using: str | None = None,
) -> str:
    """Send ``task`` once, at ``eta`` or ``countdown`` seconds from now; returns its key."""
    item = {"eta": eta, "countdown": countdown, "key": key, "owner": owner, "options": options}
    return delay_many(
        [{"task": task, "args": args, "kwargs": kwargs, **item}], on_commit=on_commit, using=using
    )[0]


def delay_many(
    items: Iterable[Mapping[str, Any]], *, on_commit: bool = True, using: str | None = None
) -> list[str]:
    """Many delays (each a mapping of :func:`delay`'s arguments); returns their keys."""
    delays = [Delay.from_item({k: v for k, v in i.items() if v is not None}) for i in items]
    app = celery_app()
    for d in delays:
        check_task(app, d.key, d.task)
    if on_commit:
        record([delay_row(d) for d in delays], using)
    else:
        get_store().delay_many([delay_item(delay_row(d)) for d in delays])
    return [d.key for d in delays]


def reschedule(
    key: str,
    *,
    eta: datetime | None = None,
    countdown: float | timedelta | None = None,
    by: timedelta | None = None,
    on_commit: bool = True,
    using: str | None = None,
) -> datetime | None:
    """Move a pending task (see ``ScheduleStore.reschedule``); None with ``on_commit``."""
    op, amount = change_of(key, eta, countdown, by)
    if on_commit:
        record([change_row(key, op, amount)], using)
        return None
    return get_store().reschedule(key, eta=eta, countdown=countdown, by=by)


def cancel(key: str, *, on_commit: bool = True, using: str | None = None) -> bool | None:
    """Cancel a pending task (see ``ScheduleStore.cancel``); None with ``on_commit``."""
    check_key(key)
    if on_commit:
        record([change_row(key, "cancel", 0)], using)
        return None
    return get_store().cancel(key)


def cancel_owner(owner: str, *, on_commit: bool = True, using: str | None = None) -> int | None:
    """Cancel an owner's pending tasks (see ``ScheduleStore.cancel_owner``); None with
    ``on_commit``."""
    check_key(owner)
    if on_commit:
        record([DelayedCall(op=CallKind.CANCEL_OWNER, key=owner)], using)
        return None
    return get_store().cancel_owner(owner)
