from __future__ import annotations

from django.apps import AppConfig


class RedisbeatDjangoConfig(AppConfig):
    name = "redisbeat_django"
    verbose_name = "Periodic tasks (redisbeat)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals

        signals.connect()
