"""Every name of Celery and kombu the batched path reads that is not their public API.

Each is looked up defensively: a release without it either needs nothing in its place (the
message is the same) or raises :class:`MissingInternal`, which the publisher answers by
sending that entry's messages with ``apply_async``. The releases named are those tested
(Celery and kombu 5.3 to 5.7). :func:`plain_task` is the check of a task built on them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import celery
from celery.app.task import Task


class MissingInternal(AttributeError):
    """This Celery or kombu has no name the batched path reads: ``apply_async`` sends."""


def _release(dist: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version(dist).split(".")[:2])


#: kombu 5.5 declares a message's queue with the publish's retry policy; earlier releases
#: declare it without retrying (and cannot retry the declaration of an unbound queue).
DECLARE_WITH_RETRY = _release("kombu") >= (5, 5)

#: What ``Celery.send_task`` sends as ``ignore_result`` when neither an option nor the task
#: says: False up to Celery 5.6, None since 5.7.
SEND_TASK_IGNORE_RESULT = None if tuple(celery.VERSION[:2]) >= (5, 7) else False


def exec_options(task: Any) -> dict[str, Any]:
    """``Task._get_exec_options()`` (Celery 4.0 to 5.7): the options the task's own
    attributes give each of its messages (queue, expires, serializer, ...)."""
    get = getattr(task, "_get_exec_options", None)
    if get is None:
        raise MissingInternal("this Celery's tasks have no _get_exec_options()")
    options: dict[str, Any] = get()
    return options


def reply_to(app: Any) -> str:
    """``Celery.thread_oid`` (Celery 4.0 to 5.7): the ``reply_to`` of a message sent from
    this thread, as ``Celery.send_task`` fills it in."""
    oid: str | None = getattr(app, "thread_oid", None)
    if oid is None:
        raise MissingInternal("this Celery app has no thread_oid")
    return oid


def v2_compat(task: Any) -> bool:
    """``Task.__v2_compat__`` (Celery 4.0 to 5.7, set by the old ``celery.task`` base
    classes): such a task's ``apply_async`` adds its own options. Absent: not one."""
    return bool(getattr(task, "__v2_compat__", False))


def dumps_pydantic_arguments(task: Any) -> bool:
    """``Task._dump_pydantic_arguments`` (Celery 5.5 and later, for ``pydantic=True``
    tasks): ``apply_async`` converts the arguments first. Absent (5.3, 5.4): nothing to do."""
    return getattr(task, "_dump_pydantic_arguments", None) is not None


def argument_check(task: Any) -> Callable[..., Any] | None:
    """``Task.__header__`` (Celery 4.0 to 5.7): the signature check ``apply_async`` runs on
    the arguments of a task made from a function with ``typing``. Absent: no check."""
    check: Callable[..., Any] | None = getattr(task, "__header__", None)
    return check


def timeouts_apart(amqp: Any) -> bool:
    """Whether ``AMQP.send_task_message`` hands ``timeout`` and ``confirm_timeout`` to the
    producer as arguments of their own (Celery 5.5 and later); before, they were message
    properties."""
    return "confirm_timeout" in inspect.signature(amqp.send_task_message).parameters


def plain_task(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """True when ``task.apply_async`` is Celery's own and accepts these arguments."""
    if task is None:
        return True  # sent by name
    if (
        type(task).apply_async is not Task.apply_async
        or v2_compat(task)
        or dumps_pydantic_arguments(task)
        or (task.soft_time_limit and task.time_limit and task.soft_time_limit > task.time_limit)
    ):
        return False
    if task.typing:
        check = argument_check(task)
        if check is not None:
            try:
                check(*args, **kwargs)
            except TypeError:
                return False  # apply_async raises it, for every occurrence
    return True
