"""The admin change list's columns: a row's schedule, live state and sync status as cells.

The live state is read from Redis once a page (``admin.read_states``) and attached to each
row; these cells only show what was attached, and never talk to Redis themselves.
"""

from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.utils.html import format_html
from django.utils.safestring import SafeString

from redisbeat.store.run_state import NOT_STARTED, TROUBLE, EntryState

from .describe import (
    NO_VALUE,
    describe,
    format_time,
    outcome_text,
    passed_text,
    seconds,
    time_cell,
)
from .models import PeriodicTask

#: The attribute of a row that holds its live state, once read.
LIVE_ATTR = "_redisbeat_live"
#: The live state's columns. The last run's task id and beat are in its cell's title (and
#: ``last_task_id``, ``sent_by`` are there for a list_display of one's own): with them as
#: columns the list no longer fits a 1,280-pixel screen.
LIVE_COLUMNS = ("next_run", "last_run", "runs", "last_outcome", "missed")


def live(row: PeriodicTask) -> EntryState | None:
    state: EntryState | None = getattr(row, LIVE_ATTR, None)
    return state


class ChangeListColumns:
    """The change list's computed columns, for a ModelAdmin of PeriodicTask to inherit."""

    @admin.display(description="Schedule", ordering="kind")
    def schedule(self, obj: PeriodicTask) -> str:
        return describe(obj)

    @admin.display(description="Next run")
    def next_run(self, obj: PeriodicTask) -> str | SafeString:
        state = live(obj)
        if state is not None and state.quarantined is not None:
            return format_html(
                '<strong class="rb-problem" title="{}">{}</strong>',
                state.quarantined.error,
                "set aside",
            )
        if state is not None and state.problem:
            return format_html(
                '<strong class="rb-problem" title="{}">{}</strong>', state.problem, "needs repair"
            )
        if state is not None and state.running:
            return format_html("<strong>{}</strong>", "sending now")
        if state is not None and state.stopped == "max_runs":
            return format_html(
                '<span title="{}">{}</span>', "it sent as many runs as its max runs", "done"
            )
        if state is not None and state.paused is not None:
            until = state.paused.until
            return format_html(
                '<span class="rb-paused" title="{}">{}</span>',
                state.paused.note,
                f"paused until {format_time(until)}" if until else "paused",
            )
        cell = time_cell(state.next_run_at if state else None)
        if state is not None and state.failures:
            return format_html(
                '{} <span class="rb-problem" title="{}">{} failed</span>',
                cell,
                state.last_error or "",
                state.failures,
            )
        return cell

    @admin.display(description="Last run")
    def last_run(self, obj: PeriodicTask) -> str | SafeString:
        state = live(obj)
        if state is None:
            return NO_VALUE
        sent = [f"task {state.last_task_id}"] if state.last_task_id else []
        sent += [f"sent by {state.last_beat}"] if state.last_beat else []
        return time_cell(state.last_run_at, "; ".join(sent))

    @admin.display(description="Runs")
    def runs(self, obj: PeriodicTask) -> str:
        state = live(obj)
        return NO_VALUE if state is None else str(state.total_run_count)

    @admin.display(description="Last outcome")
    def last_outcome(self, obj: PeriodicTask) -> str | SafeString:
        """How its last run ended on a worker (the worker hook's record)."""
        state = live(obj)
        last = state.last_outcome if state is not None else None
        if last is None:
            return NO_VALUE
        title = f"{format_time(last.at)}, ran {seconds(last.runtime)}, task {last.task_id}"
        if last.outcome in NOT_STARTED:  # it never ran: the title says why
            why = last.detail or last.outcome
            title = f"could not start: {why}; {format_time(last.at)}, task {last.task_id}"
        return format_html(
            '<span class="{}" title="{}">{}</span>',
            "rb-problem" if last.outcome in TROUBLE else "rb-outcome",
            title,
            outcome_text(last.outcome, last.exception),
        )

    @admin.display(description="Missed")
    def missed(self, obj: PeriodicTask) -> str | SafeString:
        """Runs not sent within their grace, in all; the title says which were last."""
        state = live(obj)
        if state is None:
            return NO_VALUE
        if not state.missed:
            return "0"
        last = f"last: {passed_text(state.last_missed)}" if state.last_missed else ""
        return format_html('<span class="rb-missed" title="{}">{}</span>', last, state.missed)

    @admin.display(description="Last task id")
    def last_task_id(self, obj: PeriodicTask) -> str | SafeString:
        state = live(obj)
        if state is None or not state.last_task_id:
            return NO_VALUE
        task_id = state.last_task_id
        return format_html('<code title="{}">{}…</code>', task_id, task_id[:8])

    @admin.display(description="Sent by")
    def sent_by(self, obj: PeriodicTask) -> str | SafeString:
        state = live(obj)
        if state is None or not state.last_beat:
            return NO_VALUE
        return format_html('<span title="{}">{}</span>', state.last_beat, state.last_beat)

    @admin.display(description="Sync", ordering="sync_status")
    def sync_cell(self, obj: PeriodicTask) -> SafeString:
        label = obj.get_sync_status_display()
        title = obj.sync_error or (f"Synced {format_time(obj.synced_at)}" if obj.synced_at else "")
        if obj.sync_status == "synced":  # the usual case: an icon, as narrow as "Enabled"'s
            return format_html(
                '<img class="rb-sync rb-sync-synced" src="{}" alt="{}" title="{}">',
                static("admin/img/icon-yes.svg"),
                label,
                title or label,
            )
        return format_html(
            '<span class="rb-sync rb-sync-{}" title="{}">{}</span>', obj.sync_status, title, label
        )
