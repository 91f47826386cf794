"""A built Celery task message handed to a kombu producer, as ``AMQP.send_task_message`` does.

The same steps in the same order (queue and exchange resolution, delivery mode, retry policy,
``before_task_publish``), with two differences that send the same message: the body goes to
the producer serialised (once per entry, see :func:`serialised`), and a queue is declared
once per producer (kombu keeps such a cache per connection) rather than checked before each
message. What was published is kept in a :class:`First`, from which
later messages of the same entry are made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from celery import signals
from kombu import serialization
from kombu.common import Broadcast

from . import celery_internals as internals
from .celery_internals import DECLARE_WITH_RETRY, timeouts_apart


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
        return cls(
            retry=conf.task_publish_retry,
            policy=conf.task_publish_retry_policy,
            delivery_mode=conf.task_default_delivery_mode,
            routing_key=conf.task_default_routing_key,
            serializer=conf.task_serializer,
            compression=conf.task_compression,
            timeouts=timeouts_apart(amqp),
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
    #: What the messages of every entry of this task and options share (one dict for all:
    #: :mod:`.lists` keeps its shape of them there).
    family: dict[str, Any] = field(default_factory=dict)
    #: This entry's :class:`~.lists.Form`, for the :class:`~.lists.Lists` it names.
    lists_form: Any = None

    def with_arguments(
        self, headers: dict[str, Any], body: Any, content: tuple[str, str, Any]
    ) -> First:
        """This message with other arguments (``dataclasses.replace``, at a third the cost)."""
        return First(
            headers,
            self.properties,
            self.publish,
            self.declare,
            body,
            content,
            self.serializer,
            self.ignore_result,
            self.task_expires,
            self.family,
        )


@dataclass
class Route:
    """A message's options as ``AMQP.send_task_message`` resolves them: where it goes and
    how the producer publishes it."""

    exchange: Any
    routing_key: Any
    declare: list[Any] | None
    retry: bool
    policy: dict[str, Any]
    delivery_mode: Any
    compression: str | None
    serializer: str
    timeouts: dict[str, float | None]

    def publish_arguments(self, defaults: Defaults, properties: dict[str, Any]) -> dict[str, Any]:
        """``Producer.publish``'s keyword arguments; the timeouts are among them or added to
        the message's properties, by Celery release (see :attr:`Defaults.timeouts`)."""
        publish = {
            "exchange": self.exchange,
            "routing_key": self.routing_key,
            "compression": self.compression,
            "retry": self.retry,
            "retry_policy": self.policy,
            "delivery_mode": self.delivery_mode,
        }
        if defaults.timeouts:
            publish.update(self.timeouts)
        else:
            properties.update((k, v) for k, v in self.timeouts.items() if v is not None)
        return publish


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
    **options: Any,
) -> tuple[Published, First]:
    """``AMQP.send_task_message(producer, name, message, **options)``, step for step:
    ``retry_allowed`` False publishes without retrying (the producer buffers: there is no
    I/O to retry); ``declared`` holds what was declared through this producer; ``bodies``
    keeps the entry's serialised bodies by serializer."""
    headers, properties, body, _ = message
    celery_headers = dict(headers)
    r = route(amqp, defaults, headers, properties, **options)
    signals.before_task_publish.send(
        sender=name,
        body=body,
        exchange=r.exchange,
        routing_key=r.routing_key,
        declare=r.declare,
        headers=headers,
        properties=properties,
        retry_policy=r.policy,
    )
    publish = r.publish_arguments(defaults, properties)
    declare_once(producer, r.declare or (), publish, declared)
    content = serialised(bodies, body, r.serializer)
    producer.publish(
        content[2],
        content_type=content[0],
        content_encoding=content[1],
        headers=headers,
        **{**publish, "retry": r.retry and retry_allowed},
        **properties,
    )
    declare = list(r.declare or ())
    first = First(celery_headers, dict(properties), publish, declare, body, content, r.serializer)
    return Published(task_id, name, body, headers, r.exchange, r.routing_key), first


def route(
    amqp: Any,
    defaults: Defaults,
    message_headers: dict[str, Any],
    properties: dict[str, Any],
    *,
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
) -> Route:
    """The options of ``AMQP.send_task_message`` resolved; its ``headers`` option and any
    option it does not know (a message property) are merged into the message, as there."""
    if headers:
        message_headers.update(headers)
    if kwargs:
        properties.update(kwargs)
    queue, exchange, routing_key, delivery_mode = _destination(
        amqp, defaults, queue, exchange, routing_key, exchange_type, delivery_mode
    )
    if declare is None and queue and not isinstance(queue, Broadcast):
        declare = [queue]
    return Route(
        exchange,
        routing_key,
        declare,
        retry=defaults.retry if retry is None else retry,
        policy=dict(defaults.policy, **(retry_policy or {})),
        delivery_mode=delivery_mode,
        compression=compression or defaults.compression,
        serializer=serializer or defaults.serializer,
        timeouts={"timeout": timeout, "confirm_timeout": confirm_timeout},
    )


def _destination(
    amqp: Any,
    defaults: Defaults,
    queue: Any,
    exchange: Any,
    routing_key: Any,
    exchange_type: str | None,
    delivery_mode: Any,
) -> tuple[Any, Any, Any, Any]:
    """The queue, exchange, routing key and delivery mode, as Celery works them out."""
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
    return queue, exchange, routing_key, delivery_mode


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
        # serialization.dumps's own steps for a named serializer, without its error wrapper
        # (an entry's body that cannot be encoded goes by apply_async, which says why).
        found = internals.body_encoder(serializer)
        if found is None:
            content = serialization.dumps(body, serializer=serializer)
        else:
            content = (found[0], found[1], found[2](body))
        bodies[serializer] = content
    return content
