"""``manage.py redisbeat_sync``: make Redis hold exactly the PeriodicTask table."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from redisbeat.errors import RedisBeatError
from redisbeat_django.describe import store_trouble
from redisbeat_django.sync import reconcile


class Command(BaseCommand):
    help = (
        "Push every periodic task to Redis and remove the ones deleted from the database. "
        "Catches changes made by bulk updates, raw SQL or while Redis was down."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = reconcile()
        except RedisBeatError as exc:
            raise CommandError(f"Nothing synced: {store_trouble(exc)}") from exc
        for label, names in (
            ("added", result.added),
            ("updated", result.updated),
            ("removed", result.removed),
        ):
            for name in names:
                self.stdout.write(f"{label}: {name}")
        for name, reason in sorted(result.rejected.items()):
            self.stderr.write(f"not accepted: {name}: {reason}")
        self.stdout.write(
            f"{len(result.added)} added, {len(result.updated)} updated, "
            f"{len(result.removed)} removed, {result.unchanged} unchanged, "
            f"{len(result.rejected)} not accepted"
        )
