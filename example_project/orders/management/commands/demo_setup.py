"""``manage.py demo_setup``: the demo's admin user and admin-managed periodic tasks.

Idempotent: a user or a task that already exists is left as it is, so edits made in the
admin survive the next run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from redisbeat.errors import InvalidEntry
from redisbeat.schedule.from_celery import config_entries
from redisbeat.schedule.kinds import Interval
from redisbeat_django.conf import celery_app
from redisbeat_django.models import PeriodicTask

USERNAME = "admin"
PASSWORD = "redisbeat-demo"

DEMO_TASKS: list[dict[str, Any]] = [
    {
        "name": "purge-cancelled-every-5s",
        "task": "orders.purge_cancelled",
        "kind": "interval",
        "every": 5,
        "period": "seconds",
        "kwargs": {"days": 90},
        "description": "Admin-managed interval task.",
    },
    {
        "name": "sales-report-cron",
        "task": "orders.nightly_report",
        "kind": "cron",
        "cron_expression": "*/1 * * * *",
        "kwargs": {"recipients": ["sales@example.com"]},
        "description": "A cron string; nightly in real life, every minute in the demo.",
    },
    {
        "name": "digest-hourly-disabled",
        "task": "orders.send_digest",
        "kind": "interval",
        "every": 1,
        "period": "hours",
        "enabled": False,
        "description": "Disabled: enable it in the admin and the beats pick it up at once.",
    },
]


class Command(BaseCommand):
    help = "Create the demo superuser and the admin-managed periodic tasks (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--periods",
            type=Path,
            help="Write {entry name: period in seconds} of every enabled interval entry here.",
        )

    def handle(self, *args: Any, periods: Path | None = None, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(username=USERNAME).exists():
            self.stdout.write(f"user {USERNAME!r} exists; left as it is")
        else:
            User.objects.create_superuser(USERNAME, "admin@example.com", PASSWORD)
            self.stdout.write(f"created superuser {USERNAME!r}")
        for fields in DEMO_TASKS:
            defaults = {k: v for k, v in fields.items() if k != "name"}
            _, created = PeriodicTask.objects.get_or_create(name=fields["name"], defaults=defaults)
            self.stdout.write(f"{'created' if created else 'kept'} periodic task {fields['name']}")
        if periods is not None:
            # The runner checks that no occurrence of these entries goes missing.
            periods.write_text(json.dumps(interval_periods(), indent=2, sort_keys=True))


def interval_periods() -> dict[str, float]:
    """Period in seconds of every enabled interval entry, from beat_schedule and the table."""
    entries = config_entries(celery_app())
    for row in PeriodicTask.objects.filter(enabled=True):
        try:
            entries.append(row.to_entry())
        except InvalidEntry:  # an invalid row is never scheduled, so it cannot be missed
            continue
    return {
        e.name: e.schedule.every
        for e in entries
        if e.enabled and isinstance(e.schedule, Interval) and not e.one_off
    }
