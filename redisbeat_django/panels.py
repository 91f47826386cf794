"""The change page's read-only panels: the schedule preview, the live state and the run
history from Redis, and the sync status.

A page reads the row's live state once (the preview and the live state share it) and its
history once; with Redis down each panel says so, and the page still renders.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from django.contrib import admin
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from redisbeat import Run
from redisbeat.errors import RedisBeatError
from redisbeat.store.run_state import NOT_STARTED, TROUBLE, EntryState

from .conf import get_store
from .describe import (
    NO_VALUE,
    format_time,
    outcome_text,
    passed_text,
    preview,
    seconds,
    store_trouble,
    zone_info,
)
from .models import PeriodicTask

#: What a Redis outage raises (connection refused, timeouts, a bad store setting).
UNAVAILABLE = (RedisBeatError,)
TEMPLATES = "admin/redisbeat_django/periodictask"
STATUS_FIELDS = ("schedule_preview", "live_state", "sync_state")
HISTORY_FIELDS = ("run_history",)
#: The runs the history panel shows, newest first.
HISTORY_LIMIT = 20
#: Why an occurrence waits to be sent at the next run time (``EntryState.held``).
HELD = {
    "jitter": "held back by its jitter",
    "overlap": "waiting for the previous run to end (overlap)",
}
_LIVE_ONE = "_redisbeat_live_one"


class StatusPanels:
    """The change form's read-only panels, for the PeriodicTask admin to inherit."""

    def _live_one(self, obj: PeriodicTask) -> tuple[EntryState | None, str]:
        """The row's live state, read once per page; (None, reason) when Redis is down."""
        cached: tuple[EntryState | None, str] | None = getattr(obj, _LIVE_ONE, None)
        if cached is None:
            try:
                cached = (get_store().states([obj.name])[0], "")
            except UNAVAILABLE as exc:
                cached = (None, store_trouble(exc))
            setattr(obj, _LIVE_ONE, cached)
        return cached

    @admin.display(description="Schedule preview")
    def schedule_preview(self, obj: PeriodicTask) -> SafeString:
        context = preview(obj, self._live_one(obj)[0])
        return render_to_string(f"{TEMPLATES}/preview.html", context)

    @admin.display(description="Live state (Redis)")
    def live_state(self, obj: PeriodicTask) -> SafeString:
        state, problem = self._live_one(obj)
        context: dict[str, Any] = {"state": state, "problem": problem, "none": NO_VALUE}
        if state is not None:
            context.update(live_context(state, obj))
        return render_to_string(f"{TEMPLATES}/live_state.html", context)

    @admin.display(description="Last runs (Redis)")
    def run_history(self, obj: PeriodicTask) -> SafeString:
        """The last runs, newest first. Read even where this site's history size is 0: the
        beats and workers keep the history, and may have theirs set."""
        context: dict[str, Any] = {"runs": [], "problem": "", "off": False}
        try:
            store = get_store()
            runs = store.history(obj.name, HISTORY_LIMIT)
            context["off"] = not runs and store.history_size <= 0
        except UNAVAILABLE as exc:
            context["problem"] = store_trouble(exc)
        else:
            zone = zone_info(obj)
            context["runs"] = [history_row(run, zone) for run in runs]
        return render_to_string(f"{TEMPLATES}/history.html", context)

    @admin.display(description="Sync")
    def sync_state(self, obj: PeriodicTask) -> SafeString:
        return render_to_string(
            f"{TEMPLATES}/sync_state.html",
            {"row": obj, "synced_at": format_time(obj.synced_at) if obj.synced_at else ""},
        )


def live_context(state: EntryState, row: PeriodicTask) -> dict[str, Any]:
    """The live state's times and texts, in the row's zone."""
    zone = zone_info(row)
    context: dict[str, Any] = {
        "next_run": format_time(state.next_run_at, zone),
        "last_run": format_time(state.last_run_at, zone),
        "missed_last": passed_text(state.last_missed, zone),
        "skipped_last": passed_text(state.last_skipped, zone),
    }
    if state.held is not None:
        context["held"] = HELD.get(state.held, state.held)
        context["held_due"] = format_time(state.held_due, zone)
    last = state.last_outcome
    if last is not None:
        context["outcome"] = outcome_text(last.outcome, last.exception)
        context["outcome_at"] = format_time(last.at, zone)
        context["outcome_runtime"] = "" if last.runtime is None else seconds(last.runtime)
        if last.outcome in NOT_STARTED:
            context["not_started"] = last.detail or last.outcome
    copy = state.last_duplicate
    if copy is not None:
        context["duplicate_last"] = (
            f"{format_time(copy.at, zone)} on {copy.worker or NO_VALUE}, task {copy.task_id} "
            f"({copy.stage} on {copy.first or NO_VALUE})"
        )
    if state.quarantined is not None:
        context["set_aside_at"] = format_time(state.quarantined.at, zone)
    if state.paused is not None:
        until = state.paused.until
        context["paused_until"] = format_time(until, zone) if until else "resumed"
    return context


def history_row(run: Run, zone: tzinfo) -> dict[str, Any]:
    """One line of the history panel, its times in ``zone``."""
    result = run.result + (f" ({run.reason})" if run.reason else "")
    if run.missed:
        result += f", {run.missed} missed before it"
    outcome = outcome_text(run.outcome, run.exception)
    if run.outcome is None and run.started is not None:
        outcome = "running"  # started, and no end recorded (yet)
    return {
        "run": run,
        "due": format_time(run.due, zone),
        "sent": format_time(run.sent_at, zone),
        "late": seconds(run.late),
        "result": result,
        "outcome": outcome,
        "problem": run.result == "failed" or run.outcome in TROUBLE,
        "runtime": seconds(run.runtime),
    }
