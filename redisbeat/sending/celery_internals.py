"""Every name of Celery and kombu the batched path reads that is not their public API, and
the one a beat's start-up runs (kombu's check of redis-py, :func:`check_redis_transport`).

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
from kombu import Producer, serialization
from kombu.transport import redis as kombu_redis


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


#: ``Producer.publish``'s named parameters (kombu 5.3 to 5.7): a message property of one of
#: these names is that argument, not a property.
PUBLISH_PARAMETERS = frozenset(inspect.signature(Producer.publish).parameters) - {
    "self",
    "body",
    "properties",
}

#: The names kombu's Redis transport publishes a message with (kombu 5.3 to 5.7); a class
#: that defines any of them itself may store messages its own way.
_PRODUCER_STEPS = ("publish", "_publish", "_prepare", "_delivery_details")
_CHANNEL_STEPS = (
    "basic_publish",
    "prepare_message",
    "_inplace_augment_message",
    "encode_body",
    "_put",
    "_get_message_priority",
    "_q_for_pri",
    "_next_delivery_tag",
    "client",
)


def redis_channel(producer: Any) -> Any | None:
    """The producer's channel when it is kombu's Redis transport's (Sentinel's too) and both
    publish by kombu's own steps, so a message's stored form is known (None otherwise).

    The names read on it: ``_expires``, ``_get_message_priority``, ``_q_for_pri``,
    ``_next_delivery_tag``, ``client``, ``default_priority``, ``body_encoding``,
    and the producer's ``_delivery_details``."""
    channel = producer.channel
    if not isinstance(channel, kombu_redis.Channel):
        return None
    for cls, own, names in (
        (type(producer), Producer, _PRODUCER_STEPS),
        (type(channel), kombu_redis.Channel, _CHANNEL_STEPS),
    ):
        for name in names:
            theirs = getattr(own, name, None)
            if theirs is None or getattr(cls, name, None) is not theirs:
                return None
    return channel


def delivery_details(producer: Any, exchange: Any, delivery_mode: Any) -> tuple[Any, Any]:
    """``Producer._delivery_details`` (kombu 4 to 5.7): the exchange's name and the
    message's delivery mode, as ``Producer.publish`` works them out."""
    exchange = exchange or producer.exchange
    details: tuple[Any, Any] = producer._delivery_details(exchange, delivery_mode)
    return details


def queue_list(channel: Any, queue: str, priority: Any) -> str:
    """The Redis list a message of this priority goes to (``Channel._get_message_priority``
    and ``_q_for_pri``, kombu 4 to 5.7)."""
    level = channel._get_message_priority({"properties": {"priority": priority}}, False)
    key: str = channel._q_for_pri(queue, level)
    return key


def expiring_queues(channel: Any) -> Any:
    """The queues declared with an expiry (``Channel._expires``, kombu 5.x; none before)."""
    return getattr(channel, "_expires", None) or {}


def delivery_tag(channel: Any) -> str:
    """``Channel._next_delivery_tag()`` (kombu 4 to 5.7): a new message's tag."""
    tag: str = channel._next_delivery_tag()
    return tag


def body_encoder(serializer: str) -> tuple[str, str, Callable[[Any], Any]] | None:
    """``kombu.serialization.registry._encoders[serializer]`` (kombu 4 to 5.7): the content
    type, content encoding and function ``serialization.dumps`` encodes a body with (None:
    not found, or ``raw``, which ``dumps`` treats apart)."""
    encoders = getattr(getattr(serialization, "registry", None), "_encoders", None)
    found = encoders.get(serializer) if isinstance(encoders, dict) else None
    if serializer == "raw" or not isinstance(found, tuple) or len(found) != 3:
        return None
    content_type, content_encoding, encode = found
    return content_type, content_encoding, encode


def redis_transport(app: Any) -> type | None:
    """The app's broker transport when it is kombu's Redis one (Sentinel's too), else None;
    found without connecting."""
    try:
        with app.connection_for_write() as connection:
            transport = connection.get_transport_cls()
    except (ImportError, AttributeError, KeyError, ValueError):
        return None  # a broker URL kombu cannot resolve fails at the first send, as always
    if isinstance(transport, type) and issubclass(transport, kombu_redis.Transport):
        return transport
    return None


def check_redis_transport(app: Any) -> None:
    """Run kombu's own check that its Redis transport can use the installed redis-py, when the
    app's broker is that transport, without connecting: it raises kombu's
    ``VersionMismatch`` where a send would (``Channel._get_client``, kombu 5.7; earlier
    releases check nothing, and a transport without it is left alone)."""
    channel = getattr(redis_transport(app), "Channel", None)
    if not isinstance(channel, type) or getattr(channel, "_get_client", None) is None:
        return
    # The check reads the channel's class attributes only: one made without __init__ (which
    # connects) will do.
    bare: Any = object.__new__(channel)
    bare._get_client()
