"""Where the Django app finds its Celery app and its ScheduleStore."""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from redisbeat import ScheduleStore
from redisbeat.schedule.task_names import registered_tasks

_lock = threading.Lock()
_store: ScheduleStore | None = None


def celery_app() -> Any:
    """``settings.REDISBEAT_CELERY_APP`` (a dotted path) or Celery's current app."""
    path = getattr(settings, "REDISBEAT_CELERY_APP", None)
    if path:
        return import_string(path.replace(":", "."))
    from celery import current_app

    return current_app._get_current_object()  # type: ignore[attr-defined]


def get_store() -> ScheduleStore:
    """The process-wide store, configured from the Celery app's ``redisbeat_*`` settings."""
    global _store
    with _lock:
        if _store is None:
            _store = ScheduleStore.from_app(celery_app())
        return _store


def reset_store(**_: Any) -> None:
    """Forget the cached store (after settings change, or in tests)."""
    global _store
    with _lock:
        if _store is not None:
            _store.close()
        _store = None


def task_names() -> list[str]:
    """Registered Celery task names, for the admin's suggestions (Celery's own left out)."""
    names = registered_tasks(celery_app())
    return sorted(name for name in names if not name.startswith("celery."))


setting_changed.connect(reset_store, dispatch_uid="redisbeat_django.reset_store")
