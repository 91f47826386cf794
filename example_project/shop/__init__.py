"""The shop project; importing it loads the Celery app, so ``@shared_task`` binds to it."""

from __future__ import annotations

from .celery import app as celery_app

__all__ = ("celery_app",)
