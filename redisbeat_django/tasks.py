"""A Celery task that reconciles the PeriodicTask table with Redis.

Add it to ``beat_schedule`` (every minute is plenty) to catch changes made with raw SQL or
by processes that died before they could push, periodic edits and delayed calls alike::

    CELERY_BEAT_SCHEDULE = {
        "redisbeat-django-reconcile": {"task": "redisbeat_django.reconcile", "schedule": 60},
    }
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .outbox import push
from .sync import reconcile as _reconcile


@shared_task(name="redisbeat_django.reconcile", ignore_result=True)
def reconcile() -> dict[str, Any]:
    result = _reconcile()
    pushed = push()
    return {
        "delayed_calls": pushed.pushed,
        "added": len(result.added),
        "updated": len(result.updated),
        "removed": len(result.removed),
        "rejected": len(result.rejected),
    }
