"""``manage.py redisbeat_import``: copy django-celery-beat's periodic tasks into redisbeat."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from redisbeat.errors import ConfigurationError

from ...importer import ImportReport, import_tasks


class Command(BaseCommand):
    help = (
        "Import django-celery-beat's periodic tasks (interval, crontab, solar and clocked "
        "schedules, arguments, routing options, expiry, start time, enabled; expires becomes "
        "the end time) into "
        "redisbeat_django, creating or updating one task per name. Run it again at any time: "
        "tasks already imported and unchanged are left alone. Run history (last_run_at, "
        "total_run_count) is not imported. celery.backend_cleanup is skipped: redisbeat's "
        "beat_schedule sync provides it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--only",
            action="append",
            default=[],
            metavar="NAME",
            help="Import only the task of this name (repeat for more).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Report what the import would do, and write nothing.",
        )
        parser.add_argument(
            "--disable-source",
            action="store_true",
            help=(
                "Set enabled=False on the django-celery-beat tasks imported, so a "
                "django-celery-beat beat still running does not send them as well. Use it "
                "when switching over, as the last import: an import after it copies their "
                "disabled state."
            ),
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="Exit with status 1 if any task could not be imported.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = import_tasks(
                options["only"],
                dry_run=options["dry_run"],
                disable_source=options["disable_source"],
            )
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from None
        self._print(report)
        if options["strict"] and report.failed:
            raise CommandError(f"{len(report.failed)} task(s) could not be imported")

    def _print(self, report: ImportReport) -> None:
        styles: dict[str, Callable[[str], str]] = {
            "imported": self.style.SUCCESS,
            "updated": self.style.SUCCESS,
            "skipped": self.style.WARNING,
            "failed": self.style.ERROR,
        }
        for outcome in report.outcomes:
            self.stdout.write(str(outcome), styles.get(outcome.status))
        for name, error in sorted(report.not_pushed.items()):
            self.stdout.write(f"{name}: not in Redis yet: {error}", self.style.WARNING)
        if report.disabled:
            verb = "would disable" if report.dry_run else "disabled"
            names = ", ".join(report.disabled)
            self.stdout.write(f"django-celery-beat: {verb} {len(report.disabled)}: {names}")
        self.stdout.write(report.summary())
