"""Task names checked against the Celery app that runs them.

A name no task of the app registers would be stored, sent on time by every beat and refused
by every worker (``Received unregistered task``). Every writer that knows the app asks
:func:`unknown_tasks` before it writes: the command line, the Django admin, ``beat_schedule``
and ``redisbeat.delay``. Each says how to store such a name all the same (a task that only
the workers import), and ``redisbeat_check_task_names = False`` turns the check off.
"""

from __future__ import annotations

import difflib
import threading
import weakref
from collections.abc import Collection, Iterable
from typing import Any

from ..errors import InvalidEntry

__all__ = ["BY_SETTING", "check_task", "checking", "registered_tasks", "unknown_tasks"]

#: The setting that turns the check off (declared, validated and documented with the others).
SETTING = "redisbeat_check_task_names"
#: How a writer configured by the app's settings lets an unregistered name through.
BY_SETTING = f"set {SETTING} = False"

#: How alike a registered name must be to be offered (difflib's ratio): names of one module
#: share their prefix, which difflib's default (0.6) counts as a likeness.
CLOSE = 0.75

_loaded: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def checking(app: Any) -> bool:
    """Whether the app's writers check task names (``redisbeat_check_task_names``)."""
    return app.conf.get(SETTING, True) is not False


def registered_tasks(app: Any) -> frozenset[str]:
    """The task names the app registers once it imported its task modules, as ``celery beat``
    and ``celery worker`` see them: its ``imports`` and ``include``, what
    ``autodiscover_tasks`` finds (a Django project's apps), then the app finalised. The
    modules are imported once per process, and not again where a beat or worker did."""
    with _lock:
        if not app.loader.worker_initialized and app not in _loaded:
            app.loader.import_default_modules()
            _loaded.add(app)
    return frozenset(app.tasks)  # reading the registry finalises the app


def unknown_tasks(
    items: Iterable[tuple[str, str]], registered: Collection[str], app_name: str | None, skip: str
) -> list[InvalidEntry]:
    """An error (field ``task``) for each ``(entry name, task name)`` whose task is not in
    ``registered``, naming the close matches and how to fix it; ``skip`` says how this writer
    stores the name anyway. An app that registers no task of its own (a beat that imports
    none) has nothing to check against: no error then."""
    own = sorted(name for name in registered if not name.startswith("celery."))
    if not own:
        return []
    app = f"app {app_name!r}" if app_name else "the app"
    problems = []
    for entry, task in items:
        if task in registered:
            continue
        close = difflib.get_close_matches(task, own, n=3, cutoff=CLOSE)
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        message = (
            f"{app} registers no task {task!r}{hint}; correct the name, or {skip} "
            "if only the workers import this task"
        )
        problems.append(InvalidEntry(entry, "task", message))
    return problems


def check_task(app: Any, entry: str, task: str, skip: str = BY_SETTING) -> None:
    """Raise :func:`unknown_tasks`' error when ``app`` registers no task ``task`` (and the
    app's settings check task names)."""
    if checking(app):
        for problem in unknown_tasks([(entry, task)], registered_tasks(app), app.main, skip):
            raise problem
