"""Where a task message goes and how the producer publishes it: the options of
``AMQP.send_task_message`` resolved as it resolves them (queue, exchange, routing key,
delivery mode, retry policy), from the settings it reads once (:class:`Defaults`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kombu.common import Broadcast

from .celery_internals import timeouts_apart


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
