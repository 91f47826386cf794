"""Publisher: a beat's batch of occurrences, sent as Celery messages through one producer.

Each :meth:`Publisher.send` buffers one occurrence's message in kombu's ``Producer.batch()``
(one pipeline on a Redis broker); :meth:`Publisher.flush` sends the batch in one round trip,
then fires ``after_task_publish`` for each message, as Celery does once a message is on the
broker.
Messages are built by :mod:`redisbeat.sending.template`; what it does not model goes by
``apply_async``, one message at a time, when the batch is flushed.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from kombu.exceptions import OperationalError, SerializationError

from ..errors import MessageRefused
from ..schedule.cache import LRU
from ..schedule.delayed import SOURCE as DELAYED_SOURCE
from ..schedule.entry import Entry
from ..schedule.timing import from_ms
from .delivery import Delivery, probe
from .lists import Lists
from .template import TaskMessages, Template
from .wire import Published

log = logging.getLogger(__name__)

#: What Celery's apply_async raises for a message it refuses to build for the entry: arguments
#: the task's signature refuses, option values of the wrong type or range, an unknown queue
#: (a LookupError), arguments the serializer cannot encode or may not use. Any other error
#: (the broker's, or one of the environment) hands the occurrence back to be tried again.
ENTRY_ERRORS: tuple[type[BaseException], ...] = (
    TypeError,
    ValueError,
    LookupError,
    SerializationError,
)
#: Most commands kombu buffers before sending them on its own: more than a batch holds, so a
#: batch goes out in one round trip, and a failed one is handed back whole.
MAX_BUFFERED = 1_000_000


def message_options(entry: Entry, due_ms: int, now_ms: int, beat_id: str) -> dict[str, Any]:
    """The ``apply_async`` options of one occurrence: the entry's, and redisbeat's headers."""
    options = dict(entry.options)
    expires = options.get("expires")
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        # Celery would add the seconds to this host's clock; the Redis clock is the one
        # every beat shares, so a beat whose clock is off still sends the right expiry.
        options["expires"] = from_ms(now_ms) + timedelta(seconds=expires)
    # A delayed task's message names its key; a periodic entry's, the entry.
    label = "redisbeat_key" if entry.source == DELAYED_SOURCE else "redisbeat_entry"
    options["headers"] = {
        **(options.get("headers") or {}),
        label: entry.name,
        "redisbeat_due": due_ms,
        "redisbeat_beat": beat_id,
    }
    return options


class Publisher:
    """Sends occurrences as Celery task messages: ``send`` buffers one, ``flush`` sends them.

    ``producer`` returns the producer to send with (the scheduler's, which Celery may
    replace); an entry's fixed parts are kept for as long as the entry object is (the beat's
    entry cache bounds those), and ``cache_size`` bounds the task-and-options families whose
    first messages new entries start from.
    """

    def __init__(
        self, app: Any, producer: Callable[[], Any], beat_id: str, cache_size: int
    ) -> None:
        self.app = app
        self.beat_id = beat_id
        self._producer = producer
        self._messages: TaskMessages | None = None
        #: By the id of the entry object, for as long as it lives: the beat's entry cache
        #: decides which entries are kept, and so which templates.
        self._by_entry: dict[int, Template] = {}
        self._watching: dict[int, weakref.ref[Entry]] = {}
        self._key_of: dict[int, int] = {}
        self._dropped = self._entry_dropped
        #: By task and options: a template whose first message another entry's can be made
        #: from (its arguments put in).
        self._by_family: LRU[str, Template] = LRU(cache_size)
        #: The open batch (a kombu batch context), its producer and what it holds.
        self._batch: Any = None
        self._batch_producer: Any = None
        self._buffering = False
        self._in_worker_task = False
        #: Buffered in the producer's batch (or sent), and pushed onto the broker's lists.
        self._published: list[Published] = []
        self._pushed: list[Published] = []
        self._lists: Lists | None = None
        #: Entities declared through the producer (kombu's maybe_declare would find them in
        #: its cache of the connection's declarations): declared again for a new producer.
        self._declared: dict[int, Any] = {}
        self._declared_by: Any = None
        #: Occurrences to send with apply_async when the batch is flushed.
        self._deferred: list[tuple[Entry, str, dict[str, Any]]] = []
        #: Tasks whose messages the batched path could not build (warned about once each).
        self._fell_back: set[str] = set()
        self._delivery = Delivery()

    def send(self, entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        """Buffer one occurrence; an error raised here means it will not be sent:
        :class:`MessageRefused` when the entry is the cause, the broker's error otherwise.
        What the batched path cannot build is sent by ``apply_async`` at :meth:`flush`."""
        try:
            options = message_options(entry, due_ms, now_ms, self.beat_id)
        except Exception as exc:
            raise MessageRefused(entry.name, _reason(exc)) from exc
        pushed = self._lists.count if self._lists is not None else 0
        try:
            template = self._template(entry)
            published = self._publish(template, task_id, options) if template.modelled else None
        except Exception as exc:
            if self._broker_failure(exc):
                raise
            # What the fast path cannot build, apply_async may: it decides, and its error (if
            # it has one) names what is wrong with the entry.
            self._fall_back(entry, exc)
            published = None
        if published is None:
            self._deferred.append((entry, task_id, options))
        elif self._lists is not None and self._lists.count != pushed:
            self._pushed.append(published)
        else:
            self._published.append(published)

    def probe(self) -> None:
        """Return once the broker answers; raise its error while it does not."""
        probe(self._producer())

    def flush(self) -> dict[str, str | None]:
        """Send what is buffered; return the task ids of those not sent, each with None
        (the broker failed: it may not have been sent, hand it back) or the reason the
        message was refused for its entry (sending it again would fail the same way)."""
        failed: dict[str, str | None] = {}
        published, self._published = self._published, []
        pushed, self._pushed = self._pushed, []
        deferred, self._deferred = self._deferred, []
        batch, self._batch = self._batch, None
        sent: list[Published] = []
        if batch is not None:
            sent += self._sent(published, lambda: batch.__exit__(None, None, None), failed)
        if pushed and self._lists is not None:
            sent += self._sent(pushed, self._lists.flush, failed)
        for p in sent:  # once every message of the batch is on the broker
            p.announce()
        for entry, task_id, options in deferred:
            try:
                self._apply_async(entry, task_id, options)
            except Exception as exc:
                if isinstance(exc, ENTRY_ERRORS) and not self._broker_failure(exc):
                    failed[task_id] = _reason(exc)
                else:
                    self._delivery.failure(f"could not send {entry.name}", exc, "it")
                    failed[task_id] = None
        return failed

    def _sent(
        self,
        published: list[Published],
        send: Callable[[], Sequence[BaseException | None] | None],
        failed: dict[str, str | None],
    ) -> list[Published]:
        """Send buffered messages: those the broker took (``send`` may say, message by
        message, which it refused); the others are added to ``failed`` (handed back)."""
        try:
            errors = send()
        except Exception as exc:
            self._declared_by = None  # the connection may be new: let kombu check again
            errors = [exc]
        return self._delivery.settle(published, errors, failed)

    def _fall_back(self, entry: Entry, exc: BaseException) -> None:
        known = self._by_entry.get(id(entry))
        if known is not None:
            known.modelled = False
        if entry.task not in self._fell_back:
            self._fell_back.add(entry.task)
            log.warning(
                "redisbeat: messages of %s are sent with apply_async: the batched path "
                "could not build one (%s)",
                entry.task,
                _reason(exc),
            )

    def _broker_failure(self, exc: BaseException) -> bool:
        """True for a failure of the broker connection (the message may be sent later), False
        for an error about the message itself (bad arguments or options, an unknown queue)."""
        errors: tuple[type[BaseException], ...] = (OSError, OperationalError)
        connection = getattr(self._batch_producer, "connection", None)
        if connection is not None:
            errors += tuple(getattr(connection, "connection_errors", ()))
            errors += tuple(getattr(connection, "channel_errors", ()))
        return isinstance(exc, errors)

    @property
    def expired(self) -> int:
        """Messages sent whose expiry had passed (to live 0 s), since the beat started."""
        return self._messages.expired if self._messages is not None else 0

    @property
    def messages(self) -> TaskMessages:
        # Made at the first send, once the app is configured.
        if self._messages is None:
            self._messages = TaskMessages(self.app)
        return self._messages

    def _template(self, entry: Entry) -> Template:
        # By identity (the beat hands over one Entry per definition it keeps); dropped when
        # the entry is, so an id is never found again for another object. A new template
        # starts from the first message of an entry of the same task and options.
        key = id(entry)
        known = self._by_entry.get(key)
        if known is not None:
            return known
        family = f"{entry.task}\0{_dumps(entry.options)}" if entry.options else entry.task
        template = self.messages.template(entry)
        sibling = self._by_family.get(family)
        if sibling is not None:
            self.messages.adopt(template, sibling)
        if sibling is None or sibling.first is None:
            self._by_family.put(family, template)
        self._by_entry[key] = template
        # One weak reference per entry (weakref.finalize would make four objects the garbage
        # collector scans); its callback, made once, drops the template with the entry.
        watch = weakref.ref(entry, self._dropped)
        self._watching[key], self._key_of[id(watch)] = watch, key
        return template

    def _entry_dropped(self, watch: weakref.ref[Entry]) -> None:
        key = self._key_of.pop(id(watch))
        self._by_entry.pop(key, None)
        self._watching.pop(key, None)

    def _publish(
        self, template: Template, task_id: str, options: dict[str, Any]
    ) -> Published | None:
        producer = self._open()
        if self._in_worker_task:
            return None  # Celery gives a message sent from inside a task that task's ids
        return self.messages.publish(
            producer,
            template,
            task_id,
            dict(options),
            retry=not self._buffering,
            declared=self._declared,
            lists=self._lists,
        )

    def _open(self) -> Any:
        if self._batch is None:
            producer = self._producer()
            producer.channel  # noqa: B018  (opens the channel, whose settings decide batching)
            if producer is not self._declared_by:
                self._declared, self._declared_by = {}, producer
                self._lists = None
            if self._lists is None or self._lists.channel is not producer.channel:
                self._lists = Lists.of(producer)
            self._buffering = bool(getattr(producer, "supports_batch_publish", False))
            self._in_worker_task = self.app.current_worker_task is not None
            batch = producer.batch(max_size=MAX_BUFFERED) if self._buffering else _NoBatch()
            batch.__enter__()
            self._batch, self._batch_producer = batch, producer
        return self._batch_producer

    def _apply_async(self, entry: Entry, task_id: str, options: dict[str, Any]) -> None:
        task = self.app.tasks.get(entry.task)
        producer = self._producer()
        if task is not None:
            task.apply_async(
                tuple(entry.args), dict(entry.kwargs), task_id=task_id, producer=producer, **options
            )
        else:
            self.app.send_task(
                entry.task,
                entry.args,
                dict(entry.kwargs),
                task_id=task_id,
                producer=producer,
                **options,
            )


class _NoBatch:
    """For a producer without kombu's batches, or a transport that cannot batch: each
    message is sent as it is published."""

    def __enter__(self) -> _NoBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


#: Key order kept: it shows in the message (the body, the reprs of the arguments).
_dumps = json.JSONEncoder(separators=(",", ":")).encode
