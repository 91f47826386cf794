"""Changing entries: ``add``, ``remove``, ``enable``, ``disable`` and ``run``.

``add`` builds the entry's document from its options and reads it as ``import`` does, so it
is checked exactly as the API checks it.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import click

from ..schedule.clock import parse_iso, to_ms
from ..schedule.documents import entry_from_document
from .checking import check_tasks, unregistered_ok
from .context import NOT_FOUND, Failed, Tool, guarded, pass_tool

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800, None: 1}


def seconds(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``1h30m``, ``2d``: a duration in seconds."""
    parts = list(_DURATION.finditer(text.strip()))
    if not parts or "".join(p[0] for p in parts) != text.strip():
        raise click.BadParameter(f"{text!r} is not a duration such as 30s, 5m, 1h30m or 2d")
    return sum(float(p[1]) * _UNIT_SECONDS[p[2]] for p in parts)


def _json_value(name: str, field: str, text: str | None, default: Any) -> Any:
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise Failed(f"entry {name!r}: field {field!r}: is not JSON: {exc}") from None


@click.command()
@click.argument("name")
@click.argument("task")
@click.option("--every", metavar="DURATION", help="An interval: 30s, 5m, 1h30m, 2d.")
@click.option("--crontab", metavar="'M H DOM MON DOW'", help="Celery crontab fields.")
@click.option("--cron", metavar="EXPR", help="A cron string (day of month OR day of week).")
@click.option("--at", metavar="ISO-TIME", help="Once, at this time (with its UTC offset).")
@click.option("--tz", metavar="ZONE", help="The zone of --crontab or --cron (default: the app's).")
@click.option(
    "--dst-gap",
    type=click.Choice(["shift", "skip"]),
    help="A --crontab or --cron run in the hour DST skips: at the change, or none that day "
    "(default: redisbeat_dst_gap).",
)
@click.option(
    "--dst-fold",
    type=click.Choice(["once", "twice"]),
    help="A --crontab or --cron run in the hour DST repeats: once, or in both passes "
    "(default: redisbeat_dst_fold).",
)
@click.option("--args", metavar="JSON", help="Positional arguments, a JSON list.")
@click.option("--kwargs", metavar="JSON", help="Keyword arguments, a JSON object.")
@click.option("--options", metavar="JSON", help="apply_async options, a JSON object.")
@click.option("--queue", help="The queue to send to (an option).")
@click.option("--start-at", metavar="ISO-TIME", help="The first occurrence (anchors --every).")
@click.option("--end-at", metavar="ISO-TIME", help="No occurrence after this time.")
@click.option(
    "--catch-up", type=click.Choice(["once", "skip", "all"]), default="once", show_default=True
)
@click.option("--grace", metavar="DURATION", help="The most an occurrence may be late.")
@click.option("--one-off", is_flag=True, help="Run once, at the first occurrence.")
@click.option("--max-runs", type=click.IntRange(min=1), help="Send at most this many, then stop.")
@click.option(
    "--overlap",
    type=click.Choice(["allow", "skip", "buffer_one"]),
    default="allow",
    show_default=True,
    help="While the previous run still goes on (needs redisbeat_track_runs on the workers).",
)
@click.option("--jitter", metavar="DURATION", help="Delay each run by a stable amount up to this.")
@click.option("--disabled", is_flag=True, help="Store it disabled.")
@click.option("--description", default="")
@click.option("--replace", is_flag=True, help="Replace an entry of that name.")
@click.option("--force", is_flag=True, help="Take over an entry another source owns.")
@unregistered_ok
@pass_tool
@guarded
def add(tool: Tool, /, name: str, task: str, **options: Any) -> None:
    """Add entry NAME that sends TASK on one schedule (--every, --crontab, --cron or --at)."""
    document = _document(name, task, options)
    entry = entry_from_document(document, name)
    check_tasks(tool, [entry], options["unregistered_ok"])
    store = tool.store
    if not options["replace"] and name in store:
        raise Failed(f"entry {name!r} exists: pass --replace to change it")
    changed = store.upsert(entry, force=options["force"])
    state = store.state(name)
    what = "stored" if changed else "unchanged"
    tool.say(f"{name}: {what}; next run {tool.when(state.next_run_at)}")


def _document(name: str, task: str, options: dict[str, Any]) -> dict[str, Any]:
    kinds = [k for k in ("every", "crontab", "cron", "at") if options[k] is not None]
    if len(kinds) != 1:
        raise click.UsageError("give one schedule: --every, --crontab, --cron or --at")
    wall = {k: options[k] for k in ("tz", "dst_gap", "dst_fold")}
    schedule = _schedule(name, kinds[0], options[kinds[0]], wall)
    extra = _json_value(name, "options", options["options"], {})
    if options["queue"] and isinstance(extra, dict):
        extra["queue"] = options["queue"]
    document: dict[str, Any] = {
        "name": name,
        "task": task,
        "schedule": schedule,
        "args": _json_value(name, "args", options["args"], []),
        "kwargs": _json_value(name, "kwargs", options["kwargs"], {}),
        "options": extra,
        "enabled": not options["disabled"],
        "start_at": options["start_at"],
        "end_at": options["end_at"],
        "one_off": options["one_off"],
        "max_runs": options["max_runs"],
        "catch_up": options["catch_up"],
        "overlap": options["overlap"],
        "jitter": seconds(options["jitter"]) if options["jitter"] else None,
        "grace": seconds(options["grace"]) if options["grace"] else None,
        "description": options["description"],
    }
    return document


def _schedule(name: str, kind: str, value: str, wall: dict[str, str | None]) -> dict[str, Any]:
    """The schedule's JSON form; ``wall``: the zone and DST policies of a wall-clock one."""
    if kind in ("every", "at") and any(wall.values()):
        raise click.UsageError("--tz, --dst-gap and --dst-fold go with --crontab or --cron")
    if kind == "every":
        return {"kind": "interval", "every": seconds(value)}
    if kind == "at":
        return {"kind": "clocked", "at": value}
    if kind == "cron":
        return {"kind": "cron", "expr": value, **wall}
    fields = value.split()
    if len(fields) != 5:
        raise Failed(
            f"entry {name!r}: field 'schedule': --crontab takes five fields "
            f"(minute hour day-of-month month day-of-week), got {value!r}"
        )
    minute, hour, dom, month, dow = fields
    return {
        "kind": "crontab",
        "minute": minute,
        "hour": hour,
        "day_of_month": dom,
        "month_of_year": month,
        "day_of_week": dow,
        **wall,
    }


@click.command()
@click.argument("names", nargs=-1, required=True)
@pass_tool
@guarded
def remove(tool: Tool, names: tuple[str, ...]) -> None:
    """Remove entries (with their state, claims and any quarantined copy)."""
    missing = [name for name in names if not tool.store.remove(name)]
    for name in names:
        tool.say(f"{name}: {'not found' if name in missing else 'removed'}")
    if missing:
        raise Failed(f"no entry named {', '.join(map(repr, missing))}", NOT_FOUND)


@click.command()
@click.argument("names", nargs=-1, required=True)
@pass_tool
@guarded
def enable(tool: Tool, names: tuple[str, ...]) -> None:
    """Enable entries: each is due again at its next occurrence."""
    for name in names:
        tool.store.enable(name)
        tool.say(f"{name}: enabled; next run {tool.when(tool.store.state(name).next_run_at)}")


@click.command()
@click.argument("names", nargs=-1, required=True)
@pass_tool
@guarded
def disable(tool: Tool, names: tuple[str, ...]) -> None:
    """Disable entries: kept, not sent until enabled."""
    for name in names:
        tool.store.disable(name)
        tool.say(f"{name}: disabled")


@click.command()
@click.argument("names", nargs=-1, required=True)
@click.option(
    "--until",
    metavar="ISO-TIME",
    help="Resume by itself at the first run from then (with its UTC offset); "
    "default: until resumed.",
)
@click.option("--note", default="", help="Why, shown wherever the entry is shown.")
@pass_tool
@guarded
def pause(tool: Tool, names: tuple[str, ...], until: str | None, note: str) -> None:
    """Pause entries: none of their runs is sent until resumed, or until --until."""
    at = _aware_time("until", until) if until else None
    if at is not None and to_ms(at) <= tool.store.now_ms():
        raise click.BadParameter(
            f"{until} has passed: the pause would be over before it began; give a later "
            "time, or leave --until out to pause until resumed",
            param_hint="--until",
        )
    for name in names:
        tool.store.pause(name, until=at, note=note)
        then = f"; next run {tool.when(tool.store.state(name).next_run_at)}" if at else ""
        tool.say(f"{name}: paused until {at.isoformat() if at else 'resumed'}{then}")


@click.command()
@click.argument("names", nargs=-1, required=True)
@pass_tool
@guarded
def resume(tool: Tool, names: tuple[str, ...]) -> None:
    """Resume paused entries, from their next run."""
    for name in names:
        was = tool.store.resume(name)
        what = "resumed" if was else "was not paused"
        tool.say(f"{name}: {what}; next run {tool.when(tool.store.state(name).next_run_at)}")


def _aware_time(option: str, text: str) -> datetime:
    try:
        at = parse_iso(text)
    except ValueError:
        raise click.BadParameter(
            f"not an ISO 8601 time: {text!r}", param_hint=f"--{option}"
        ) from None
    if at.utcoffset() is None:
        raise click.BadParameter(
            f"give the UTC offset, e.g. {text}+00:00", param_hint=f"--{option}"
        )
    return at


@click.command(name="run")
@click.argument("names", nargs=-1, required=True)
@pass_tool
@guarded
def run_now(tool: Tool, names: tuple[str, ...]) -> None:
    """Make entries due now (a beat sends each once; the schedule then goes on)."""
    for name in names:
        if name not in tool.store:
            raise Failed(f"no entry named {name!r}", NOT_FOUND)
        tool.store.run_now(name)
        tool.say(f"{name}: due now")


@click.command()
@click.argument("name")
@click.option("--start", required=True, metavar="ISO-TIME", help="The first due time to send.")
@click.option("--end", required=True, metavar="ISO-TIME", help="The last due time (past).")
@click.option("--rate", type=click.FloatRange(0.001, 1000), default=10.0, show_default=True)
@pass_tool
@guarded
def backfill(tool: Tool, name: str, start: str, end: str, rate: float) -> None:
    """Send each occurrence of NAME due from --start to --end once, --rate per second."""
    dues = tool.store.backfill(
        name, _aware_time("start", start), _aware_time("end", end), rate=rate
    )
    if not dues:
        tool.say(f"{name}: no occurrence was due from {start} to {end}")
        return
    took = len(dues) / rate
    tool.say(
        f"{name}: {len(dues)} occurrence(s) from {dues[0].isoformat()} to "
        f"{dues[-1].isoformat()} queued, sent over {took:.1f} s (pending owner backfill:{name})"
    )


COMMANDS = [add, remove, enable, disable, pause, resume, run_now, backfill]
