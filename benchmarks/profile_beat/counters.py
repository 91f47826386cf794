"""What the profiled beat is measured with: a consumer process that stamps each message's
arrival, and counters of its round trips, claim batches and the servers' commands and CPU."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import threading
import time
from array import array
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any, cast

QUEUE = "celery"
POP = 500
_DUE = re.compile(rb'"redisbeat_due": (\d+)')


# -- the consumer: another process, so it takes no CPU or GIL from the beat ---------------------


def consume(url: str, stop: Any, out: Connection) -> None:
    """Pop the queue until told to stop; send back (arrival ms, due ms) of every message, and
    how many carry a ``traceparent`` header (put there by a ``before_task_publish`` receiver)."""
    import redis

    client = redis.Redis.from_url(url)
    arrived, due = array("d"), array("q")
    traced = 0

    def note(raws: list[bytes]) -> None:
        nonlocal traced
        now = time.time() * 1000
        for raw in raws:
            traced += b'"traceparent"' in raw
            match = _DUE.search(raw)
            value = match.group(1) if match else json.loads(raw)["headers"]["redisbeat_due"]
            arrived.append(now)
            due.append(int(value))

    while not stop.is_set():
        popped = client.blpop([QUEUE], timeout=0.2)
        if popped is None:
            continue
        note([cast(bytes, popped[1])])  # the client does not decode replies
        while raws := client.lpop(QUEUE, POP):
            note(cast(list[bytes], raws))
    while raws := client.lpop(QUEUE, POP):
        note(raws)  # type: ignore[arg-type]
    out.send((arrived, due, traced))
    out.close()


# -- counting round trips, batches and the servers' work ----------------------------------------


class RoundTrips:
    """Count what the beat's thread writes to each server: one write is one round trip
    (a pipeline or a command alike), keyed by the server's port."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self._thread = threading.get_ident()

    def install(self) -> None:
        from redis.connection import AbstractConnection

        original: Any = AbstractConnection.send_packed_command
        counts, thread = self.counts, self._thread

        def counted(conn: Any, command: Any, check_health: bool = True) -> None:
            if threading.get_ident() == thread:
                counts[int(getattr(conn, "port", 0) or 0)] += 1
            original(conn, command, check_health)

        AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]


class Batches:
    """Wrap a store's claim and finish to count batches and claims."""

    def __init__(self, store: Any) -> None:
        self.ticks = self.batches = self.claimed = self.finishes = 0
        claim, finish = store.claim, store.finish

        def counted_claim(*args: Any, **kwargs: Any) -> Any:
            batch = claim(*args, **kwargs)
            self.ticks += 1
            if batch.claims:
                self.batches += 1
                self.claimed += len(batch.claims)
            return batch

        def counted_finish(*args: Any, **kwargs: Any) -> Any:
            self.finishes += 1
            return finish(*args, **kwargs)

        store.claim, store.finish = counted_claim, counted_finish

    def snapshot(self) -> tuple[int, int, int, int]:
        return self.ticks, self.batches, self.claimed, self.finishes


def commandstats(client: Any) -> dict[str, int]:
    return {k: int(v["calls"]) for k, v in client.info("commandstats").items()}


def server_cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class Consumer:
    """The consumer process, started at once; :meth:`stop` returns what it saw."""

    def __init__(self, url: str) -> None:
        self._stop = multiprocessing.Event()
        self._receive, self._send = multiprocessing.Pipe(duplex=False)
        self._process = multiprocessing.Process(
            target=consume, args=(url, self._stop, self._send), daemon=True
        )
        self._process.start()

    def stop(self) -> tuple[Any, Any, int]:
        """Every message's arrival ms and due ms, once the queue is empty, and how many of
        them carry a ``traceparent`` header."""
        self._stop.set()
        arrived, due, traced = self._receive.recv()
        self._process.join(10)
        return arrived, due, traced


class Probe:
    """Reads every counter at once: this process's CPU, the store's commands, both servers'
    CPU, the beat's round trips and its batches."""

    def __init__(self, store_url: str, broker_url: str, trips: RoundTrips, batches: Batches):
        import redis

        self.trips, self.batches = trips, batches
        self.stats_client = redis.Redis.from_url(store_url)
        self.broker_client = redis.Redis.from_url(broker_url)

    def snapshot(self) -> dict[str, Any]:
        times = os.times()
        taken = {
            "wall": time.time(),
            "cpu": times.user + times.system,
            "commands": commandstats(self.stats_client),
            "store_cpu": server_cpu(self.stats_client),
            "broker_cpu": server_cpu(self.broker_client),
            "trips": dict(self.trips.counts),
            "batches": self.batches.snapshot(),
        }
        # The beat stood still while the snapshot was taken: lateness is measured on what
        # falls due after that.
        taken["settled"] = time.time() + 0.2
        return taken

    def close(self) -> None:
        self.stats_client.close()
        self.broker_client.close()
