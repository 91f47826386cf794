"""Reading entries: ``list`` (sorted by next run, a page at a time) and ``show``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from fnmatch import fnmatchcase
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

import click

from ..schedule.words import describe
from ..store.history import Run
from ..store.listing import Listed
from ..store.run_state import NOT_STARTED, EntryState, Passed
from .context import Tool, dumps, guarded, json_option, pass_tool
from .editing import COMMANDS as EDITING

#: Rows per table when a long list is printed: a table is drawn once it is complete.
TABLE_ROWS = 1000


@click.command(name="list")
@click.option("--enabled/--disabled", default=None, help="Only enabled, or only disabled, entries.")
@click.option("--source", help="Only entries of this source (config, django, api, ...).")
@click.option("--task", metavar="GLOB", help="Only entries whose task matches (fnmatch).")
@click.option("--name", metavar="GLOB", help="Only entries whose name matches (fnmatch).")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Entries to print (0: all of them, read a page at a time).",
)
@click.option("--after", metavar="CURSOR", help="Go on after the row a previous list ended at.")
@json_option
@pass_tool
@guarded
def list_entries(
    tool: Tool,
    enabled: bool | None,
    source: str | None,
    task: str | None,
    name: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """Entries sorted by next run (then those with none), with their live state.

    A list that stops at --limit ends with the cursor to go on from (--after).
    """
    if after is None and enabled is False:
        after = "n:"  # a disabled entry has no next run: skip the schedule
    try:
        walk = tool.store.walk(after, source=source, name=name)
        page = _Page((row for row in walk if _matches(row, enabled, source, task, name)), limit)
        if as_json:
            _print_json(page)
        else:
            _print_tables(tool, page)
    except ValueError as exc:  # a cursor this walk did not write
        raise click.BadParameter(str(exc), param_hint="--after") from None


class _Page:
    """Up to ``limit`` rows (0: all), streamed; once read, ``next_cursor`` says where the
    next page begins (None: nothing follows)."""

    def __init__(self, rows: Iterator[Listed], limit: int) -> None:
        self._rows = rows
        self._limit = limit
        self.next_cursor: str | None = None

    def __iter__(self) -> Iterator[Listed]:
        last: Listed | None = None
        for count, row in enumerate(self._rows):
            if self._limit and count == self._limit and last is not None:
                self.next_cursor = last.cursor  # a row follows the page's last
                return
            yield row
            last = row


def _matches(
    row: Listed, enabled: bool | None, source: str | None, task: str | None, name: str | None
) -> bool:
    entry = row.entry
    if name is not None and not fnmatchcase(row.name, name):
        return False
    if entry is None:  # a definition that does not load shows whatever else is asked
        return enabled is None and source is None and task is None
    return (
        (enabled is None or entry.enabled == enabled)
        and (source is None or entry.source == source)
        and (task is None or fnmatchcase(entry.task, task))
    )


def _print_json(page: _Page) -> None:
    click.echo('{"entries": [', nl=False)
    for count, row in enumerate(page):
        click.echo(("," if count else "") + "\n" + dumps(_row_json(row)), nl=False)
    click.echo(f'\n], "next": {dumps(page.next_cursor)}}}')


def _row_json(row: Listed) -> dict[str, Any]:
    return {
        "name": row.name,
        "entry": row.entry.to_json() if row.entry else None,
        "state": row.state,
        "problem": row.problem,
        "cursor": row.cursor,
    }


def _print_tables(tool: Tool, page: _Page) -> None:
    """One table per ``TABLE_ROWS`` rows: a table is drawn once it is complete."""
    zone = ZoneInfo(tool.store.timezone)
    columns = ("name", "next run", "schedule", "task", "enabled", "source", "last run", "state")
    rows = iter(page)
    first = True
    while (chunk := list(islice(rows, TABLE_ROWS))) or first:
        tool.table(columns, (_cells(r, zone, tool) for r in chunk))
        first = False
    if page.next_cursor is not None:
        tool.say(f"More entries follow: --after '{page.next_cursor}'")


def _cells(row: Listed, zone: ZoneInfo, tool: Tool) -> list[Any]:
    entry, state = row.entry, row.state
    schedule = describe(entry.schedule, tool.store.timezone) if entry else "—"
    return [
        row.name,
        _local(state.next_run_at, zone),
        schedule,
        entry.task if entry else None,
        entry.enabled if entry else None,
        entry.source if entry else None,
        _local(state.last_run_at, zone),
        row.problem or condition(state),
    ]


def condition(state: EntryState) -> str:
    """What an operator should know about an entry's runs, in a few words."""
    if state.quarantined:
        return f"quarantined: {state.quarantined.error}"
    if state.problem:
        return state.problem
    words = ["sending"] if state.running else []
    if state.held and state.next_run_at:
        why = "its jitter" if state.held == "jitter" else "the previous run to end"
        words.append(f"waiting for {why} (until {state.next_run_at.isoformat()} at the latest)")
    if state.stopped == "max_runs":
        words.append(f"done: sent {state.total_run_count}, its max_runs")
    if state.paused:
        until = state.paused.until
        words.append(f"paused until {until.isoformat() if until else 'resumed'}")
        words[-1] += f": {state.paused.note}" if state.paused.note else ""
    if state.failures:
        words.append(f"{state.failures} failed send(s): {state.last_error}")
    last = state.last_outcome
    if last and last.outcome in NOT_STARTED:
        words.append(f"last run could not start ({last.outcome}): {last.detail or '?'}")
    elif last and last.outcome != "succeeded":
        words.append(f"last run {last.outcome}" + (f": {last.exception}" if last.exception else ""))
    return "; ".join(words) or "ok"


def _outcome(state: EntryState) -> str | None:
    last = state.last_outcome
    if last is None:
        return None
    runtime = f", ran {last.runtime:.3f} s" if last.runtime is not None else ""
    exception = f" ({last.exception})" if last.exception else ""
    return f"{last.outcome}{exception}{runtime}, task {last.task_id}"


def _passed(count: int, last: Passed | None, zone: ZoneInfo) -> str | None:
    if not count:
        return None
    if last is None:
        return str(count)
    return f"{count} in all; the last {last.count} before {_local(last.due, zone)} ({last.reason})"


def _duplicates(state: EntryState, zone: ZoneInfo) -> str | None:
    """Copies of runs the workers dropped, and the last: ``2 in all; the last ...``."""
    last = state.last_duplicate
    if not state.duplicates or last is None:
        return str(state.duplicates) if state.duplicates else None
    at = _local(last.at, zone)
    return (
        f"{state.duplicates} in all; the last at {at} on {last.worker or '?'}, task "
        f"{last.task_id} ({last.stage} on {last.first or '?'})"
    )


def _local(value: datetime | None, zone: ZoneInfo) -> datetime | None:
    return value.astimezone(zone) if value else None


@click.command()
@click.argument("name")
@click.option("--runs", type=click.IntRange(0, 100), default=5, show_default=True)
@json_option
@pass_tool
@guarded
def show(tool: Tool, name: str, runs: int, as_json: bool) -> None:
    """An entry's definition, live state and next run times (in the entry's zone)."""
    store = tool.store
    entry = store.get(name)
    state = store.state(name)
    zone = ZoneInfo(store.zone_of(entry))
    upcoming = [due.astimezone(zone) for due in store.next_runs(name, runs)]
    words = describe(entry.schedule, store.timezone)
    if as_json:
        tool.json(
            {"entry": entry.to_json(), "state": state, "schedule": words, "next_runs": upcoming}
        )
        return
    rows: list[tuple[str, Any]] = [
        ("task", entry.task),
        ("schedule", words),
        ("enabled", entry.enabled),
        ("source", entry.source),
        ("args", dumps(entry.args)),
        ("kwargs", dumps(entry.kwargs)),
        ("options", dumps(entry.options)),
        ("start at / end at", f"{entry.start_at or '—'} / {entry.end_at or '—'}"),
        ("catch up", f"{entry.catch_up} (grace: {entry.grace or 'default'})"),
        ("max runs", entry.max_runs),
        ("overlap / jitter", f"{entry.overlap} / {f'{entry.jitter:g} s' if entry.jitter else '—'}"),
        ("description", entry.description or None),
        ("next run", _local(state.next_run_at, zone)),
        ("last run", _local(state.last_run_at, zone)),
        ("last sent", _local(state.last_sent_at, zone)),
        ("runs", state.total_run_count),
        ("last task id", state.last_task_id),
        ("last beat", state.last_beat),
        ("last outcome", _outcome(state)),
        ("missed", _passed(state.missed, state.last_missed, zone)),
        ("skipped (overlap)", _passed(state.skipped, state.last_skipped, zone)),
        ("duplicates", _duplicates(state, zone)),
        ("state", condition(state)),
    ]
    tool.table(("field", "value"), rows, title=f"entry {name}")
    tool.table(("next runs",), ([due] for due in upcoming), title=f"in {zone.key}")


@click.command()
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@json_option
@pass_tool
@guarded
def history(tool: Tool, name: str, limit: int, as_json: bool) -> None:
    """An entry's last runs, newest first: each send (or skip) and what became of it on a
    worker (kept when redisbeat_history_size is set; outcomes need redisbeat_track_runs)."""
    store = tool.store
    zone = ZoneInfo(store.zone_of(store.get(name)))
    runs = store.history(name, limit)
    if as_json:
        tool.json(runs)
        return
    if not runs and not store.history_size:
        tool.say(f"{name}: no history is kept (set redisbeat_history_size)")
        return
    heads = ("due", "result", "late", "outcome", "runtime", "worker", "task id")
    tool.table(heads, (_history_row(run, zone) for run in runs), title=f"{name}, in {zone.key}")


def _history_row(run: Run, zone: ZoneInfo) -> list[Any]:
    result = run.result + (f" ({run.reason})" if run.reason else "")
    result += f", {run.missed} missed before" if run.missed else ""
    outcome = (run.outcome or "—") + (f" ({run.exception})" if run.exception else "")
    late = f"{run.late:.3f} s" if run.late is not None else None
    runtime = f"{run.runtime:.3f} s" if run.runtime is not None else None
    return [_local(run.due, zone), result, late, outcome, runtime, run.worker or None, run.task_id]


COMMANDS = [list_entries, show, history, *EDITING]
