"""Task names (and the arguments their signatures take) checked against the app, for the
commands that write entries: ``add``, ``import`` and ``quarantine restore`` (see
:mod:`redisbeat.schedule.task_names`).

With ``--url`` there is no app to ask, and nothing is checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from ..errors import InvalidEntry
from ..schedule.entry import Entry
from ..schedule.task_names import checking, registered_tasks, unknown_tasks
from ..sending.celery_internals import argument_check
from .context import Failed, Tool

#: How a command stores a name the app does not register, all the same.
SKIP = "pass --unregistered-ok"

unregistered_ok = click.option(
    "--unregistered-ok",
    is_flag=True,
    help="Store task names the app does not register (tasks only the workers import).",
)


def task_problems(tool: Tool, entries: Iterable[Entry], skip: bool) -> list[InvalidEntry]:
    """An error for each entry whose task the app does not register (none when ``skip``,
    with no app, or with ``redisbeat_check_task_names = False``)."""
    app = tool.app
    if skip or app is None or not checking(app):
        return []
    try:
        registered = registered_tasks(app)
    except Exception as exc:  # what importing the user's task modules raised
        raise Failed(
            f"cannot import the task modules of app {app.main!r} to check task names: "
            f"{type(exc).__name__}: {exc} (--unregistered-ok stores without checking)"
        ) from None
    entries = list(entries)
    unknown = unknown_tasks(((e.name, e.task) for e in entries), registered, app.main, SKIP)
    named = {p.name for p in unknown}
    return unknown + [
        p for e in entries if e.name not in named and (p := _refused_arguments(app, e))
    ]


def _refused_arguments(app: Any, entry: Entry) -> InvalidEntry | None:
    """The error a beat's send would meet, each time, for arguments the task's signature
    refuses (Celery's own check, where the task has one)."""
    task = app.tasks.get(entry.task)
    check = argument_check(task) if task is not None else None
    if check is None:
        return None
    try:
        check(*entry.args, **entry.kwargs)
    except TypeError as exc:
        field = "kwargs" if entry.kwargs and not entry.args else "args"
        return InvalidEntry(entry.name, field, f"task {entry.task!r} refuses them: {exc}")
    return None


def check_tasks(tool: Tool, entries: Iterable[Entry], skip: bool) -> None:
    """Refuse the first entry whose task the app does not register."""
    for problem in task_problems(tool, entries, skip):
        raise problem
