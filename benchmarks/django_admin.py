"""Measure the Django side at scale: the admin change list with N periodic tasks, the
deployment overview with them and M delayed tasks pending, and how long an admin edit takes
to reach Redis.

    .venv/bin/python -m benchmarks.django_admin [--tasks 100000] [--delayed 1000000]
        [--requests 20]

Starts its own redis-server and SQLite database in a temporary directory, with the Django
project of the tests (:mod:`redisbeat_testkit.djangosite`); prints a table.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import percentile


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def redis_calls(client: Any) -> int:
    return sum(int(v["calls"]) for k, v in client.info("commandstats").items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--delayed", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()

    from redisbeat_testkit.redis_server import RedisServer

    workdir = Path(tempfile.mkdtemp(prefix="redisbeat-bench-"))
    server = RedisServer(workdir).start()
    try:
        run(args, workdir, server)
    finally:
        server.stop()


def run(args: argparse.Namespace, workdir: Path, server: Any) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "redisbeat_testkit.djangosite.settings")
    from redisbeat_testkit.djangosite import settings as django_settings

    django_settings.DATABASES["default"]["NAME"] = str(workdir / "db.sqlite3")
    django_settings.ALLOWED_HOSTS = ["*"]
    import django

    django.setup()
    import redis
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client

    from redisbeat_django.conf import get_store
    from redisbeat_django.models import PeriodicTask
    from redisbeat_testkit.djangosite.celery_app import app

    app.conf.update(redisbeat_redis_url=server.url(), broker_url=server.url())
    call_command("migrate", verbosity=0)
    store = get_store()
    rows: list[tuple[str, str]] = []

    start = time.perf_counter()
    with transaction.atomic():
        PeriodicTask.objects.bulk_create(
            (
                PeriodicTask(
                    name=f"task-{i:06d}",
                    task="reports.daily",
                    kind="cron" if i % 2 else "interval",
                    cron_expression="*/5 * * * *",
                    every=60 + i % 600,
                )
                for i in range(args.tasks)
            ),
            batch_size=5000,
        )
    created = time.perf_counter() - start
    assert len(store.names("django")) == args.tasks
    rows.append((f"create {args.tasks:,} rows + push to Redis", f"{created:.1f} s"))

    start = time.perf_counter()
    load_delayed(store, args.delayed)
    rows.append((f"load {args.delayed:,} delayed tasks", f"{time.perf_counter() - start:.1f} s"))
    record_summaries(store, beats=10, periods=60)

    User.objects.create_superuser("admin", "admin@example.com", "pw")
    client = Client()
    client.login(username="admin", password="pw")
    base = "/admin/redisbeat_django/periodictask/"
    rclient = redis.Redis.from_url(server.url())
    pages = {
        "change list, first page": base,
        "change list, last page": f"{base}?p={args.tasks // 100 - 1}",
        "change list, search by name": f"{base}?q=task-09999",
        "change list, filter disabled": f"{base}?enabled__exact=0",
        "overview, page": f"{base}overview/",
        "overview, refreshed part": f"{base}overview/live/",
        "overview, JSON": f"{base}overview/json/",
        **entries_pages(store, args.tasks),
    }
    for label, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        queries = 0

        def count(execute: Any, *args: Any) -> Any:
            nonlocal queries
            queries += 1
            return execute(*args)

        with connection.execute_wrapper(count):
            before = redis_calls(rclient)
            client.get(url)
            commands = redis_calls(rclient) - before - 1  # INFO itself
        times = timed(functools.partial(client.get, url), args.requests)
        rows.append(
            (
                label,
                f"p50 {statistics.median(times):.0f} ms, p95 {percentile(times, 0.95):.0f} ms, "
                f"p99 {percentile(times, 0.99):.0f} ms, "
                f"{queries} SQL queries, {commands} Redis commands",
            )
        )

    # Edit to effect: an admin save, until Redis holds the new definition.
    row = PeriodicTask.objects.get(name="task-000000")
    change = f"{base}{row.pk}/change/"
    form = {
        "name": row.name,
        "task": row.task,
        "args": "[]",
        "kwargs": "{}",
        "headers": "{}",
        "kind": "interval",
        "period": "seconds",
        "minute": "*",
        "hour": "*",
        "day_of_week": "*",
        "day_of_month": "*",
        "month_of_year": "*",
        "enabled": "on",
        "catch_up": "once",
        "overlap": "allow",
    }
    latencies = []
    for every in range(10, 10 + args.requests * 2):
        start = time.perf_counter()
        response = client.post(change, {**form, "every": str(every)})
        errors = re.findall(r"errorlist[^>]*>(.*?)</ul>", response.content.decode(), re.S)
        assert response.status_code == 302, errors
        while store.get(row.name).schedule.every != every:  # type: ignore[union-attr]
            pass
        latencies.append((time.perf_counter() - start) * 1000)
    rows.append(
        (
            "admin save until Redis has it",
            f"p50 {statistics.median(latencies):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms",
        )
    )

    width = max(len(label) for label, _ in rows)
    print(f"{'measure':<{width}}  result")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


def load_delayed(store: Any, count: int) -> None:
    """``count`` delayed tasks a day ahead, a millisecond apart, with ``delay_many`` (as
    benchmarks/bench/scenarios/delayed.py loads them), 10,000 to a call."""
    from redisbeat.schedule.clock import from_ms

    base = store.now_ms() + 86_400_000
    for first in range(0, count, 10_000):
        store.delay_many(
            {"task": "reports.daily", "key": f"d{i:07d}", "eta": from_ms(base + i)}
            for i in range(first, min(count, first + 10_000))
        )


def record_summaries(store: Any, beats: int, periods: int) -> None:
    """An hour of summaries from ``beats`` beats, as they record them."""
    summary = {"seconds": 60.0, "sent": 3000, "late_p50_ms": 2, "late_p99_ms": 9, "missed": 0}
    for period in range(periods):
        for beat in range(beats):
            store.record_activity(f"bench-{beat}:1:{period}", summary, 180)


def entries_pages(store: Any, tasks: int) -> dict[str, str]:
    """The Entries page (every entry in Redis, whatever its source): ten API entries beside
    the rows, one of them paused, and the pages to time."""
    from redisbeat import Entry
    from redisbeat.schedule.kinds import Interval

    store.upsert_many(Entry(f"api-{i}", "proj.ping", Interval(300 + i)) for i in range(10))
    store.pause("api-3", None, "benchmark")
    base = "/admin/redisbeat_django/entry/"
    return {
        "entries, first page": base,
        "entries, filter source api (its index)": f"{base}?source=api",
        f"entries, filter source django ({tasks:,}: walked)": f"{base}?source=django",
        "entries, filter paused (bounded walk)": f"{base}?state=paused",
        "entries, search exact name (index)": f"{base}?q=task-099999",
        "entries, search pattern (bounded walk)": f"{base}?q=*-0999*",
    }


if __name__ == "__main__":
    main()
