"""Free loopback ports, and polling until something is true or a deadline passes."""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Callable
from typing import Any

#: Under pytest-xdist, worker gwN hands out ports from a range of its own below the kernel's
#: ephemeral range (32768 and up): two workers never pick the same port between choosing it
#: and binding it, and no client socket of theirs holds one.
WORKER_PORTS_START = 20_000
WORKER_PORTS_EACH = 1_000
_turn = itertools.count((os.getpid() * 97) % WORKER_PORTS_EACH)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return _bound_port(0)
    first = WORKER_PORTS_START + int(worker[2:]) * WORKER_PORTS_EACH
    for _ in range(WORKER_PORTS_EACH):
        # In turn rather than afresh, so a port just handed out is not handed out again
        # before its server has bound it.
        port = first + next(_turn) % WORKER_PORTS_EACH
        try:
            return _bound_port(port)
        except OSError:
            continue
    raise RuntimeError(f"no free port in {first}..{first + WORKER_PORTS_EACH - 1}")


def _bound_port(port: int) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02
) -> Any:
    """Poll until ``predicate()`` is truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
