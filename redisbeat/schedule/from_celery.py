"""Static ``app.conf.beat_schedule`` entries, turned into redisbeat entries."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from celery.schedules import crontab, schedule

from ..errors import InvalidEntry, InvalidSchedule
from .bad_items import BadItem
from .entry import Entry
from .kinds import Cron, Crontab, Interval, as_schedule
from .task_names import BY_SETTING, checking, unknown_tasks

log = logging.getLogger(__name__)

CONFIG_SOURCE = "config"
#: Keys a ``beat_schedule`` item may have: Celery's own, then redisbeat's.
CELERY_KEYS = {"task", "schedule", "args", "kwargs", "options", "relative"}
REDISBEAT_KEYS = {
    "enabled",
    "start_at",
    "end_at",
    "one_off",
    "catch_up",
    "grace",
    "description",
    "dst_gap",
    "dst_fold",
    "max_runs",
    "overlap",
    "jitter",
}
#: Keys that set the schedule's own fields (a Crontab's or Cron's DST policies).
SCHEDULE_KEYS = ("dst_gap", "dst_fold")


def config_entries(app: Any, tasks: Collection[str] | None = None) -> list[Entry]:
    """The entries ``app.conf.beat_schedule`` asks for, plus Celery's default ones.

    Raises :class:`InvalidEntry` naming the entry and the field on the first bad item
    (``tasks``: as for :func:`read_config`).
    """
    entries, bad = read_config(app, tasks)
    if bad:
        raise bad[0].error
    return entries


def read_config(
    app: Any, tasks: Collection[str] | None = None
) -> tuple[list[Entry], list[BadItem]]:
    """The entries ``app.conf.beat_schedule`` asks for (with Celery's default ones), and
    the items that make no entry: a beat sends the first and sets the others aside.

    Given ``tasks``, the names the app registers, an item whose task is not among them
    makes no entry either (unless ``redisbeat_check_task_names`` is False).
    """
    items: dict[str, Any] = dict(_default_items(app))
    items.update(app.conf.beat_schedule or {})
    entries: list[Entry] = []
    bad: list[BadItem] = []
    for name, item in items.items():
        try:
            entries.append(_entry(name, item))
        except InvalidEntry as exc:
            bad.append(BadItem.of(name, item, exc, CONFIG_SOURCE))
    if tasks is not None and checking(app):
        named = ((e.name, e.task) for e in entries)
        unknown = {p.name: p for p in unknown_tasks(named, tasks, app.main, BY_SETTING)}
        bad += [BadItem.of(n, items[n], error, CONFIG_SOURCE) for n, error in unknown.items()]
        entries = [e for e in entries if e.name not in unknown]
    return entries, bad


def digests(entries: Iterable[Entry]) -> dict[str, str]:
    """Entry name -> a digest of its definition: what tells two configurations apart."""
    return {e.name: hashlib.sha256(e.dumps().encode()).hexdigest()[:16] for e in entries}


def version(entry_digests: Mapping[str, str]) -> str:
    """The version of a whole configuration: equal configurations have equal versions."""
    data = json.dumps(entry_digests, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def differences(ours: Mapping[str, str], theirs: Mapping[str, str]) -> str:
    """What ``theirs`` adds, changes and removes relative to ``ours``, for a log line."""
    added = sorted(set(theirs) - set(ours))
    removed = sorted(set(ours) - set(theirs))
    changed = sorted(n for n in set(ours) & set(theirs) if ours[n] != theirs[n])
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (("adds", added), ("changes", changed), ("removes", removed))
        if names
    ]
    return "; ".join(parts) or "no entry differs"


def _entry(name: str, item: Any) -> Entry:
    if not isinstance(item, Mapping):
        raise InvalidEntry(str(name), "beat_schedule", "must be a dict with 'task' and 'schedule'")
    unknown = set(item) - CELERY_KEYS - REDISBEAT_KEYS
    if unknown:
        field = sorted(unknown, key=str)[0]
        close = difflib.get_close_matches(str(field), sorted(CELERY_KEYS | REDISBEAT_KEYS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidEntry(name, field, f"unknown beat_schedule field{hint}")
    for required in ("task", "schedule"):
        if required not in item:
            raise InvalidEntry(name, required, "is required")
    fields = {k: v for k, v in item.items() if k in REDISBEAT_KEYS and k not in SCHEDULE_KEYS}
    schedule = _schedule(name, item["schedule"], bool(item.get("relative", False)))
    return Entry(
        name=name,
        task=item["task"],
        schedule=_with_policies(name, schedule, item),
        args=item.get("args") or (),
        kwargs=item.get("kwargs") or {},
        options=item.get("options") or {},
        source=CONFIG_SOURCE,
        **fields,
    )


def _schedule(name: str, value: Any, relative: bool) -> Any:
    if (
        relative
        and isinstance(value, (int, float, timedelta, schedule))
        and not isinstance(value, crontab)
    ):
        interval = as_schedule(value)
        assert isinstance(interval, Interval)
        return Interval(every=interval.every, relative=True)
    if isinstance(value, datetime) and value.tzinfo is None:
        raise InvalidEntry(name, "schedule", "a one-off datetime must be time-zone aware")
    return value


def _with_policies(name: str, value: Any, item: Mapping[str, Any]) -> Any:
    """The schedule with the DST policies the item sets beside it (a Celery ``crontab``
    has no field for them)."""
    policies = {k: item[k] for k in SCHEDULE_KEYS if k in item}
    if not policies:
        return value
    try:
        schedule = as_schedule(value)
        if not isinstance(schedule, (Crontab, Cron)):
            raise InvalidEntry(name, next(iter(policies)), "applies to crontab and cron schedules")
        return dataclasses.replace(schedule, **policies)
    except InvalidSchedule as exc:
        field = exc.field.removeprefix("schedule.")
        raise InvalidEntry(name, field if field in policies else exc.field, exc.message) from None


def _default_items(app: Any) -> Mapping[str, Any]:
    # Celery's own beat adds this entry when results need cleaning up by a task.
    try:
        needs_cleanup = app.conf.result_expires and not app.backend.supports_autoexpire
    except Exception:  # a misconfigured result backend is the worker's problem, not beat's
        needs_cleanup = False
    if not needs_cleanup:
        return {}
    return {
        "celery.backend_cleanup": {
            "task": "celery.backend_cleanup",
            "schedule": crontab("0", "4", "*"),
            "options": {"expires": 12 * 3600},
        }
    }
