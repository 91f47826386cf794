"""Schedules in plain English and their upcoming run times, for the admin.

Cron text comes from :mod:`redisbeat.schedule.words`; run times from redisbeat's own timing
functions (``Entry.first_due_ms``/``Entry.next_due_ms``), so the preview shows what a beat
will do.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone, tzinfo
from typing import Any

from django.utils import timezone as django_tz
from django.utils.html import format_html

from redisbeat import Entry
from redisbeat.errors import Incompatible, InvalidEntry, InvalidSchedule, RedisBeatError
from redisbeat.schedule.ids import jitter_ms
from redisbeat.schedule.kinds import get_zone
from redisbeat.schedule.timing import from_ms, to_ms
from redisbeat.schedule.words import cron_text, dst_text, solar_text
from redisbeat.store.errors import StoreError
from redisbeat.store.run_state import EntryState, Passed

from .conf import get_store
from .entries import form_field
from .timetext import relative

NO_VALUE = "—"


def store_trouble(exc: BaseException) -> str:
    """What a page says of a store call that failed: a server (or driver) redisbeat cannot
    work with, and trouble mended in the settings or the server's configuration (no password
    given or a wrong one, TLS, an ACL denial, no such database), each in its own one line
    that names the URL and the fix, since no retry mends it; else that Redis is unavailable."""
    if isinstance(exc, Incompatible):
        return str(exc)
    if isinstance(exc, StoreError) and exc.trouble.misconfigured:
        return exc.describe()
    return f"Redis unavailable: {exc}"


def default_zone() -> str:
    """The zone of schedules that name none: the Celery app's, as the beat reads it."""
    try:
        return get_store().timezone
    except (RedisBeatError, ValueError):
        return "UTC"


def with_defaults(entry: Entry) -> Entry:
    """``entry`` with the zone and DST policies the store fills in when it writes it."""
    try:
        return get_store().with_defaults(entry)
    except (RedisBeatError, ValueError):
        return entry.with_defaults(default_zone())


#: What each catch-up policy does, for the preview's notes.
CATCH_UP_NOTES = {
    "once": "After downtime, one run is sent for all the runs missed.",
    "skip": "After downtime, missed runs are skipped.",
    "all": "After downtime, every run missed is sent, oldest first.",
}
#: What each DST policy does, for the preview's notes.
DST_NOTES = {
    "shift": "a run whose time the clocks skip in spring runs as they go forward",
    "skip": "a run whose time the clocks skip in spring is skipped that day",
    "once": "a run whose time the clocks repeat in autumn runs once, before they go back",
    "twice": "a run whose time the clocks repeat in autumn runs in both passes",
}
#: What each overlap policy but the default does, for the preview's notes.
OVERLAP_NOTES = {
    "skip": "Skips a run falling due while the previous one still runs on a worker",
    "buffer_one": "A run falling due while the previous one still runs waits, and is sent "
    "when that one ends (at most one waits)",
}
HOOK_NOTE = " (needs the worker hook: redisbeat_track_runs)."


def zone_of(row: Any) -> str:
    """The zone a row's times are shown in: its own, else the Celery time zone."""
    return str(row.timezone or default_zone())


def describe(row: Any, *, with_zone: bool = True) -> str:
    """One line saying when a row runs, e.g. "Every 15 minutes, Monday through Friday"."""
    kind = row.kind
    if kind == "interval":
        return _interval(row.every, row.period)
    if kind in ("crontab", "cron"):
        if kind == "crontab":
            fields = (row.minute, row.hour, row.day_of_month, row.month_of_year, row.day_of_week)
            text = cron_text(" ".join(f.strip() or "*" for f in fields), either=False)
        else:
            text = cron_text(row.cron_expression.strip(), either=True)
        policies = dst_text(row.dst_gap or None, row.dst_fold or None)
        return f"{text} ({zone_of(row)}{policies})" if with_zone else text
    if kind == "clocked":
        if row.clocked_at is None:
            return "Once (no time set)"
        return f"Once, at {format_time(row.clocked_at, zone_info(row))}"
    if kind == "solar":
        return solar_text(row.solar_event, row.latitude, row.longitude)
    return f"Unknown schedule kind {kind!r}"


def _interval(every: int | None, period: str) -> str:
    if not every:
        return "Interval (no period set)"
    if every == 1:
        return f"Every {period.removesuffix('s')}"
    return f"Every {every} {period}"


def format_time(value: datetime | None, zone: tzinfo | None = None) -> str:
    """``Mon 2024-05-06 09:00:00 CEST`` in ``zone`` (default: Django's current zone)."""
    if value is None:
        return NO_VALUE
    if django_tz.is_naive(value):
        value = django_tz.make_aware(value)
    local = value.astimezone(zone or django_tz.get_current_timezone())
    text = local.strftime("%a %Y-%m-%d %H:%M:%S")
    if local.microsecond:
        text += f".{local.microsecond // 1000:03d}"
    return f"{text} {local.tzname()}"


def time_cell(value: datetime | None, detail: str = "") -> str:
    """A change list cell: "in 4 s" or "2 min ago", one line, with the exact time in Django's
    current zone as its title, then ``detail`` (and in ``datetime``, for scripts)."""
    if value is None:
        return NO_VALUE
    return format_html(
        '<time class="rb-when" datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        f"{format_time(value)}; {detail}" if detail else format_time(value),
        relative(value, django_tz.now()),
    )


def name_list(names: list[str], most: int = 10) -> str:
    """``a, b, c and 7 more``."""
    shown = ", ".join(names[:most])
    return f"{shown} and {len(names) - most} more" if len(names) > most else shown


def zone_info(row: Any) -> tzinfo:
    """The zone of :func:`zone_of` as a tzinfo (UTC when the row names an unknown zone)."""
    try:
        return get_zone(zone_of(row))
    except InvalidSchedule:
        return timezone.utc


def next_runs(
    entry: Entry,
    zone: str,
    count: int = 5,
    *,
    first: datetime | None = None,
    now: datetime | None = None,
) -> list[datetime]:
    """The next ``count`` runs, aware in ``zone``; from ``first`` (the live next due time) if
    given. Each is delayed by the entry's jitter, as the beats delay it (the same amount).

    Raises ``ImportError`` for a solar schedule when ``ephem`` is not installed.
    """
    tz = get_zone(zone)
    now_ms = to_ms(now or datetime.now(timezone.utc))
    due = to_ms(first) if first is not None else entry.first_due_ms(now_ms, zone)
    runs: list[datetime] = []
    while due is not None and len(runs) < count:
        after = entry.next_due_ms(due, due, zone)
        delay = 0
        if entry.jitter:
            room = None if after is None else after - due
            delay = jitter_ms(entry.name, due, entry.jitter, room)
        runs.append(from_ms(due + delay).astimezone(tz))
        due = after
    return runs


def preview(row: Any, state: EntryState | None) -> dict[str, Any]:
    """What the change form's schedule preview shows: text, next runs, notes (or an error)."""
    zone = zone_of(row)
    try:
        entry = with_defaults(row.to_entry())
    except InvalidEntry as exc:
        return {"error": f"Not a valid schedule ({form_field(row, exc.field)}: {exc.message})"}
    live = None
    if state is not None and row.sync_status == "synced" and row.enabled:
        # An occurrence held back (by its jitter, say) is due at held_due, sent later.
        live = state.held_due or state.next_run_at
    try:
        runs = next_runs(replace(entry, enabled=True, max_runs=None), zone, first=live)
    except (ImportError, RedisBeatError, ValueError) as exc:
        return {"description": describe(row), "error": f"Cannot compute run times: {exc}"}
    now = datetime.now(timezone.utc)
    return {
        "description": describe(row),
        "zone": zone,
        "runs": [
            format_time(run, run.tzinfo) + (" (due now)" if run < now else "") for run in runs
        ],
        "notes": notes(row, entry, get_zone(zone)),
    }


def notes(row: Any, entry: Entry, zone: tzinfo) -> list[str]:
    """What the preview says of the row's policies, besides its run times."""
    found = []
    if not row.enabled:
        found.append("Disabled: these are the times it would run if enabled.")
    if row.start_at:
        found.append(f"Starts {format_time(row.start_at, zone)}.")
    if row.end_at:
        found.append(f"Ends {format_time(row.end_at, zone)}.")
    if row.one_off:
        found.append("One-off: runs once, then never again.")
    if row.max_runs:
        found.append(f"Runs at most {row.max_runs} time{'s' if row.max_runs > 1 else ''}.")
    if row.kind in ("crontab", "cron"):
        gap = getattr(entry.schedule, "dst_gap", None) or "shift"  # None: the usual ones
        fold = getattr(entry.schedule, "dst_fold", None) or "once"
        found.append(f"Daylight saving: {DST_NOTES[gap]}; {DST_NOTES[fold]}.")
    found.append(CATCH_UP_NOTES.get(row.catch_up, CATCH_UP_NOTES["once"]))
    if row.overlap in OVERLAP_NOTES:
        found.append(OVERLAP_NOTES[row.overlap] + HOOK_NOTE)
    if entry.jitter:
        found.append(
            f"Waits up to {seconds(entry.jitter)} after each due time (jitter), never past "
            "the next one; the times above include it."
        )
    return found


def seconds(value: float | None) -> str:
    """``20 s``, ``0.25 s``, ``1.234 s``: a duration as the admin shows it."""
    if value is None:
        return NO_VALUE
    return f"{value:.3f}".rstrip("0").rstrip(".") + " s"


def outcome_text(outcome: str | None, exception: str | None = None) -> str:
    """``succeeded``, ``failed (ValueError)``; the placeholder when it is not known."""
    if not outcome:
        return NO_VALUE
    return f"{outcome} ({exception})" if exception else outcome


def passed_text(passed: Passed | None, zone: tzinfo | None = None) -> str:
    """The last occurrences missed or skipped: ``3 before Mon 2024-05-06 09:00:00 UTC (late)``."""
    if passed is None:
        return ""
    reason = f" ({passed.reason})" if passed.reason else ""
    return f"{passed.count} before {format_time(passed.due, zone)}{reason}"
