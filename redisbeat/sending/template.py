"""Celery task messages built as ``Task.apply_async`` builds them, minus its repeated work.

``apply_async`` -> ``Celery.send_task`` -> ``AMQP.send_task_message`` work out, for every
message, parts that are the same for every occurrence of an entry. :class:`TaskMessages`
follows the same steps in the same order, with the same signals, options and headers, for an
entry's first message (:mod:`.wire` hands it to the producer) and keeps it in a
:class:`Template`. While nothing but the occurrence can make them differ (routes by task name
only), later messages are that first one with their task id, due time and expiry put in, and
another entry of the same task and options starts from it with its own arguments, their
reprs and body (:meth:`TaskMessages.adopt`). ``before_task_publish`` receivers get a copy of
each message (:mod:`.receivers`); what they change is put into that message alone. Anything
else (an eager app, sent events, a task class with its own ``apply_async``, options such as
``countdown`` or ``link``) is left to ``apply_async``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from celery import Celery, signals
from celery.app.amqp import AMQP
from celery.app.routes import MapRoute
from celery.app.task import Task

from ..schedule.clock import time_to_live
from ..schedule.entry import Entry
from . import celery_internals as internals
from .lists import Lists
from .reprs import argument_repr
from .routing import Defaults
from .wire import (
    First,
    Published,
    declare_once,
    publish_content,
    publish_signalled,
    send_task_message,
    serialised,
)

#: Entry options handled here as Celery handles them; any other goes by ``apply_async``.
BATCH_OPTIONS = frozenset(
    {
        "queue",
        "exchange",
        "exchange_type",
        "routing_key",
        "priority",
        "expires",
        "headers",
        "serializer",
        "compression",
        "delivery_mode",
        "time_limit",
        "soft_time_limit",
        "ignore_result",
        "shadow",
        "retry",
        "retry_policy",
        "mandatory",
        "immediate",
    }
)


@dataclass
class Template:
    """What every message of an entry shares (and of any entry with the same task, arguments
    and options: nothing in it depends on the entry's name or schedule)."""

    #: The task's name, and the task when the app has it (else it is sent by name).
    name: str
    task: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: The entry's options (before redisbeat's headers are added).
    options: Mapping[str, Any]
    #: False: send it with ``apply_async``.
    modelled: bool
    #: The argsrepr and kwargsrepr headers (protocol 2), from the entry's first message.
    reprs: dict[str, str] | None = None
    #: Serialised bodies by serializer: (content type, content encoding, data).
    bodies: dict[str, tuple[str, str, Any]] = field(default_factory=dict)
    #: The entry's first message, for the later ones (None: each is built in full).
    first: First | None = None


class TaskMessages:
    """Builds the messages of one Celery app and hands them to a producer."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.amqp = amqp = app.amqp
        conf = app.conf
        self.modelled = (
            type(app).send_task is Celery.send_task
            and type(amqp) is AMQP
            and not conf.task_always_eager
            and not conf.task_send_sent_event
        )
        self.defaults = Defaults.of(conf, amqp)
        # Celery 5.5 made the depth a setting; before, saferepr's default (3) applied.
        self.repr_levels: int = conf.get("task_repr_maxlevels", 3)
        #: Messages built whose expiry had passed (sent to live 0 s), since the start.
        self.expired = 0

    def template(self, entry: Entry) -> Template:
        task = self.app.tasks.get(entry.task)
        args, kwargs = tuple(entry.args), dict(entry.kwargs)
        modelled = (
            self.modelled
            and BATCH_OPTIONS.issuperset(entry.options)
            and internals.plain_task(task, args, kwargs)
        )
        return Template(entry.task, task, args, kwargs, entry.options, modelled)

    def adopt(self, t: Template, sibling: Template) -> None:
        """Give ``t`` the first message of a template of the same task and options: the same
        message but for the arguments, their reprs (worked out as Celery does) and the body."""
        first = sibling.first
        if first is None or not t.modelled:
            return
        amqp, levels = self.amqp, self.repr_levels
        t.reprs = {
            "argsrepr": argument_repr(t.args, amqp.argsrepr_maxsize, levels),
            "kwargsrepr": argument_repr(t.kwargs, amqp.kwargsrepr_maxsize, levels),
        }
        body = (t.args, t.kwargs, first.body[2])
        t.first = first.with_arguments(
            {**first.headers, **t.reprs}, body, serialised(t.bodies, body, first.serializer)
        )

    def publish(
        self,
        producer: Any,
        t: Template,
        task_id: str,
        options: dict[str, Any],
        *,
        retry: bool,
        declared: dict[int, Any],
        lists: Lists | None = None,
    ) -> Published | None:
        """Publish one message as ``task.apply_async(..., **options)`` would; None when only
        ``apply_async`` can (nothing was published then).

        ``retry`` False publishes without retrying (for a buffering producer); ``declared``
        holds the entities declared already, and gets those this message declares; an
        entry's later messages go to ``lists`` where it can take them.
        """
        if signals.task_sent.receivers:
            return None
        if t.first is not None:
            return self._again(producer, t, t.first, task_id, options, retry, declared, lists)
        return self._build(producer, t, task_id, options, retry, declared)

    def _build(
        self,
        producer: Any,
        t: Template,
        task_id: str,
        options: dict[str, Any],
        retry: bool,
        declared: dict[int, Any],
    ) -> Published | None:
        """A message built step by step; the template keeps it for the entry's later ones
        when nothing but their id, due time and expiry can make them differ."""
        kwargs = t.kwargs
        exec_options = internals.exec_options(t.task) if t.task is not None else {}
        expires = options.get("expires", exec_options.get("expires"))
        seconds = None if expires is None else self._expiration(expires)
        if expires is not None and seconds is None:
            return None  # checked first: apply_async will ask the task and routes again
        shadow, options = _task_options(t, kwargs, options, exec_options)
        message, options, ignore_result = self._create(
            t, task_id, kwargs, options, shadow, expires, seconds
        )
        if not ignore_result:
            self.app.backend.on_task_call(producer, task_id)
        published, first = send_task_message(
            self.amqp,
            self.defaults,
            producer,
            t.name,
            task_id,
            message,
            retry_allowed=retry,
            declared=declared,
            bodies=t.bodies,
            **options,
        )
        if t.first is None and self._reusable(t, shadow, expires, message):
            first.ignore_result = ignore_result
            first.task_expires = None if "expires" in t.options else expires
            t.first = first
        return published

    def _create(
        self,
        t: Template,
        task_id: str,
        kwargs: dict[str, Any],
        options: dict[str, Any],
        shadow: Any,
        expires: Any,
        seconds: float | None,
    ) -> tuple[Any, dict[str, Any], Any]:
        """``Celery.send_task``'s part: the message, the options left, ``ignore_result``."""
        time_limit = options.pop("time_limit", None)
        soft_time_limit = options.pop("soft_time_limit", None)
        options.pop("expires", None)
        ignore_result = options.pop("ignore_result", internals.SEND_TASK_IGNORE_RESULT)
        options = self.amqp.router.route(options, t.name, t.args, kwargs, t.task)
        if seconds is not None:
            options["expiration"] = seconds
        message = self.amqp.create_task_message(
            task_id,
            t.name,
            t.args,
            kwargs,
            expires=expires,
            reply_to=internals.reply_to(self.app),
            time_limit=time_limit,
            soft_time_limit=soft_time_limit,
            shadow=shadow,
            ignore_result=ignore_result,
            **(t.reprs or {}),
            **options,
        )
        if t.reprs is None:
            headers = message.headers
            t.reprs = {k: headers[k] for k in ("argsrepr", "kwargsrepr") if k in headers}
        for stamp in options.pop("stamped_headers", None) or ():
            options.pop(stamp)
        return message, options, ignore_result

    def _reusable(self, t: Template, shadow: Any, expires: Any, message: Any) -> bool:
        """True when the entry's later messages can be its first one with their id, due time
        and expiry put in: nothing else about them depends on the occurrence (every route
        depends on the task name alone: task_routes mappings)."""
        return (
            shadow is None
            and (t.task is None or type(t.task).shadow_name is Task.shadow_name)
            and (expires is None or isinstance(expires, (datetime, str)))
            and all(isinstance(route, MapRoute) for route in self.amqp.router.routes)
            and isinstance(message.body, tuple)
        )

    def _again(
        self,
        producer: Any,
        t: Template,
        first: First,
        task_id: str,
        options: dict[str, Any],
        retry: bool,
        declared: dict[int, Any],
        lists: Lists | None,
    ) -> Published | None:
        """A later message of an entry: the first one, with its own id, due time, expiry."""
        expires = options.get("expires", first.task_expires)
        headers = dict(first.headers)
        headers["id"] = headers["root_id"] = task_id
        properties = dict(first.properties)
        properties["correlation_id"] = task_id
        if expires is not None:
            seconds = self._expiration(expires)
            if seconds is None:
                return None
            headers["expires"] = expires if isinstance(expires, str) else expires.isoformat()
            properties["expiration"] = seconds
        headers.update(options["headers"])
        if not first.ignore_result:
            self.app.backend.on_task_call(producer, task_id)
        publish = first.publish
        exchange, routing_key = publish["exchange"], publish["routing_key"]
        body = first.body
        changed: tuple[str, ...] = ()  # the headers receivers set
        if signals.before_task_publish.receivers:
            s = first.signalled(t.name, headers, properties)
            if s.rebuilt:
                publish_signalled(producer, first, s, retry, declared)
                return Published(task_id, t.name, s.body, s.headers, exchange, routing_key)
            body, headers, changed = s.body, s.headers, s.changed
        declare_once(producer, first.declare or (), publish, declared)
        form = None if lists is None else lists.form(producer, first)
        if lists is not None and form is not None:
            lists.push(form, headers, properties, changed)
        else:
            publish_content(producer, first.content, headers, properties, publish, retry)
        return Published(task_id, t.name, body, headers, exchange, routing_key)

    def _expiration(self, expires: Any) -> float | None:
        """The message's time to live in seconds, as Celery.send_task works it out (None:
        only it handles this ``expires``). An expiry already past lives 0 s, as Celery sends
        it (the worker discards the message), counted in ``expired``: Celery would log a
        warning per message, a storm when a beat drains a backlog of them."""
        seconds = time_to_live(expires, self.app.now)
        if seconds is not None and seconds < 0:
            self.expired += 1
            return 0
        return seconds


def _task_options(
    t: Template, kwargs: dict[str, Any], options: dict[str, Any], exec_options: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """``Task.apply_async``'s part: the shadow name and the task's own options under the
    entry's (a task sent by name skips it, as ``app.send_task`` does)."""
    task = t.task
    shadow = options.pop("shadow", None)
    if task is not None:
        shadow = shadow or task.shadow_name(t.args, kwargs, options)
        options = dict(exec_options, **options)
        options.setdefault("ignore_result", task.ignore_result)
    return shadow, options
