"""The worker hook's duplicate check: copies of a run are dropped as a worker receives them.

A beat killed between publishing an occurrence and recording it leaves it to another beat,
which sends it again under the same task id. With ``redisbeat_track_runs`` (and
``redisbeat_duplicate_window_seconds`` above 0, the default), :class:`Deduplicate`, a bootstep
of the worker's consumer, wraps Celery's task strategies (the handler each received message
goes to): a message carrying redisbeat's ``redisbeat_entry`` or ``redisbeat_key`` header is
checked in Redis first, one script (:meth:`~redisbeat.ScheduleStore.receive`), and a copy of
a run some worker already received, started or ran is acknowledged and dropped before Celery
sees it: no ``task_received``, no run, no result (the first run's stands). It is counted in
the entry's run state and history, and in ``redisbeat_duplicates_skipped_total`` when
prometheus-client is installed. Other messages cost two header lookups.

Why a bootstep: a ``task_prerun`` receiver cannot stop a run (Celery's dispatcher catches
what it raises), and revoking the task id would write ``REVOKED`` over the first run's result.

Redis never costs a task: when the check fails, the message runs unchecked (at least once,
as without the check), a warning says so once, and the next check is made
:data:`RETRY_SECONDS` later; a check waits at most :data:`CHECK_TIMEOUT` for Redis.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from celery import bootsteps

from .config import Config
from .store import ScheduleStore
from .store.receipts import Delivery, Lane

log = logging.getLogger(__name__)

#: The headers of a message a beat sent: the entry it was sent for, or the delayed task's
#: key, and its due time.
ENTRY_HEADER = "redisbeat_entry"
KEY_HEADER = "redisbeat_key"
DUE_HEADER = "redisbeat_due"
#: The longest one check waits for Redis (seconds): it runs in the consumer's loop.
CHECK_TIMEOUT = 1.0
#: After a failed check, messages run unchecked this long (seconds) before the next try.
RETRY_SECONDS = 5.0
_WRAPPED = "redisbeat_deduplicating"


class Deduplicate(bootsteps.StartStopStep):
    """Consumer bootstep: each task strategy checks redisbeat's messages before running them."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.check: Check | None = None

    def start(self, parent: Any) -> None:
        # Tasks.start makes the strategies anew at each (re)connection: wrap them again.
        if self.check is None:
            try:
                self.check = Check.for_app(parent.app, parent.hostname)
            except Exception as exc:  # the worker runs on, unchecked, rather than not at all
                log.error("redisbeat: duplicate deliveries are not dropped: %s", exc)
                return
        strategies = parent.strategies
        for name, strategy in list(strategies.items()):
            if not getattr(strategy, _WRAPPED, False):
                strategies[name] = self.check.wrap(strategy, parent.connection_errors)

    def shutdown(self, parent: Any) -> None:
        if self.check is not None:
            with contextlib.suppress(Exception):  # a worker stopping needs nothing of Redis
                self.check.store.close()


class Check:
    """Asks Redis whether each message redisbeat sent is a copy; runs it when Redis cannot
    say."""

    def __init__(self, store: ScheduleStore, hold_ms: int, worker: str) -> None:
        self.store = store
        #: How long a receipt's mark lasts (until the run's start renews it).
        self.hold_ms = hold_ms
        self.worker = worker
        #: Copies dropped, and messages run unchecked (Redis did not answer), in this process.
        self.skipped = 0
        self.unchecked = 0
        self._retry_at = 0.0
        self._failing = False
        self._counters = counters()
        self.clock: Callable[[], float] = time.monotonic

    @classmethod
    def for_app(cls, app: Any, hostname: str | None) -> Check:
        """The app's check, its Redis calls bounded by :data:`CHECK_TIMEOUT`."""
        config = bounded_config(app)
        transport = app.conf.broker_transport_options or {}
        hold = receipt_seconds(config.duplicate_window_seconds, transport)
        store = ScheduleStore.from_config(config)
        return cls(store, int(hold * 1000), hostname or socket.gethostname())

    def wrap(self, strategy: Callable[..., Any], errors: Any) -> Callable[..., Any]:
        """``strategy`` (Celery's handler of one task's messages) behind the check; a copy
        is acknowledged with the ``ack`` Celery gave, as a request acknowledges."""

        def deduplicating(
            message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **kwargs: Any
        ) -> Any:
            if self.is_copy(message):
                ack(log, errors)
                return None
            return strategy(message, body, ack, reject, callbacks, **kwargs)

        setattr(deduplicating, _WRAPPED, True)
        return deduplicating

    def is_copy(self, message: Any) -> bool:
        """Whether to drop ``message``: a copy of a run already received, started or ran."""
        delivery = delivery_of(message, self.worker)
        if delivery is None:
            return False
        task = str(message.headers.get("task") or "")
        if self.clock() < self._retry_at:
            self._count_unchecked(task)
            return False
        try:
            receipt = self.store.receive(delivery, self.hold_ms)
        except Exception as exc:  # whatever fails, the task runs
            self._failed(exc)
            self._count_unchecked(task)
            return False
        if self._failing:
            self._failing = False
            log.warning("redisbeat: Redis answers again: duplicate deliveries are dropped again")
        if receipt.run:
            return False
        self.skipped += 1
        if self._counters is not None:
            self._counters[0].labels(task=task).inc()
        log.debug(
            "redisbeat: dropped a copy of %s[%s] (%s on %s)",
            task,
            delivery.task_id,
            receipt.stage,
            receipt.first,
        )
        return True

    def _failed(self, exc: BaseException) -> None:
        self._retry_at = self.clock() + RETRY_SECONDS
        if not self._failing:
            self._failing = True
            log.warning(
                "redisbeat: cannot check for duplicate deliveries (%s: %s): tasks redisbeat "
                "sent run unchecked until Redis answers (trying every %g s)",
                type(exc).__name__,
                exc,
                RETRY_SECONDS,
            )

    def _count_unchecked(self, task: str) -> None:
        self.unchecked += 1
        if self._counters is not None:
            self._counters[1].labels(task=task).inc()


def delivery_of(message: Any, worker: str) -> Delivery | None:
    """What the check needs of a message a beat sent; None for any other message."""
    headers = getattr(message, "headers", None)
    if not isinstance(headers, dict):
        return None
    lane: Lane = "periodic"
    name = headers.get(ENTRY_HEADER)
    if name is None:
        lane, name = "delayed", headers.get(KEY_HEADER)
    task_id = headers.get("id")
    if not isinstance(name, str) or not isinstance(task_id, str) or not task_id:
        return None
    tag = getattr(message, "delivery_tag", None)
    info = getattr(message, "delivery_info", None) or {}
    return Delivery(
        lane=lane,
        name=name,
        task_id=task_id,
        retries=_count(headers.get("retries")) or 0,
        due_ms=_count(headers.get(DUE_HEADER)),
        tag=tag if isinstance(tag, str) else "",
        redelivered=bool(info.get("redelivered") or headers.get("redelivered")),
        worker=worker,
    )


def receipt_seconds(window: float, transport: Mapping[str, Any]) -> float:
    """How long a receipt's mark lasts: the window, and at most half the broker's visibility
    timeout, so that a message redelivered after it (its worker died before running it) is
    never taken for a copy, whatever the broker tells of its redeliveries."""
    visibility = transport.get("visibility_timeout")
    if isinstance(visibility, (int, float)) and not isinstance(visibility, bool) and visibility > 0:
        return min(window, visibility / 2)
    return window


def bounded_config(app: Any) -> Config:
    """The app's settings, each Redis call bounded by :data:`CHECK_TIMEOUT`: for the calls
    made in the consumer's loop, where every message waits for them."""
    config = Config.from_app(app)
    return replace(
        config,
        redis_options=_bounded(config.redis_options),
        sentinel_options=_bounded(config.sentinel_options),
    )


def _bounded(options: Mapping[str, Any]) -> dict[str, Any]:
    bounded = dict(options)
    for name in ("socket_timeout", "socket_connect_timeout"):
        value = bounded.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            bounded[name] = min(value, CHECK_TIMEOUT)
        else:
            bounded[name] = CHECK_TIMEOUT
    return bounded


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


_lock = threading.Lock()
_counters: tuple[Any, Any] | None = None


def counters() -> tuple[Any, Any] | None:
    """The worker's counters (copies skipped, messages run unchecked), by task, in
    prometheus-client's default registry, which a worker's exporter serves; made once per
    process. None without prometheus-client."""
    global _counters
    try:
        import prometheus_client as prom
    except ImportError:
        return None
    with _lock:
        if _counters is None:
            skipped = prom.Counter(
                "redisbeat_duplicates_skipped",
                "Copies of a run a worker dropped: the task id had been received, started or run.",
                ["task"],
            )
            unchecked = prom.Counter(
                "redisbeat_duplicates_unchecked",
                "Messages a worker ran without the duplicate check: Redis did not answer.",
                ["task"],
            )
            _counters = (skipped, unchecked)
        return _counters
