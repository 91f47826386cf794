"""``export`` and ``import``: entries to and from a JSON or YAML file.

A file is a list of entry documents (see :mod:`redisbeat.schedule.documents`). Export
streams, so a million entries never sit in memory at once; import reads the whole file,
checks every entry (its task name, and who owns what it would replace) before it writes
anything, reports every problem at once (:mod:`.reading`), and writes only what differs, so
importing the same file twice changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import IO, Any, NoReturn

import click
from rich.progress import Progress

from ..errors import CorruptEntry, InvalidEntry
from ..schedule.entry import Entry
from .checking import task_problems, unregistered_ok
from .context import Failed, Tool, guarded, json_option, pass_tool
from .reading import Problem, read_file

#: Entries read from Redis, or written to it, at a time.
CHUNK = 1000
FORMATS = ("json", "yaml")


def _format(path: str, given: str | None) -> str:
    if given:
        return given
    return "yaml" if Path(path).suffix.lower() in (".yaml", ".yml") else "json"


def _yaml() -> Any:
    try:
        import yaml  # an optional dependency: the "yaml" extra
    except ImportError:
        raise Failed("YAML needs PyYAML: pip install 'celery-redisbeat[yaml]'") from None
    return yaml


@click.command(name="export")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Default: from FILE's suffix.")
@click.option("--source", help="Only the entries of this source.")
@pass_tool
@guarded
def export(tool: Tool, path: str, fmt: str | None, source: str | None) -> None:
    """Write every entry's definition to FILE ('-': standard output)."""
    fmt = _format(path, fmt)
    store = tool.store
    entries = (e for e in store if source is None or e.source == source)
    with click.open_file(path, "w", encoding="utf-8") as out, _progress(tool, path) as bar:
        task = bar.add_task("exporting", total=len(store))
        written = _write(out, fmt, entries, lambda: bar.advance(task))
    tool.err.print(f"exported {written} entries to {path}")


def _write(out: IO[str], fmt: str, entries: Iterator[Entry], tick: Any) -> int:
    yaml = _yaml() if fmt == "yaml" else None
    count = 0
    out.write("" if yaml else "[")
    for entry in entries:
        document = entry.to_json()
        if yaml:
            out.write(yaml.safe_dump([document], sort_keys=False, allow_unicode=True))
        else:
            out.write(("," if count else "") + "\n" + json.dumps(document, ensure_ascii=False))
        count += 1
        tick()
    out.write("" if yaml else "\n]\n")
    if yaml and not count:
        out.write("[]\n")
    return count


def _progress(tool: Tool, path: str) -> Progress:
    """A bar on stderr, shown where a person watches (not when stderr is a pipe)."""
    return Progress(console=tool.err, transient=True, disable=not tool.err.is_terminal)


@click.command(name="import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Default: from FILE's suffix.")
@click.option("--dry-run", is_flag=True, help="Check everything and print what would change.")
@click.option("--force", is_flag=True, help="Take over entries another source owns.")
@unregistered_ok
@json_option
@pass_tool
@guarded
def import_(
    tool: Tool,
    path: str,
    fmt: str | None,
    dry_run: bool,
    force: bool,
    unregistered_ok: bool,
    as_json: bool,
) -> None:
    """Add or update the entries FILE holds; nothing is written unless all of them are valid."""
    fmt = _format(path, fmt)
    read = read_file(path, fmt, _yaml() if fmt == "yaml" else None)
    read.add(task_problems(tool, read.entries, unregistered_ok))
    changes, conflicts = _plan(tool, read.entries, force)
    read.add(conflicts)
    if read.problems:
        _refuse(tool, path, read.problems, dry_run, as_json)
    changed = [name for name, what in changes.items() if what != "unchanged"]
    if not dry_run and changed:
        by_name = {e.name: e for e in read.entries}
        with _progress(tool, path) as bar:
            task = bar.add_task("importing", total=len(changed))
            for start in range(0, len(changed), CHUNK):
                chunk = [by_name[n] for n in changed[start : start + CHUNK]]
                tool.store.upsert_many(chunk, force=force)
                bar.advance(task, len(chunk))
    summary = {what: sum(1 for w in changes.values() if w == what) for what in _ACTIONS}
    verb = "would be" if dry_run else "were"
    message = ", ".join(f"{count} {verb} {what}" for what, count in summary.items())
    if not changed:
        message = f"nothing to change: {len(changes)} entries already as in the file"
    if as_json:
        done = {n: changes[n] for n in changed}
        tool.json({"dry_run": dry_run, "summary": summary, "changes": done, "message": message})
        return
    if dry_run and changed:
        tool.table(("name", "would be"), ([n, changes[n]] for n in changed))
    tool.say(message)


_ACTIONS = ("added", "updated", "unchanged")


def _refuse(
    tool: Tool, path: str, problems: list[Problem], dry_run: bool, as_json: bool
) -> NoReturn:
    """Every problem found, then exit 1: nothing was written."""
    count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
    headline = f"{path}: {count}; nothing was written"
    if as_json:
        found = [dataclasses.asdict(p) for p in problems]
        tool.json({"dry_run": dry_run, "problems": found, "message": headline})
        raise Failed(headline)
    raise Failed("\n  ".join([f"{headline}:", *map(str, problems)]))


def _plan(
    tool: Tool, entries: list[Entry], force: bool
) -> tuple[dict[str, str], list[InvalidEntry]]:
    """What importing each entry would do, and an error for each that another source owns."""
    store, changes, conflicts = tool.store, {}, []
    it = iter(entries)
    while chunk := list(islice(it, CHUNK)):
        stored = store.definitions([e.name for e in chunk])
        for entry in chunk:
            raw = stored.get(entry.name)
            if raw is None:
                changes[entry.name] = "added"
                continue
            new = store.with_defaults(entry)
            if raw == new.dumps():
                changes[entry.name] = "unchanged"
                continue
            try:
                owner = Entry.loads(raw, entry.name).source
            except CorruptEntry:
                owner = entry.source  # a stored definition that does not load is replaced
            if owner != entry.source and not force:
                conflicts.append(
                    InvalidEntry(
                        entry.name,
                        "source",
                        f"the stored entry belongs to {owner!r}, the file says "
                        f"{entry.source!r} (--force takes it over)",
                    )
                )
            changes[entry.name] = "updated"
    return changes, conflicts


COMMANDS = [export, import_]
