"""Record every task execution as one JSON line, for the demo runner to show and check.

Active only when ``DEMO_EVENTS_FILE`` names a file. redisbeat adds three headers to every
message a beat sends (``redisbeat_entry``, ``redisbeat_due`` in ms since the epoch,
``redisbeat_beat``); Celery puts message headers it does not know itself into
``task.request.headers``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from celery.signals import task_prerun

HEADERS = {"redisbeat_entry": "entry", "redisbeat_due": "due_ms", "redisbeat_beat": "beat"}


def connect() -> None:
    task_prerun.connect(record, dispatch_uid="orders.executions.record")


def record(sender: Any = None, task_id: str | None = None, task: Any = None, **_: Any) -> None:
    path = os.environ.get("DEMO_EVENTS_FILE")
    if not path or task is None:
        return
    headers = getattr(task.request, "headers", None) or {}
    line: dict[str, Any] = {
        "task_id": task_id,
        "task": task.name,
        "started_ms": int(time.time() * 1000),
        "worker_pid": os.getpid(),
    }
    for header, key in HEADERS.items():
        line[key] = headers.get(header)
    data = (json.dumps(line) + "\n").encode()
    # One write on an O_APPEND descriptor: lines from the pool's processes never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
