"""The adapters' Django side: a private PostgreSQL server and a child process that does the
ORM work on it (``python -m benchmarks.bench.orm``), so the harness never configures Django.

The child reads one request per line on stdin, a JSON array ``[operation, argument]``, and
answers each with one line, ``{"ok": result}`` or ``{"error": traceback}``. Rows travel as
plain lists; the adapters do the time arithmetic.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from redisbeat_testkit.postgres import PostgresServer, bindir
from redisbeat_testkit.processes import environ_without_django

from ..common import ROOT

SETTINGS_MODULE = "benchmarks.bench.django_settings"
TASK = "bench.tick"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
BATCH = 5000


def postgres_missing() -> str | None:
    """Why no private PostgreSQL server can be started here, or None."""
    try:
        bindir()
    except RuntimeError as exc:
        return str(exc)
    return None


class Database:
    """A private PostgreSQL server, migrated, and the ORM process working on it."""

    def __init__(self, workdir: Path, env: Mapping[str, str]) -> None:
        self.workdir = workdir
        #: The Celery app's environment (BENCH_*), for redisbeat_django's pushes to Redis.
        self.app_env = dict(env)
        self.server: PostgresServer | None = None
        self.process: subprocess.Popen[str] | None = None
        self._directory: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        """What a Django process (the ORM child, a django-celery-beat beat) needs."""
        assert self.server is not None, "Database.start() first"
        return {
            "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
            "BENCH_PG_HOST": "127.0.0.1",
            "BENCH_PG_PORT": str(self.server.port),
        }

    def start(self) -> Database:
        try:
            # Not under workdir: as root the server runs as "postgres", which may not enter it.
            self._directory = Path(tempfile.mkdtemp(prefix="bench-pg-"))
            self._directory.chmod(0o755)
            self.server = PostgresServer(self._directory / "pg").start()
            self.workdir.mkdir(parents=True, exist_ok=True)
            with (self.workdir / "orm.log").open("ab") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.bench.orm"],
                    cwd=ROOT,
                    env={**environ_without_django(), **self.app_env, **self.env},
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )
            self.call("migrate")
        except BaseException:
            self.stop()
            raise
        return self

    def call(self, operation: str, argument: Any = None) -> Any:
        """Run one operation in the ORM process and return its result."""
        process = self.process
        assert process is not None and process.stdin and process.stdout, "not started"
        process.stdin.write(json.dumps([operation, argument]) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the ORM process exited; see {self.workdir / 'orm.log'}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{operation} failed in the ORM process:\n{reply['error']}")
        return reply["ok"]

    def stop(self) -> None:
        if self.process is not None:
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    pipe.close()  # end of input: the child exits
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


# -- the child ---------------------------------------------------------------------------------


def _time(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def migrate(_: None) -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _interval(every: int) -> Any:
    from django_celery_beat.models import IntervalSchedule

    interval, _ = IntervalSchedule.objects.get_or_create(
        every=every, period=IntervalSchedule.SECONDS
    )
    return interval


def dcb_load(rows: list[list[Any]]) -> int:
    """django-celery-beat rows ``[name, every s, last run ms]``, with bulk_create."""
    from django.db import transaction
    from django_celery_beat.models import PeriodicTask, PeriodicTasks

    with transaction.atomic():
        intervals = {every: _interval(every) for every in {row[1] for row in rows}}
        PeriodicTask.objects.bulk_create(
            (
                PeriodicTask(
                    name=name,
                    task=TASK,
                    interval=intervals[every],
                    kwargs=json.dumps({"entry": name}),
                    last_run_at=_time(last_run_ms),
                )
                for name, every, last_run_ms in rows
            ),
            batch_size=BATCH,
        )
        # bulk_create sends no signals; record the change as a save would.
        PeriodicTasks.update_changed()
    return len(rows)


def dcb_add(row: list[Any]) -> None:
    """One django-celery-beat row ``[name, every s, last run ms]``, as a program creates it."""
    from django_celery_beat.models import PeriodicTask

    name, every, last_run_ms = row
    PeriodicTask.objects.create(
        name=name,
        task=TASK,
        interval=_interval(every),
        kwargs=json.dumps({"entry": name}),
        last_run_at=_time(last_run_ms),
    )


def dcb_admin_add(row: list[Any]) -> None:
    """One django-celery-beat row ``[name, every s, start ms]``, validated and saved in one
    transaction as its admin does (the admin cannot set last_run_at, only a start time)."""
    from django.db import transaction
    from django_celery_beat.models import PeriodicTask

    name, every, start_ms = row
    with transaction.atomic():
        task = PeriodicTask(
            name=name,
            task=TASK,
            interval=_interval(every),
            kwargs=json.dumps({"entry": name}),
            start_time=_time(start_ms),
        )
        task.full_clean()
        task.save()


def dcb_clear(_: None) -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

    _truncate(PeriodicTask, IntervalSchedule)
    PeriodicTasks.update_changed()


def admin_connect(_: None) -> None:
    """Import the Celery app and connect redisbeat_django's store, so the first admin save
    costs what every later one does."""
    from redisbeat_django.conf import get_store

    get_store().client.ping()


def admin_add(row: list[Any]) -> None:
    """One redisbeat_django row ``[name, every ms, anchor ms]``, validated and saved in one
    transaction as its admin does; the commit pushes it to Redis."""
    from django.db import transaction

    from redisbeat_django.models import PeriodicTask

    name, every_ms, anchor_ms = row
    whole = every_ms % 1000 == 0
    with transaction.atomic():
        task = PeriodicTask(
            name=name,
            task=TASK,
            kwargs={"entry": name},
            kind="interval",
            every=every_ms // 1000 if whole else every_ms,
            period="seconds" if whole else "milliseconds",
            start_at=_time(anchor_ms),
        )
        task.full_clean()
        task.save()


def admin_clear(_: None) -> None:
    from redisbeat_django.models import PeriodicTask

    _truncate(PeriodicTask)


def _truncate(*models: Any) -> None:
    from django.db import connection

    tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models)
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


OPERATIONS: dict[str, Callable[[Any], Any]] = {
    "migrate": migrate,
    "dcb_load": dcb_load,
    "dcb_add": dcb_add,
    "dcb_admin_add": dcb_admin_add,
    "dcb_clear": dcb_clear,
    "admin_connect": admin_connect,
    "admin_add": admin_add,
    "admin_clear": admin_clear,
}


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else prints goes to the log, not between the replies
    import django

    django.setup()
    for line in sys.stdin:
        operation, argument = json.loads(line)
        try:
            reply = {"ok": OPERATIONS[operation](argument)}
        except Exception:
            reply = {"error": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
