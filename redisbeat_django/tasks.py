"""A Celery task that reconciles the PeriodicTask table with Redis.

Add it to ``beat_schedule`` (every minute is plenty) to catch changes made with raw SQL or
by processes that died before they could push::

    CELERY_BEAT_SCHEDULE = {
        "redisbeat-django-reconcile": {"task": "redisbeat_django.reconcile", "schedule": 60},
    }
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .sync import reconcile as _reconcile


@shared_task(name="redisbeat_django.reconcile", ignore_result=True)
def reconcile() -> dict[str, Any]:
    result = _reconcile()
    return {
        "added": len(result.added),
        "updated": len(result.updated),
        "removed": len(result.removed),
        "rejected": len(result.rejected),
    }
