"""``before_task_publish`` sent as ``AMQP.send_task_message`` sends it, on copies of a message.

Its receivers (tracing libraries put their context into the headers) may change any part of
the message they are handed. Each message's receivers get parts of their own, so nothing they
do reaches the parts the message was made from (an entry's template); what they changed is
told apart by comparing the two (by equality), so that only that is worked out again: the
headers they set go into the stored text as values of their own, and a message whose body,
properties, queues to declare or retry policy they changed is published from those.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from celery import signals

#: Values a receiver can replace but not change: a copy of their container is a copy of all.
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})


@dataclass
class Signalled:
    """A message's parts as the receivers left them, and what they changed."""

    headers: dict[str, Any]
    properties: dict[str, Any]
    body: Any
    declare: list[Any] | None
    policy: dict[str, Any]
    #: The header keys they set (added, or given another value), in the headers' order.
    changed: tuple[str, ...]
    #: Whether they changed the body: it is serialised again.
    body_changed: bool
    #: Whether they changed anything but the headers: the message is published from these.
    rebuilt: bool


def plain_body(body: Any) -> bool:
    """True for a protocol 2 body whose arguments and options are scalars: a copy of its
    keyword arguments and options is then a copy a receiver cannot reach past."""
    if type(body) is not tuple or len(body) != 3:
        return False
    args, kwargs, embed = body
    return (
        type(args) is tuple
        and type(kwargs) is dict
        and type(embed) is dict
        and all(type(v) in _SCALARS for v in args)
        and all(type(v) in _SCALARS for v in kwargs.values())
        and all(type(v) in _SCALARS for v in embed.values())
    )


def before_publish(
    name: str,
    body: Any,
    plain: bool,
    *,
    exchange: Any,
    routing_key: Any,
    declare: list[Any] | None,
    headers: dict[str, Any],
    properties: dict[str, Any],
    retry_policy: dict[str, Any],
) -> Signalled:
    """Send ``before_task_publish`` with Celery's arguments, each part a copy (``plain``:
    :func:`plain_body` of ``body``), and tell what its receivers changed."""
    sent_body = (body[0], dict(body[1]), dict(body[2])) if plain else copy.deepcopy(body)
    sent_headers, sent_properties = dict(headers), dict(properties)
    sent_declare = None if declare is None else list(declare)
    sent_policy = dict(retry_policy)
    signals.before_task_publish.send(
        sender=name,
        body=sent_body,
        exchange=exchange,
        routing_key=routing_key,
        declare=sent_declare,
        headers=sent_headers,
        properties=sent_properties,
        retry_policy=sent_policy,
    )
    changed: tuple[str, ...] = ()
    if sent_headers != headers:
        changed = tuple(k for k, v in sent_headers.items() if k not in headers or headers[k] != v)
    body_changed = sent_body != body
    rebuilt = (
        body_changed
        or sent_properties != properties
        or sent_declare != declare
        or sent_policy != retry_policy
    )
    return Signalled(
        sent_headers,
        sent_properties,
        sent_body,
        sent_declare,
        sent_policy,
        changed,
        body_changed,
        rebuilt,
    )
