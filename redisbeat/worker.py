"""The worker hook: what became of each task redisbeat sent (start, end, outcome, runtime).

Opt in on the worker's app with one setting, ``redisbeat_track_runs = True`` (Celery's
command line imports redisbeat for its ``redisbeat`` subcommand, so a ``celery worker`` sees
the setting when it starts), or call :func:`track_runs` with the app. A worker then records,
for each message a beat sent (it carries the ``redisbeat_entry`` header), when it started
and how it ended (succeeded, failed with the exception's type, retried, revoked), with one
script call per event through Celery's ``task_prerun``, ``task_postrun``, ``task_failure``
and ``task_revoked`` signals; other tasks cost a header lookup. A run the worker could not
start at all (its task not registered there, its message refused) ends as ``unregistered``
or ``rejected`` (:mod:`redisbeat.refusals`). What it records feeds the entries' ``overlap``
policies, their ``last_outcome`` and their history (``redisbeat_history_size``). A run
whose worker dies mid-way stops counting as running after ``redisbeat_run_expiry_seconds``.
Redis being unreachable never fails a task: the event is logged and dropped. The same hook
drops copies of a run as they arrive (:mod:`redisbeat.duplicates`); a delayed task's start
and end (its message carries the ``redisbeat_key`` header) are recorded for that check only.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

from celery import signals

from .config import DEFAULTS, Config
from .config.names import reject_unknown_settings
from .duplicates import DUE_HEADER, ENTRY_HEADER, KEY_HEADER, Deduplicate
from .errors import RedisBeatError
from .refusals import watch
from .store import ScheduleStore
from .store.errors import StoreError

log = logging.getLogger(__name__)

_lock = threading.Lock()
#: The apps whose runs are recorded, each with its store (made in the process that uses it).
_tracked: dict[int, tuple[Any, int, ScheduleStore | None]] = {}
#: Exception type names from ``task_failure``, until ``task_postrun`` records the end.
_failures: dict[str, str] = {}


def track_runs(app: Any) -> None:
    """Record the runs of what redisbeat sent, on this worker, for ``app``, and drop copies
    of a run as they arrive (unless ``redisbeat_duplicate_window_seconds`` is 0): call it
    before the worker starts."""
    with _lock:
        _tracked.setdefault(id(app), (app, 0, None))
        _connect()
    watch(app)
    if Config.from_app(app).duplicate_window_seconds > 0:
        app.steps["consumer"].add(Deduplicate)


def _on_worker_init(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if app is None:
        return
    if not app.conf.get("redisbeat_track_runs"):
        # A worker of an app that does not ask for it reads nothing more, but a misspelling
        # of the setting that asks: without it, copies of a run are not dropped.
        try:
            reject_unknown_settings(app.conf, DEFAULTS)
        except RedisBeatError as exc:
            log.warning("redisbeat: %s; this worker does not track runs nor drop copies", exc)
        return
    try:
        wanted = Config.from_app(app).track_runs
    except RedisBeatError as exc:
        log.warning("redisbeat: runs are not recorded: %s", exc)
        return
    if wanted:
        track_runs(app)
        log.info("redisbeat: this worker tracks runs and drops copies (redisbeat_track_runs)")


def _connect() -> None:
    signals.task_prerun.connect(_started, weak=False, dispatch_uid="redisbeat.started")
    signals.task_postrun.connect(_ended, weak=False, dispatch_uid="redisbeat.ended")
    signals.task_failure.connect(_failed, weak=False, dispatch_uid="redisbeat.failed")
    signals.task_revoked.connect(_revoked, weak=False, dispatch_uid="redisbeat.revoked")


def _store(app: Any) -> ScheduleStore | None:
    """The app's store in this process (a pool's child makes its own after the fork)."""
    with _lock:
        tracked = _tracked.get(id(app))
        if tracked is None:
            return None
        _, pid, store = tracked
        if store is None or pid != os.getpid():
            store = ScheduleStore.from_app(app)
            _tracked[id(app)] = (app, os.getpid(), store)
        return store


def _header(request: Any, name: str) -> Any:
    value = getattr(request, name, None)
    if value is None:
        headers = getattr(request, "headers", None) or {}
        value = headers.get(name) if isinstance(headers, dict) else None
    return value


def _record(app: Any, request: Any, what: str, **outcome: Any) -> None:
    entry = _header(request, ENTRY_HEADER)
    key = None if isinstance(entry, str) else _header(request, KEY_HEADER)
    if not isinstance(entry, str) and not isinstance(key, str):
        return
    due = _header(request, DUE_HEADER)
    due_ms = due if isinstance(due, int) and not isinstance(due, bool) else None
    task_id = str(getattr(request, "id", "") or "")
    worker = str(getattr(request, "hostname", None) or socket.gethostname())
    retries = getattr(request, "retries", 0)
    retries = retries if isinstance(retries, int) and retries > 0 else 0
    try:
        store = _store(app)
        if store is None:
            return
        if isinstance(key, str):  # a delayed task: marked for the duplicate check only
            store.mark_run("delayed", key, task_id, retries, what, worker)
        elif what == "start":
            store.run_started(str(entry), task_id, due_ms, worker, retries)
        else:
            store.run_ended(str(entry), task_id, due_ms, worker, retries=retries, **outcome)
    except (StoreError, RedisBeatError) as exc:
        log.warning(
            "redisbeat: could not record the %s of %s (%s): %s", what, entry or key, task_id, exc
        )


def _started(sender: Any = None, task: Any = None, **_: Any) -> None:
    if task is not None:
        _record(task.app, task.request, "start")


def _failed(
    sender: Any = None, task_id: str | None = None, exception: Any = None, **_: Any
) -> None:
    if task_id and exception is not None:
        _failures[task_id] = type(exception).__name__


def _ended(sender: Any = None, task: Any = None, state: str | None = None, **_: Any) -> None:
    if task is None:
        return
    task_id = str(getattr(task.request, "id", "") or "")
    exception = _failures.pop(task_id, None)
    outcome = {"SUCCESS": "succeeded", "RETRY": "retried", "REVOKED": "revoked"}.get(
        state or "", "failed"
    )
    _record(task.app, task.request, "end", outcome=outcome, exception=exception)


def _revoked(sender: Any = None, request: Any = None, **_: Any) -> None:
    # A revoked task that ran ends through task_postrun too; one discarded before it started
    # ends here (``request``: the task's context, its headers among its fields).
    if request is not None and sender is not None:
        _record(sender.app, request, "end", outcome="revoked", exception=None)


signals.worker_init.connect(_on_worker_init, weak=False, dispatch_uid="redisbeat.worker_init")
