"""What an entry's page shows: where the entry is defined, its definition, its schedule in
words with its next run times, its live state and its last runs, all read from Redis.

The panels are a periodic task's (:mod:`..panels`, same templates and texts), for an entry
of any source; its times are in the entry's zone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from redisbeat import Entry, ScheduleStore
from redisbeat.schedule.words import describe
from redisbeat.store.run_state import EntryState

from ..describe import NO_VALUE, format_time, seconds, zone_info
from ..models import PeriodicTask
from ..panels import HISTORY_LIMIT, TEMPLATES, history_row, live_context
from .listing import SOURCES, load_definition, loose_fields, states_of

#: Where an entry of each source is defined, and so where to change it.
ORIGINS = {
    "config": "The beat_schedule of the Celery app's settings: change it there and deploy; "
    "the beats write it to Redis as they start.",
    "django": "A periodic task row of this Django site: edit it there.",
    "api": "Added at runtime through the store API (ScheduleStore.upsert) or the command "
    "line (celery redisbeat add, or import): change it the same way.",
}


def entry_page(store: ScheduleStore, name: str) -> dict[str, Any] | None:
    """The page's context; None when Redis holds nothing under ``name``."""
    state = store.states([name])[0]
    raw = store.definitions([name]).get(name)
    if raw is None and state.quarantined is None:
        return None
    entry, problem = load_definition(raw, name)
    loose = loose_fields(raw or (state.quarantined.definition if state.quarantined else ""))
    source = entry.source if entry else str(loose.get("source") or "")
    # An unsaved row stands for the entry where the panels want one: its zone.
    zoned = PeriodicTask(name=name, timezone=store.zone_of(entry) if entry else "")
    return {
        "name": name,
        "entry": entry,
        "state": state,
        "states": states_of(entry, state),
        "problem": problem,
        "source": source,
        "source_label": SOURCES.get(source, source or NO_VALUE),
        "origin": ORIGINS.get(
            source,
            f"Written with the source {source!r}, by a program or "
            "an import that names it: change it there.",
        ),
        "definition": definition_rows(entry, loose),
        "preview": preview(store, entry, state, zoned),
        "live": live(state, zoned),
        "history": history(store, name, zoned),
    }


def definition_rows(entry: Entry | None, loose: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The definition, field by field; what a definition that does not load says."""
    if entry is None:
        return [(key, _text(value)) for key, value in loose.items()]
    return [
        ("task", entry.task),
        ("enabled", "yes" if entry.enabled else "no"),
        ("args", _text(list(entry.args))),
        ("kwargs", _text(dict(entry.kwargs))),
        ("options", _text(dict(entry.options))),
        ("start at / end at", f"{_time(entry.start_at)} / {_time(entry.end_at)}"),
        ("one-off / max runs", f"{'yes' if entry.one_off else 'no'} / {entry.max_runs or '—'}"),
        ("catch up", f"{entry.catch_up} (grace: {seconds(entry.grace)})"),
        ("overlap / jitter", f"{entry.overlap} / {seconds(entry.jitter)}"),
        ("description", entry.description or NO_VALUE),
    ]


def preview(
    store: ScheduleStore, entry: Entry | None, state: EntryState, zoned: PeriodicTask
) -> SafeString:
    """The schedule in words and its next five runs, as the store computes them."""
    if entry is None:
        return render_to_string(f"{TEMPLATES}/preview.html", {"error": "No definition loads."})
    zone = zone_info(zoned)
    notes = []
    if not entry.enabled:
        notes.append("Disabled: it has no next run until it is enabled.")
    if state.paused is not None:
        notes.append("Paused: the runs above are those after the pause.")
    context = {
        "description": describe(entry.schedule, store.timezone),
        "zone": store.zone_of(entry),
        "runs": [format_time(run, zone) for run in store.next_runs(entry.name, 5)],
        "notes": notes,
    }
    return render_to_string(f"{TEMPLATES}/preview.html", context)


def live(state: EntryState, zoned: PeriodicTask) -> SafeString:
    context = {
        "state": state,
        "problem": "",
        "none": NO_VALUE,
        **live_context(state, zoned),
        "release_hint": "Release from quarantine, below, puts it back once the cause is fixed",
    }
    return render_to_string(f"{TEMPLATES}/live_state.html", context)


def history(store: ScheduleStore, name: str, zoned: PeriodicTask) -> SafeString:
    """The last runs, newest first (the beats and workers keep them, with their own
    history size: read even where this site's is 0)."""
    runs = store.history(name, HISTORY_LIMIT)
    zone = zone_info(zoned)
    context = {
        "runs": [history_row(run, zone) for run in runs],
        "off": not runs and store.history_size <= 0,
        "problem": "",
    }
    return render_to_string(f"{TEMPLATES}/history.html", context)


def _text(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _time(value: datetime | None) -> str:
    return format_time(value) if value else NO_VALUE
