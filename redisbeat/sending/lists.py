"""A batch's messages written straight onto a Redis broker's lists: one LPUSH per queue.

kombu's Redis transport stores a message as the JSON of a dict (the body encoded, the
properties with a delivery tag) pushed onto its queue's list. ``Producer.publish`` works that
dict out step by step for every message; of an entry's later messages only the headers, the
expiry and the tag differ. :class:`Lists` keeps the rest (a :class:`Form` per entry, from a
:class:`Shape` per task and options), builds the same dict in the same order, encodes it
with the transport's own encoder and pushes a batch's messages in one round trip through the
channel's own client (key prefix and all). What the steps it follows cannot cover (a named
exchange, compression, a queue with an expiry, another transport) goes by the producer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kombu.utils.json import dumps

from . import celery_internals as internals
from .envelope import Envelope

#: Envelopes a shape keeps (messages of one task and options differ in their keys rarely).
MAX_ENVELOPES = 16
#: What an envelope is kept by: the keys of the headers and properties, and the own headers.
EnvelopeKey = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


@dataclass(frozen=True)
class Shape:
    """What the messages of one task and its options share on the broker's lists."""

    #: The list (queue and priority), and the routing key the message records.
    key: str
    routing_key: Any
    content_type: str
    content_encoding: str
    delivery_mode: Any
    priority: Any
    body_encoding: Any
    #: By the keys of a message's headers and properties, and the headers that receivers of
    #: ``before_task_publish`` set: its text but for its own values.
    envelopes: dict[EnvelopeKey, Envelope | None] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Form:
    """An entry's messages on the lists it was worked out for: its family's shape and its
    body, encoded (no shape: the producer publishes them)."""

    lists: Lists
    shape: Shape | None
    body: Any = None


class Lists:
    """A producer's messages for kombu's Redis transport, buffered until :meth:`flush`."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self._pending: dict[str, list[str]] = {}
        #: The list of each message buffered, in the order they were pushed.
        self._order: list[str] = []
        #: Messages pushed since this was made (the publisher tells its own by it).
        self.count = 0

    @classmethod
    def of(cls, producer: Any) -> Lists | None:
        """For a producer on kombu's Redis transport publishing by kombu's own steps."""
        channel = internals.redis_channel(producer)
        return None if channel is None else cls(channel)

    def form(self, producer: Any, first: Any) -> Form | None:
        """An entry's form, from its first message (a :class:`~.wire.First`), worked out
        once per entry and once per family; None: the producer must publish it."""
        form: Form | None = first.lists_form
        if form is None or form.lists is not self:
            family = first.family.get("lists")
            if family is None or family[0] is not self:
                family = first.family["lists"] = (self, self._shape(producer, first))
            form = first.lists_form = self._form(family[1], first.content)
        return form if form.shape is not None else None

    def push(
        self,
        form: Form,
        headers: dict[str, Any],
        properties: dict[str, Any],
        own_headers: tuple[str, ...] = (),
    ) -> None:
        """Buffer one message: ``Producer.publish(..., headers=headers, **properties)``'s;
        ``own_headers`` are those whose values are this message's own (besides the ids,
        due time and expiry), as a receiver of ``before_task_publish`` sets them."""
        shape = form.shape
        assert shape is not None  # form() hands out only forms with a shape
        own = {k: v for k, v in properties.items() if k not in internals.PUBLISH_PARAMETERS}
        own["delivery_mode"] = shape.delivery_mode
        expiration = properties.get("expiration")
        if expiration is not None:
            own["expiration"] = str(int(expiration * 1000))
        own["delivery_info"] = {"exchange": "", "routing_key": shape.routing_key}
        own["priority"] = shape.priority
        own["body_encoding"] = shape.body_encoding
        own["delivery_tag"] = internals.delivery_tag(self.channel)
        message = {
            "body": form.body,
            "content-encoding": shape.content_encoding,
            "content-type": shape.content_type,
            "headers": headers,
            "properties": own,
        }
        self._pending.setdefault(shape.key, []).append(_encoded(shape, message, own_headers))
        self._order.append(shape.key)
        self.count += 1

    def flush(self) -> list[Exception | None]:
        """Push what is buffered, one LPUSH per list (the order of one LPUSH per message);
        for each message, in the order they were pushed, the error of its list's LPUSH
        (None: it is on the broker). The broker may refuse one list's push and take the
        others' (out of memory at the second, say). A connection failure raises: none went."""
        pending, self._pending = self._pending, {}
        order, self._order = self._order, []
        if not pending:
            return []
        with self.channel.client.pipeline(transaction=False) as pipe:
            for key, payloads in pending.items():
                pipe.lpush(key, *payloads)
            replies = pipe.execute(raise_on_error=False)
        errors = {k: r for k, r in zip(pending, replies, strict=True) if isinstance(r, Exception)}
        return [errors.get(key) for key in order]

    def _shape(self, producer: Any, first: Any) -> Shape | None:
        """``Producer.publish``'s and the channel's steps up to the parts of one message."""
        publish, given = first.publish, first.properties
        content_type, content_encoding, data = first.content
        if not content_encoding:  # as Producer._prepare says it
            content_encoding = "utf-8" if isinstance(data, str) else "binary"
        compression = publish.get("compression")
        if compression is None:
            compression = producer.compression
        exchange, delivery_mode = internals.delivery_details(
            producer, publish.get("exchange"), publish.get("delivery_mode")
        )
        routing_key = publish.get("routing_key")
        if routing_key is None:
            routing_key = producer.routing_key
        channel = self.channel
        if (
            compression
            or exchange  # routed by the exchange's bindings, which kombu reads from Redis
            or not content_type
            or (producer.auto_declare and producer.exchange.name)
            or routing_key in internals.expiring_queues(channel)
            or not isinstance(given.get("reply_to", ""), str)
        ):
            return None
        priority = given.get("priority") or channel.default_priority
        return Shape(
            key=internals.queue_list(channel, routing_key, priority),
            routing_key=routing_key,
            content_type=content_type,
            content_encoding=content_encoding,
            delivery_mode=delivery_mode,
            priority=priority,
            body_encoding=channel.body_encoding,
        )

    def _form(self, shape: Shape | None, content: tuple[str, str, Any]) -> Form:
        data = content[2]
        if shape is None:
            return Form(self, None)
        if isinstance(data, str):  # as Producer._prepare, for a body serialised already
            data = data.encode(shape.content_encoding)
        body, encoding = self.channel.encode_body(data, shape.body_encoding)
        if not isinstance(body, str) or encoding != shape.body_encoding:
            return Form(self, None)  # bytes: not what the transport's JSON can hold
        return Form(self, shape, body)


def _encoded(shape: Shape, message: dict[str, Any], own_headers: tuple[str, ...]) -> str:
    """The message as the transport's encoder writes it, from its envelope where it has one."""
    key = (tuple(message["headers"]), tuple(message["properties"]), own_headers)
    envelopes = shape.envelopes
    if key in envelopes:
        envelope = envelopes[key]
    else:
        envelope = Envelope.cut(message, dumps, own_headers)
        if len(envelopes) < MAX_ENVELOPES:
            envelopes[key] = envelope
    text = None if envelope is None else envelope.render(message)
    return dumps(message) if text is None else text
