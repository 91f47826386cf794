"""The Celery app the Django tests use; fixtures point its store at their redis-server."""

from __future__ import annotations

from celery import Celery

app = Celery("djangotests", set_as_current=False)
app.conf["broker_url"] = "redis://127.0.0.1:1/0"  # replaced by the fixtures
app.conf["timezone"] = "UTC"


@app.task(name="reports.daily")
def daily_report() -> None:
    """A registered task the admin offers."""


@app.task(name="cleanup.sessions")
def cleanup_sessions() -> None:
    """Another registered task."""
