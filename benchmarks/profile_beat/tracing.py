"""``--receiver``: signal receivers like OpenTelemetry's Celery instrumentation connects, so
that the profile measures what an instrumented app's beat does for every message it sends."""

from __future__ import annotations

import random
from typing import Any

from celery import signals


class Tracer:
    """A span per message, as ``opentelemetry-instrumentation-celery`` makes one: started by
    ``before_task_publish`` (the task looked up by name, its id read from the headers, W3C
    trace context put into them) and ended by ``after_task_publish`` (found by that id)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        #: Open spans by task id: (trace id, span id, task, exchange, routing key).
        self.open: dict[str, tuple[int, int, Any, Any, Any]] = {}
        self.started = 0
        self.ended = 0

    def connect(self) -> Tracer:
        signals.before_task_publish.connect(self.before, weak=False)
        signals.after_task_publish.connect(self.after, weak=False)
        return self

    def disconnect(self) -> None:
        signals.before_task_publish.disconnect(self.before)
        signals.after_task_publish.disconnect(self.after)

    def before(self, sender: Any = None, headers: Any = None, body: Any = None, **kw: Any) -> None:
        task = self.app.tasks.get(sender) if isinstance(sender, str) else sender
        task_id = headers.get("id") if headers else body.get("id")
        if task_id is None:
            return
        trace_id, span_id = random.getrandbits(128), random.getrandbits(64)
        self.open[task_id] = (trace_id, span_id, task, kw.get("exchange"), kw.get("routing_key"))
        self.started += 1
        headers["traceparent"] = f"00-{trace_id:032x}-{span_id:016x}-01"
        headers["tracestate"] = f"redisbeat={span_id:016x}"

    def after(self, sender: Any = None, headers: Any = None, body: Any = None, **kw: Any) -> None:
        task_id = headers.get("id") if headers else body.get("id")
        if self.open.pop(task_id, None) is not None:
            self.ended += 1
