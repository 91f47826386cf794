"""The deployment as a whole: ``status``, ``beats``, ``quarantine`` and ``reshard``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import IO, Any

import click

from ..config import MAX_SHARDS
from ..schedule.documents import entry_from_document
from ..store import persistence
from ..store.errors import StoreError
from ..store.listing import Counts
from ..store.records import BeatInfo
from ..store.reshard import Reshard
from .checking import check_tasks, unregistered_ok
from .context import NOT_FOUND, UNHEALTHY, Failed, Tool, guarded, json_option, pass_tool
from .editing import seconds


def _ago(then: datetime, now: datetime) -> str:
    return f"{max(0.0, (now - then).total_seconds()):.1f} s ago"


@click.command()
@click.option(
    "--overdue-after",
    metavar="DURATION",
    default="60s",
    show_default=True,
    help="Count an entry as overdue once it is due for this long.",
)
@json_option
@pass_tool
@guarded
def status(tool: Tool, overdue_after: str, as_json: bool) -> None:
    """Beats alive, entries stored / scheduled / due / overdue, claims, quarantine and
    delayed tasks pending."""
    store = tool.store
    counts = store.counts(seconds(overdue_after))
    beats = store.beats()
    stats = store.beat_activity([beat.id for beat in beats])
    layout = store.layout
    warnings = _persistence_warnings(tool)
    for warning in warnings:
        click.echo(f"WARNING: {warning}", err=True)
    if as_json:
        tool.json(
            {
                "store": store.describe(),
                "shards": layout.shards,
                "resharding_to": layout.moving_to,
                "counts": counts,
                "beats": [{"beat": b, "stats": stats.get(b.id)} for b in beats],
                "warnings": warnings,
            }
        )
    else:
        _status_tables(tool, counts, beats, stats, overdue_after)
    if not beats:
        raise Failed("no beat is alive: nothing is being sent", UNHEALTHY)


def _persistence_warnings(tool: Tool) -> list[str]:
    """A line for each server of the store that keeps nothing on disk (none when the
    setting silences them, or the server will not say: never an error)."""
    if not tool.config.persistence_warning:
        return []
    try:
        return [persistence.warning(where) for where in tool.store.volatile_servers()]
    except StoreError:
        return []


def _status_tables(
    tool: Tool,
    counts: Counts,
    beats: list[BeatInfo],
    stats: dict[str, dict[str, Any]],
    overdue_after: str,
) -> None:
    tool.say(f"store: {tool.store.describe()}  shards: {tool.store.layout.spelled}")
    tool.table(
        (
            "entries",
            "scheduled",
            "due now",
            f"overdue > {overdue_after}",
            "in flight",
            "quarantined",
            "delayed pending",
        ),
        [
            [
                counts.entries,
                counts.scheduled,
                counts.due,
                counts.overdue,
                counts.inflight,
                counts.quarantined,
                counts.delayed,
            ]
        ],
    )
    now = datetime.fromtimestamp(counts.now_ms / 1000, timezone.utc)
    tool.table(
        (
            "beat",
            "last heartbeat",
            "sent (last period)",
            "late p50 / p99",
            "recovered",
            "missed",
            "sent expired",
        ),
        ([beat.id, _ago(beat.last_seen, now), *_stat_cells(stats.get(beat.id))] for beat in beats),
        title=f"{len(beats)} beat(s) alive",
    )


def _stat_cells(stats: dict[str, Any] | None) -> list[object]:
    if not stats:
        return [None, None, None, None, None]
    late = f"{stats.get('late_p50_ms', 0):.0f} / {stats.get('late_p99_ms', 0):.0f} ms"
    counted = ("sent", "recovered", "missed", "expired")
    sent, recovered, missed, expired = (int(stats.get(k, 0)) for k in counted)
    return [sent, late, recovered, missed, expired]


@click.command()
@json_option
@pass_tool
@guarded
def beats(tool: Tool, as_json: bool) -> None:
    """The beats alive: id, host, pid and last heartbeat."""
    alive = tool.store.beats()
    if as_json:
        tool.json(alive)
        return
    now = datetime.fromtimestamp(tool.store.now_ms() / 1000, timezone.utc)
    tool.table(
        ("beat", "host", "pid", "last heartbeat"),
        ([b.id, b.hostname, b.pid, _ago(b.last_seen, now)] for b in alive),
    )


@click.group()
def quarantine() -> None:
    """Definitions set aside because they did not load, or kept failing."""


@quarantine.command(name="list")
@json_option
@pass_tool
@guarded
def quarantine_list(tool: Tool, as_json: bool) -> None:
    """Every definition set aside, with why, when and by whom."""
    found = tool.store.quarantined()
    if as_json:
        tool.json(list(found.values()))
        return
    tool.table(
        ("name", "error", "at", "by"),
        ([q.name, q.error, q.at, q.by] for q in sorted(found.values(), key=lambda q: q.name)),
    )


@quarantine.command(name="show")
@click.argument("name")
@json_option
@pass_tool
@guarded
def quarantine_show(tool: Tool, name: str, as_json: bool) -> None:
    """One definition set aside, as it was stored."""
    record = tool.store.quarantined().get(name)
    if record is None:
        raise Failed(f"no quarantined definition named {name!r}", NOT_FOUND)
    if as_json:
        tool.json(record)
        return
    tool.table(
        ("field", "value"),
        [
            ("error", record.error),
            ("at", record.at),
            ("by", record.by),
            ("definition", record.definition),
        ],
        title=f"quarantined {name}",
    )


@quarantine.command(name="drop")
@click.argument("name")
@pass_tool
@guarded
def quarantine_drop(tool: Tool, name: str) -> None:
    """Forget a definition set aside (and anything else stored under its name)."""
    if name not in tool.store.quarantined():
        raise Failed(f"no quarantined definition named {name!r}", NOT_FOUND)
    tool.store.remove(name)
    tool.say(f"{name}: dropped")


@quarantine.command(name="restore")
@click.argument("name")
@click.option("--file", "path", type=click.File(), help="The fixed definition, as JSON.")
@click.option("--edit", is_flag=True, help="Fix the definition in $EDITOR first.")
@unregistered_ok
@pass_tool
@guarded
def quarantine_restore(
    tool: Tool, name: str, path: IO[str] | None, edit: bool, unregistered_ok: bool
) -> None:
    """Put a definition back on the schedule: as stored (once what made it fail is fixed,
    a missing task say), or as fixed in a file or in $EDITOR. It is checked first."""
    record = tool.store.quarantined().get(name)
    if record is None:
        raise Failed(f"no quarantined definition named {name!r}", NOT_FOUND)
    text = path.read() if path is not None else record.definition
    if edit:
        text = click.edit(text, extension=".json") or text
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise Failed(f"entry {name!r}: field 'definition': is not JSON: {exc}") from None
    if isinstance(document, dict) and document.get("name") != name:
        raise Failed(f"entry {name!r}: field 'name': the definition names {document.get('name')!r}")
    entry = entry_from_document(document, name)
    check_tasks(tool, [entry], unregistered_ok)
    tool.store.upsert(entry, force=True)
    tool.say(f"{name}: restored; next run {tool.when(tool.store.state(name).next_run_at)}")


@click.command()
@click.argument("shards", type=click.IntRange(1, MAX_SHARDS))
@click.option(
    "--claims-timeout",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds entries that beats keep claimed may hold up the end of the move.",
)
@pass_tool
@guarded
def reshard(tool: Tool, shards: int, claims_timeout: float) -> None:
    """Split the deployment's entries into SHARDS shards, while beats and editors run.

    No occurrence is lost or sent twice. Run it again after an interruption: it finishes
    the move it began. Then set redisbeat_shards = SHARDS everywhere (processes follow the
    count recorded in Redis, and say so while their setting differs).
    """
    Reshard(tool.store, say=tool.say).run(shards, claims_timeout=claims_timeout)


COMMANDS = [status, beats, quarantine, reshard]
