"""What beats put on the broker queue, read back from kombu's Redis transport."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

import redis


@dataclass(frozen=True)
class Sent:
    """One message a beat put on the broker queue."""

    #: The periodic entry it was sent for ('' for a delayed task).
    entry: str
    due_ms: int
    task_id: str
    task: str
    beat: str
    #: The delayed task's key (None for a periodic entry's message).
    key: str | None = None


def read_queue(client: redis.Redis, queue: str = "celery") -> list[Sent]:
    """Pop every message kombu's Redis transport holds for ``queue``, oldest first."""
    out = []
    while (raw := client.rpop(queue)) is not None:
        headers = json.loads(cast("str | bytes", raw))["headers"]
        out.append(
            Sent(
                headers.get("redisbeat_entry", ""),
                int(headers["redisbeat_due"]),
                headers["id"],
                headers["task"],
                headers["redisbeat_beat"],
                headers.get("redisbeat_key"),
            )
        )
    return out
