"""Model signals that push PeriodicTask changes, and the beat start-up reconcile.

The one place where model writes meet the sync: :mod:`.models` announces, :mod:`.sync` pushes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from celery import signals as celery_signals
from celery.utils.imports import symbol_by_name
from django.db import close_old_connections
from django.db.models.signals import post_delete, post_save

from redisbeat import RedisScheduler

from . import outbox
from .models import PeriodicTask, bulk_written, is_sync_write
from .sync import push_on_commit, reconcile, retrier

log = logging.getLogger(__name__)


def connect() -> None:
    post_save.connect(_saved, sender=PeriodicTask, dispatch_uid="redisbeat_django.saved")
    post_delete.connect(_deleted, sender=PeriodicTask, dispatch_uid="redisbeat_django.deleted")
    bulk_written.connect(_bulk_written, sender=PeriodicTask, dispatch_uid="redisbeat_django.bulk")
    celery_signals.beat_init.connect(_beat_started, dispatch_uid="redisbeat_django.beat_init")


def _saved(
    sender: Any, instance: PeriodicTask, update_fields: Any = None, using: Any = None, **_: Any
) -> None:
    if is_sync_write(update_fields):
        return
    old = instance._loaded_name
    removed = [old] if old and old != instance.name else []
    push_on_commit([instance.pk], removed=removed, using=using)
    instance._loaded_name = instance.name


def _deleted(sender: Any, instance: PeriodicTask, using: Any = None, **_: Any) -> None:
    push_on_commit(removed=[instance.name], using=using)


def _bulk_written(
    sender: Any,
    pks: Sequence[Any] = (),
    names: Sequence[str] = (),
    removed: Sequence[str] = (),
    using: Any = None,
    **_: Any,
) -> None:
    push_on_commit(pks, names=names, removed=removed, using=using)


def _beat_started(sender: Any = None, **_: Any) -> None:
    """A redisbeat beat in a Django project brings Redis up to date with the table, and
    pushes the delayed calls left waiting (by a process that died before it could)."""
    try:
        scheduler_cls = symbol_by_name(getattr(sender, "scheduler_cls", None) or "")
    except Exception:
        return
    if not (isinstance(scheduler_cls, type) and issubclass(scheduler_cls, RedisScheduler)):
        return
    threading.Thread(target=_reconcile_quietly, name="redisbeat-django-sync", daemon=True).start()
    outbox.retrier.kick()


def _reconcile_quietly() -> None:
    try:
        result = reconcile()
        if result.changed or result.rejected:
            log.info(
                "redisbeat: periodic tasks synced at beat start: added %d, updated %d, "
                "removed %d, not accepted %d",
                len(result.added),
                len(result.updated),
                len(result.removed),
                len(result.rejected),
            )
    except Exception as exc:
        log.warning("redisbeat: periodic task sync at beat start failed (%s); retrying", exc)
        retrier.kick()
    finally:
        close_old_connections()
