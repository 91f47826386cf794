"""A built Celery task message handed to a kombu producer, as ``AMQP.send_task_message`` does.

The same steps in the same order (queue and exchange resolution, delivery mode, retry policy,
``before_task_publish``), with two differences that send the same message: the body goes to
the producer serialised (once per entry, see :func:`serialised`), and a queue is declared
once per producer (kombu keeps such a cache per connection) rather than checked before each
message. What was published is kept in a :class:`First`, from which
later messages of the same entry are made.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from celery import signals
from kombu import serialization
from kombu.common import Broadcast

#: kombu 5.5 declares a message's queue with the publish's retry policy; earlier releases
#: declare it without retrying (and cannot retry the declaration of an unbound queue).
DECLARE_WITH_RETRY = tuple(int(n) for n in version("kombu").split(".")[:2]) >= (5, 5)


@dataclass(frozen=True)
class Defaults:
    """The settings ``AMQP.send_task_message`` reads once, when it is made."""

    retry: bool
    policy: dict[str, Any]
    delivery_mode: Any
    routing_key: str | None
    serializer: str
    compression: str | None
    #: Whether this Celery hands ``timeout`` and ``confirm_timeout`` to the producer as
    #: arguments of their own (5.5 and later); before, they were message properties.
    timeouts: bool = True

    @classmethod
    def of(cls, conf: Any, amqp: Any) -> Defaults:
        parameters = inspect.signature(amqp.send_task_message).parameters
        return cls(
            retry=conf.task_publish_retry,
            policy=conf.task_publish_retry_policy,
            delivery_mode=conf.task_default_delivery_mode,
            routing_key=conf.task_default_routing_key,
            serializer=conf.task_serializer,
            compression=conf.task_compression,
            timeouts="confirm_timeout" in parameters,
        )


@dataclass
class Published:
    """A message handed to the producer, and what ``after_task_publish`` is told about it."""

    task_id: str
    name: str
    body: Any
    headers: dict[str, Any]
    exchange: Any
    routing_key: Any

    def announce(self) -> None:
        signals.after_task_publish.send(
            sender=self.name,
            body=self.body,
            headers=self.headers,
            exchange=self.exchange,
            routing_key=self.routing_key,
        )


@dataclass
class First:
    """What the first message of an entry was published with, bar its id, due time, expiry."""

    #: Celery's headers, before the message's own (``headers`` option) were merged in.
    headers: dict[str, Any]
    properties: dict[str, Any]
    #: Keyword arguments of ``Producer.publish`` (exchange, routing key, retry, ...).
    publish: dict[str, Any]
    declare: list[Any]
    body: Any
    #: The serialised body: (content type, content encoding, data), and its serializer.
    content: tuple[str, str, Any]
    serializer: str
    ignore_result: Any = None
    #: The task's own expiry, when the entry has none (an aware datetime or None).
    task_expires: Any = None


def send_task_message(
    amqp: Any,
    defaults: Defaults,
    producer: Any,
    name: str,
    task_id: str,
    message: Any,
    *,
    retry_allowed: bool,
    declared: dict[int, Any],
    bodies: dict[str, tuple[str, str, Any]],
    queue: Any = None,
    exchange: Any = None,
    routing_key: Any = None,
    event_dispatcher: Any = None,
    retry: bool | None = None,
    retry_policy: dict[str, Any] | None = None,
    serializer: str | None = None,
    delivery_mode: Any = None,
    compression: str | None = None,
    declare: list[Any] | None = None,
    headers: dict[str, Any] | None = None,
    exchange_type: str | None = None,
    timeout: float | None = None,
    confirm_timeout: float | None = None,
    **kwargs: Any,
) -> tuple[Published, First]:
    """``AMQP.send_task_message(producer, name, message, **options)``, step for step.

    ``retry_allowed`` False publishes without retrying (the producer buffers: there is no
    I/O to retry); ``declared`` holds what was declared through this producer; ``bodies``
    keeps the entry's serialised bodies by serializer.
    """
    headers2, properties, body, _ = message
    celery_headers = dict(headers2)
    if headers:
        headers2.update(headers)
    if kwargs:
        properties.update(kwargs)
    qname = queue
    if queue is None and exchange is None:
        queue = amqp.default_queue
    if queue is not None:
        if isinstance(queue, str):
            qname, queue = queue, amqp.queues[queue]
        else:
            qname = queue.name
    if delivery_mode is None:
        delivery_mode = getattr(getattr(queue, "exchange", None), "delivery_mode", None)
        delivery_mode = delivery_mode or defaults.delivery_mode
    if exchange_type is None:
        exchange_type = getattr(getattr(queue, "exchange", None), "type", "direct")
    if (not exchange or not routing_key) and exchange_type == "direct":
        exchange, routing_key = "", qname
    elif exchange is None:
        exchange = queue.exchange.name or amqp.default_exchange
        routing_key = routing_key or queue.routing_key or defaults.routing_key
    if declare is None and queue and not isinstance(queue, Broadcast):
        declare = [queue]
    retry = defaults.retry if retry is None else retry
    policy = dict(defaults.policy, **(retry_policy or {}))
    signals.before_task_publish.send(
        sender=name,
        body=body,
        exchange=exchange,
        routing_key=routing_key,
        declare=declare,
        headers=headers2,
        properties=properties,
        retry_policy=policy,
    )
    publish = {
        "exchange": exchange,
        "routing_key": routing_key,
        "compression": compression or defaults.compression,
        "retry": retry,
        "retry_policy": policy,
        "delivery_mode": delivery_mode,
    }
    timeouts = {"timeout": timeout, "confirm_timeout": confirm_timeout}
    if defaults.timeouts:
        publish.update(timeouts)
    else:
        properties.update((k, v) for k, v in timeouts.items() if v is not None)
    declare_once(producer, declare or (), publish, declared)
    serializer = serializer or defaults.serializer
    content = serialised(bodies, body, serializer)
    producer.publish(
        content[2],
        content_type=content[0],
        content_encoding=content[1],
        headers=headers2,
        **{**publish, "retry": retry and retry_allowed},
        **properties,
    )
    first = First(
        celery_headers, dict(properties), publish, list(declare or ()), body, content, serializer
    )
    return Published(task_id, name, body, headers2, exchange, routing_key), first


def declare_once(
    producer: Any, entities: Any, publish: dict[str, Any], declared: dict[int, Any]
) -> None:
    """kombu's ``maybe_declare`` (with the publish's retry policy), as the producer calls it
    before each message, for each entity not yet declared through this producer. kombu
    caches what it declared on the connection, unless the entity says it may not be cached
    (an auto-delete or transient queue): those are declared every time, as by kombu."""
    for entity in entities:
        if id(entity) not in declared:
            if DECLARE_WITH_RETRY:
                producer.maybe_declare(entity, retry=publish["retry"], **publish["retry_policy"])
            else:
                producer.maybe_declare(entity)
            if getattr(entity, "can_cache_declaration", False):
                declared[id(entity)] = entity


def serialised(
    bodies: dict[str, tuple[str, str, Any]], body: Any, serializer: str
) -> tuple[str, str, Any]:
    """The body as the producer would serialise it: (content type, encoding, data)."""
    # Protocol 2's body (args, kwargs, embed) is the same for every message of an entry,
    # unless a before_task_publish receiver (which may change it) is connected.
    if signals.before_task_publish.receivers or not isinstance(body, tuple):
        return serialization.dumps(body, serializer=serializer)
    content = bodies.get(serializer)
    if content is None:
        content = bodies[serializer] = serialization.dumps(body, serializer=serializer)
    return content
