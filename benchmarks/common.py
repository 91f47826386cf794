"""What the benchmarks and the chaos suite share: where results go, the broker queue popped
as messages arrive, percentiles, docs blocks and unwinding on SIGTERM."""

from __future__ import annotations

import base64
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import redis

ROOT = Path(__file__).resolve().parents[1]
#: Where runs write their JSON, markdown and charts: generated, so out of the source tree
#: (ignored by git); the published tables and charts are the ones in docs/.
RESULTS = ROOT / "build" / "bench-results"


def unwind_on_sigterm() -> None:
    """Make a SIGTERM (say from `timeout`) unwind like Ctrl-C, so every process is stopped."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


Popper = TypeVar("Popper", bound="QueuePopper")


class QueuePopper:
    """Pops the broker queue in a thread and stamps each message with its arrival time;
    ``forward_to``: pushes each onto that queue too, for a worker to consume."""

    def __init__(self, url: str, queue: str = "celery", forward_to: str | None = None) -> None:
        self.client = redis.Redis.from_url(url)
        self.queue = queue
        self.forward_to = forward_to
        #: (arrival ms, raw message), appended by the popping thread only.
        self.raw: list[tuple[int, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queue-popper", daemon=True)

    def start(self: Popper) -> Popper:
        self._thread.start()
        return self

    def _run(self) -> None:
        # A message is stamped when the pop that took it returns: it was in the queue by then,
        # so lateness is never under-stated.
        while not self._stop.is_set():
            popped = self.client.blpop([self.queue], timeout=0.2)
            if popped is None:
                continue
            raw = cast(bytes, popped[1])  # the client does not decode replies
            self.raw.append((now_ms(), raw))
            self._forward([raw])
            while more := self.client.lpop(self.queue, 500):
                arrived = now_ms()
                self.raw += [(arrived, raw) for raw in cast(list[bytes], more)]
                self._forward(cast(list[bytes], more))

    def _forward(self, raws: list[bytes]) -> None:
        if self.forward_to is not None:
            self.client.lpush(self.forward_to, *raws)

    def stop_popping(self) -> None:
        """Stop once the queue is empty (or after 10 s)."""
        deadline = time.monotonic() + 10
        while self.client.llen(self.queue) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._thread.join(5)
        self.client.close()


def parse_message(raw: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """A kombu Redis-transport message (JSON body, protocol 2): its headers and kwargs."""
    message = json.loads(raw)
    body = message["body"]
    if message.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    _args, kwargs, _embed = json.loads(body)
    return message["headers"], kwargs


def percentile(values: Sequence[float], q: float) -> float | None:
    """None for no values: a table row says "n/a" and its JSON says null."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))])


def replace_block(page: Path, begin: str, end: str, body: str) -> None:
    """Replace what lies between the ``begin`` and ``end`` markers on ``page`` with ``body``."""
    text = page.read_text(encoding="utf-8")
    block = f"{begin}\n{body}\n{end}"
    new, count = re.subn(
        re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S
    )
    if count != 1:
        raise RuntimeError(f"{page} has no {begin} ... {end} block")
    page.write_text(new, encoding="utf-8")
