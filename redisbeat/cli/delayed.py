"""Delayed tasks: ``pending`` (an owner's, in due order) and ``cancel``."""

from __future__ import annotations

import click

from .context import NOT_FOUND, Failed, Tool, guarded, json_option, pass_tool


@click.command()
@click.argument("owner")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@json_option
@pass_tool
@guarded
def pending(tool: Tool, owner: str, limit: int, as_json: bool) -> None:
    """OWNER's pending delayed tasks in due order: due time, state, key, task."""
    tasks = tool.store.pending(owner, limit)
    if as_json:
        tool.json(tasks)
        return
    tool.table(
        ("due", "state", "key", "task"),
        ([t.eta.isoformat(timespec="milliseconds"), t.state, t.key, t.task] for t in tasks),
    )


@click.command()
@click.argument("keys", nargs=-1, required=True)
@click.option("--owner", is_flag=True, help="KEYS are owners: cancel all their pending tasks.")
@pass_tool
@guarded
def cancel(tool: Tool, keys: tuple[str, ...], owner: bool) -> None:
    """Cancel delayed tasks by key (or every pending task of the owners named). A task a
    beat is sending already is sent, and reported as too late."""
    store = tool.store
    missing = []
    for key in keys:
        if owner:
            tool.say(f"{key}: {store.cancel_owner(key)} cancelled")
        elif store.cancel(key):
            tool.say(f"{key}: cancelled")
        else:
            task = store.get_delayed(key)
            tool.say(f"{key}: not cancelled ({task.state if task else 'no such task'})")
            if task is None:
                missing.append(key)
    if missing:
        raise Failed(f"no delayed task with key {', '.join(map(repr, missing))}", NOT_FOUND)


COMMANDS = [pending, cancel]
