"""A built Celery task message handed to a kombu producer, as ``AMQP.send_task_message`` does.

The same steps in the same order (queue and exchange resolution, delivery mode, retry policy,
``before_task_publish``), with two differences that send the same message: the body goes to
the producer serialised (once per entry, see :func:`serialised`), and a queue is declared
once per producer (kombu keeps such a cache per connection) rather than checked before each
message. The message as built, before any receiver of ``before_task_publish`` changed it
(they change copies, :mod:`.receivers`), is kept in a :class:`First`, from which later
messages of the same entry are made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from celery import signals
from kombu import serialization

from . import celery_internals as internals
from .celery_internals import DECLARE_WITH_RETRY
from .receivers import Signalled, before_publish, plain_body
from .routing import Defaults, route


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
    #: The entities to declare, as Celery has them (None: none was named).
    declare: list[Any] | None
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
    #: :func:`~.receivers.plain_body` of the body, once asked.
    plain: bool | None = None

    def signalled(
        self, name: str, headers: dict[str, Any], properties: dict[str, Any]
    ) -> Signalled:
        """``before_task_publish`` for a message of this entry with these headers and
        properties, on copies: what its receivers made of them."""
        if self.plain is None:
            self.plain = plain_body(self.body)
        publish = self.publish
        return before_publish(
            name,
            self.body,
            self.plain,
            exchange=publish["exchange"],
            routing_key=publish["routing_key"],
            declare=self.declare,
            headers=headers,
            properties=properties,
            retry_policy=publish["retry_policy"],
        )

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
    # Before the signal: a Celery older than 5.5 has the timeouts among the properties then.
    publish = r.publish_arguments(defaults, properties)
    declare = None if r.declare is None else list(r.declare)
    content = serialised(bodies, body, r.serializer)
    first = First(celery_headers, dict(properties), publish, declare, body, content, r.serializer)
    if signals.before_task_publish.receivers:
        s = first.signalled(name, headers, properties)
        publish_signalled(producer, first, s, retry_allowed, declared)
        return Published(task_id, name, s.body, s.headers, r.exchange, r.routing_key), first
    declare_once(producer, declare or (), publish, declared)
    publish_content(producer, content, headers, properties, publish, retry_allowed)
    return Published(task_id, name, body, headers, r.exchange, r.routing_key), first


def publish_signalled(
    producer: Any, first: First, s: Signalled, retry_allowed: bool, declared: dict[int, Any]
) -> None:
    """Publish a message of ``first``'s entry as ``before_task_publish``'s receivers left
    it (``s``): its body serialised again only where they changed it."""
    content = first.content
    if s.body_changed:
        content = serialization.dumps(s.body, serializer=first.serializer)
    publish = {**first.publish, "retry_policy": s.policy}
    declare_once(producer, s.declare or (), publish, declared)
    publish_content(producer, content, s.headers, s.properties, publish, retry_allowed)


def publish_content(
    producer: Any,
    content: tuple[str, str, Any],
    headers: dict[str, Any],
    properties: dict[str, Any],
    publish: dict[str, Any],
    retry_allowed: bool,
) -> None:
    """``Producer.publish`` of a serialised body (``content``, see :func:`serialised`)."""
    producer.publish(
        content[2],
        content_type=content[0],
        content_encoding=content[1],
        headers=headers,
        **{**publish, "retry": publish["retry"] and retry_allowed},
        **properties,
    )


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
    # Protocol 2's body (args, kwargs, embed) is the same for every message of an entry
    # (a before_task_publish receiver changes a copy of it).
    if not isinstance(body, tuple):
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
