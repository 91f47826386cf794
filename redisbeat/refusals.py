"""The worker hook's record of the runs a worker could not start.

A message a beat sent that the worker's consumer turns away never reaches ``task_prerun``:
Celery rejects it and says so with ``task_unknown`` (no task of that name is registered on
the worker) or ``task_rejected`` (the worker refused the message: a content type not in its
``accept_content``, a message that is not a valid task). With the hook, each is the run's
outcome, ``unregistered`` or ``rejected``, with a sentence saying why and what fixes it, in
the entry's run state (``last_outcome``) and history, and is counted by task in Redis for the
beats' ``redisbeat_runs_not_started_total``; a delayed task's (``redisbeat_key`` header) is
counted only.

Those signals are sent in the consumer's loop, where every message waits: the Redis calls
are bounded by :data:`~.duplicates.CHECK_TIMEOUT`, and after one fails, what the next
:data:`~.duplicates.RETRY_SECONDS` bring is dropped (with one warning), so a Redis outage
never slows the worker down more than once in a while.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from celery import signals
from kombu.exceptions import ContentDisallowed

from .duplicates import RETRY_SECONDS, bounded_config, delivery_of
from .store import ScheduleStore
from .store.runs import NotStarted

log = logging.getLogger(__name__)

#: The longest an exception's message is quoted in an outcome's detail.
SAID_LENGTH = 300

_lock = threading.Lock()
#: The apps whose refusals are recorded, each with its store (made at the first refusal).
_watched: dict[int, tuple[Any, ScheduleStore | None]] = {}
#: Until when (``time.monotonic``) refusals are dropped, after a failed record.
_retry_at = 0.0


def watch(app: Any) -> None:
    """Record the runs ``app``'s worker could not start (called by ``track_runs``)."""
    with _lock:
        _watched.setdefault(id(app), (app, None))
    signals.task_unknown.connect(_unknown, weak=False, dispatch_uid="redisbeat.unknown")
    signals.task_rejected.connect(_rejected, weak=False, dispatch_uid="redisbeat.rejected")


def unregistered(task: str) -> NotStarted:
    """A message for a task the worker does not know."""
    detail = (
        f"the worker does not know the task {task!r}: import the module that defines it in "
        "the worker (the app's imports or include), or check the task's name"
    )
    return NotStarted("unregistered", task, None, detail)


def refused(task: str, exc: BaseException | None) -> NotStarted:
    """A message the worker refused (``exc``: why, as Celery caught it)."""
    said = str(exc or "it is not a task message the worker can read")[:SAID_LENGTH]
    if isinstance(exc, ContentDisallowed):
        detail = (
            f"the worker refused the message: {said}; send it with a serializer the worker "
            "accepts (its serializer option), or add its content type to the worker's "
            "accept_content"
        )
    else:
        detail = f"the worker refused the message: {said}"
    return NotStarted("rejected", task, type(exc).__name__ if exc else None, detail)


def _unknown(sender: Any = None, message: Any = None, name: Any = None, **_: Any) -> None:
    _record(sender, message, unregistered(str(name or "")))


def _rejected(sender: Any = None, message: Any = None, exc: Any = None, **_: Any) -> None:
    headers = getattr(message, "headers", None)
    task = headers.get("task") if isinstance(headers, dict) else None
    _record(sender, message, refused(str(task or ""), exc))


def _record(consumer: Any, message: Any, what: NotStarted) -> None:
    global _retry_at
    worker = str(getattr(consumer, "hostname", None) or socket.gethostname())
    delivery = delivery_of(message, worker)
    if delivery is None or time.monotonic() < _retry_at:
        return  # not a message redisbeat sent, or Redis failed a moment ago
    try:
        store = _store(getattr(consumer, "app", None))
        if store is None:
            return
        if delivery.lane == "delayed":  # its try is over: a copy of it is one too
            d = delivery
            store.mark_run("delayed", d.name, d.task_id, d.retries, "end", worker)
        store.run_not_started(delivery, what)
    except Exception as exc:  # whatever fails, the consumer goes on
        _retry_at = time.monotonic() + RETRY_SECONDS
        log.warning(
            "redisbeat: could not record the run of %s (%s) that could not start (%s: %s); "
            "the next %g s of such runs are not recorded",
            delivery.name,
            delivery.task_id,
            type(exc).__name__,
            exc,
            RETRY_SECONDS,
        )


def _store(app: Any) -> ScheduleStore | None:
    """The watched app's store, its calls bounded (made at its first use)."""
    with _lock:
        watched = _watched.get(id(app))
        if watched is None:
            return None
        if watched[1] is None:
            watched = (app, ScheduleStore.from_config(bounded_config(app)))
            _watched[id(app)] = watched
        return watched[1]
