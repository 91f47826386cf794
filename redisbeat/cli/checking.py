"""Task names checked against the app, for the commands that write entries: ``add``,
``import`` and ``quarantine restore`` (see :mod:`redisbeat.schedule.task_names`).

With ``--url`` there is no app to ask, and nothing is checked.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

from ..errors import InvalidEntry
from ..schedule.entry import Entry
from ..schedule.task_names import checking, registered_tasks, unknown_tasks
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
    return unknown_tasks(((e.name, e.task) for e in entries), registered, app.main, SKIP)


def check_tasks(tool: Tool, entries: Iterable[Entry], skip: bool) -> None:
    """Refuse the first entry whose task the app does not register."""
    for problem in task_problems(tool, entries, skip):
        raise problem
