"""``redisbeat.delay``: delay a Celery task in one line, with the app's own settings.

``redisbeat.delay(app, send_reminder.s(user_id), countdown=600, key=...)`` writes to the
schedule's Redis as ``ScheduleStore.delay`` does, through one store per app (its
connections kept, as Celery keeps its broker's).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .schedule.task_names import check_task
from .store import ScheduleStore

_stores: weakref.WeakKeyDictionary[Any, ScheduleStore] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def store_for(app: Any) -> ScheduleStore:
    """The app's store for delays (made at the first use, with its ``redisbeat_*`` settings)."""
    with _lock:
        store = _stores.get(app)
        if store is None:
            store = _stores[app] = ScheduleStore.from_app(app)
        return store


def delay(
    app: Any,
    task: Any,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    eta: datetime | None = None,
    countdown: float | timedelta | None = None,
    key: str | None = None,
    owner: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> str:
    """Send ``task`` (a name, a Celery task or a signature) once, at ``eta`` or after
    ``countdown`` seconds by the Redis clock; returns its key. A task name the app does not
    know is refused when the app has tasks of its own registered (a typo would otherwise
    wait silently to fail on the worker), unless ``redisbeat_check_task_names`` is False."""
    if isinstance(task, str):
        check_task(app, key or "?", task)
    return store_for(app).delay(
        task, args, kwargs, eta=eta, countdown=countdown, key=key, owner=owner, options=options
    )
