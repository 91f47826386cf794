"""Measure one beat's hot path: how many fires per second it sustains, how late they arrive,
and what each costs in Redis commands, round trips and CPU.

    .venv/bin/python -m benchmarks.profile_beat [--rate 1000] [--seconds 10]
        [--entries-per-rate 10] [--batch 100] [--cache-size N] [--profile | --profile-all]

Starts two private redis-servers (the store and the broker, so the store's command counts
are its own), loads ``rate * entries-per-rate`` interval entries of period
``entries-per-rate`` seconds whose anchors are spread evenly over the period, so that
``rate`` occurrences fall due every second, and runs the real beat in this process:
``RedisScheduler(app).tick()`` in a loop, with the Celery app of the test beats
(``redisbeat_testkit/proj.py``). A separate process pops the broker queue (BLPOP, then LPOP 500 at a
time) and stamps each message's arrival; lateness is arrival minus its ``redisbeat_due``
header (the consumer is a process, not a thread, so that it takes no CPU or GIL from the
beat it measures). A fire is an occurrence claimed, published to the broker and finished.

Measuring starts once the beat has claimed as many occurrences as there are entries (as a
beat that has run for a while, it has seen them all). Round trips are counted by wrapping
redis-py's ``send_packed_command`` (one call per command or pipeline) in the beat's thread;
store commands come from ``INFO commandstats`` and include those run inside Lua scripts.
A rate beyond what the beat can send measures its ceiling: fires/s is then what it sustained.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import multiprocessing
import os
import re
import tempfile
import threading
import time
from array import array
from collections import Counter
from datetime import datetime, timezone
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .common import percentile, unwind_on_sigterm

QUEUE = "celery"
POP = 500
_DUE = re.compile(rb'"redisbeat_due": (\d+)')


# -- the consumer: another process, so it takes no CPU or GIL from the beat ---------------------


def consume(url: str, stop: Any, out: Connection) -> None:
    """Pop the queue until told to stop; send back (arrival ms, due ms) of every message."""
    import redis

    client = redis.Redis.from_url(url)
    arrived, due = array("d"), array("q")

    def note(raws: list[bytes]) -> None:
        now = time.time() * 1000
        for raw in raws:
            match = _DUE.search(raw)
            value = match.group(1) if match else json.loads(raw)["headers"]["redisbeat_due"]
            arrived.append(now)
            due.append(int(value))

    while not stop.is_set():
        popped = client.blpop([QUEUE], timeout=0.2)
        if popped is None:
            continue
        note([popped[1]])
        while raws := client.lpop(QUEUE, POP):
            note(raws)  # type: ignore[arg-type]
    while raws := client.lpop(QUEUE, POP):
        note(raws)  # type: ignore[arg-type]
    out.send((arrived, due))
    out.close()


# -- counting round trips -----------------------------------------------------------------------


class RoundTrips:
    """Count what the beat's thread writes to each server: one write is one round trip
    (a pipeline or a command alike), keyed by the server's port."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self._thread = threading.get_ident()

    def install(self) -> None:
        from redis.connection import AbstractConnection

        original = AbstractConnection.send_packed_command
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


# -- the run ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="occurrences due per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds")
    parser.add_argument(
        "--entries-per-rate",
        type=int,
        default=10,
        help="entries per unit of rate, which is also each entry's period in seconds",
    )
    parser.add_argument("--batch", type=int, default=100, help="redisbeat_batch_size")
    parser.add_argument(
        "--cache-size", type=int, help="redisbeat_entry_cache_size (default: the setting's)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        help="seconds before measuring (default: one period and 2 s); measuring also waits "
        "until the beat has claimed as many occurrences as there are entries, so that it "
        "measures a beat that has seen them all, as a long-running beat has",
    )
    parser.add_argument("--log-level", default="WARNING", help="the beat's log level")
    parser.add_argument("--profile", action="store_true", help="run under pyinstrument")
    parser.add_argument(
        "--profile-all", action="store_true", help="show library frames in the profile too"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    from redisbeat_testkit.redis_server import RedisServer

    unwind_on_sigterm()  # so both servers are stopped
    workdir = Path(tempfile.mkdtemp(prefix="redisbeat-profile-"))
    (workdir / "store").mkdir()
    (workdir / "broker").mkdir()
    store_server = RedisServer(workdir / "store").start()
    broker_server = RedisServer(workdir / "broker").start()
    try:
        results = run(args, store_server, broker_server)
    finally:
        store_server.stop()
        broker_server.stop()
    report(args, results)


def run(args: argparse.Namespace, store_server: Any, broker_server: Any) -> dict[str, Any]:
    import redis

    os.environ.update(
        TEST_BROKER_URL=broker_server.url(),
        TEST_STORE_URL=store_server.url(),
        TEST_PREFIX="bench",
        TEST_BATCH=str(args.batch),
        TEST_MAX_INTERVAL="5",
    )
    os.environ.pop("TEST_FREEZE_MARKER", None)
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    from redisbeat_testkit.proj import app

    if args.cache_size is not None:
        app.conf.redisbeat_entry_cache_size = args.cache_size
    from redisbeat import Entry, Interval, ScheduleStore
    from redisbeat.beat.scheduler import RedisScheduler

    period = args.entries_per_rate
    count = args.rate * period
    store = ScheduleStore.from_app(app)
    start_ms = store.now_ms() + 3000 + count // 20  # time to load the entries first
    step = period * 1000 / count
    loading = time.perf_counter()
    store.upsert_many(
        Entry(
            f"e{i:07d}",
            "proj.ping",
            Interval(period),
            start_at=datetime.fromtimestamp((start_ms + int(i * step)) / 1000, timezone.utc),
        )
        for i in range(count)
    )
    loaded = time.perf_counter() - loading
    store.close()
    gc.collect()  # the loader's garbage is not the beat's

    stop = multiprocessing.Event()
    receive, send = multiprocessing.Pipe(duplex=False)
    consumer = multiprocessing.Process(
        target=consume, args=(broker_server.url(), stop, send), daemon=True
    )
    consumer.start()

    trips = RoundTrips()
    trips.install()
    scheduler = RedisScheduler(app)
    batches = Batches(scheduler.store)
    stats_client = redis.Redis.from_url(store_server.url())
    broker_client = redis.Redis.from_url(broker_server.url())

    profiler = None
    if args.profile or args.profile_all:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)

    warmup = period + 2.0 if args.warmup is None else args.warmup
    begin = start_ms / 1000 + warmup
    end = math.inf
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}

    def snapshot() -> dict[str, Any]:
        times = os.times()
        taken = {
            "wall": time.time(),
            "cpu": times.user + times.system,
            "commands": commandstats(stats_client),
            "store_cpu": server_cpu(stats_client),
            "broker_cpu": server_cpu(broker_client),
            "trips": dict(trips.counts),
            "batches": batches.snapshot(),
        }
        # The beat stood still while the snapshot was taken: lateness is measured on what
        # falls due after that.
        taken["settled"] = time.time() + 0.2
        return taken

    try:
        while True:
            now = time.time()
            if not before and now >= begin and batches.claimed >= count:
                before = snapshot()
                end = before["wall"] + args.seconds
                if profiler is not None:
                    profiler.start()
            if now >= end:
                if profiler is not None:
                    profiler.stop()
                after = snapshot()
                break
            scheduler.tick()
    except SystemExit:
        pass
    finally:
        stop.set()
        arrived, due = receive.recv()
        consumer.join(10)
        scheduler.close()
        stats_client.close()
        broker_client.close()

    start, stop_ms = before["wall"] * 1000, end * 1000
    pairs = list(zip(arrived, due, strict=True))
    window = [(a, d) for a, d in pairs if start <= a < stop_ms]
    late = [a - d for a, d in pairs if before["settled"] * 1000 <= d and a < stop_ms]
    # A beat that is far behind sends nothing due after the start: then all that arrived.
    late = late or [a - d for a, d in window]
    return {
        "entries": count,
        "loaded_s": loaded,
        "before": before,
        "after": after,
        "window": window,
        "lateness": late,
        "store_port": store_server.port,
        "broker_port": broker_server.port,
        "profile": profiler.output_text(unicode=True, color=False, show_all=args.profile_all)
        if profiler
        else None,
    }


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    before, after, window = r["before"], r["after"], r["window"]
    seconds = after["wall"] - before["wall"]
    fires = len(window)
    lateness = r["lateness"]
    ticks, batches, claimed, finishes = (
        a - b for a, b in zip(after["batches"], before["batches"], strict=True)
    )
    commands = Counter(after["commands"])
    commands.subtract(before["commands"])
    commands["cmdstat_info"] -= 1  # the snapshot's own INFO
    store_commands = sum(commands.values())

    def trips(port: int) -> int:
        return int(after["trips"].get(port, 0)) - int(before["trips"].get(port, 0))

    store_trips, broker_trips = trips(r["store_port"]), trips(r["broker_port"])
    cpu = after["cpu"] - before["cpu"]
    per = max(fires, 1)
    rows = [
        (
            "offered",
            f"{args.rate:,} fires/s ({r['entries']:,} entries every "
            f"{args.entries_per_rate} s, batch {args.batch}), loaded in {r['loaded_s']:.1f} s",
        ),
        ("fires/s sustained", f"{fires / seconds:,.0f} ({fires:,} in {seconds:.1f} s)"),
        (
            "lateness p50 / p99 / max",
            f"{percentile(lateness, 0.5) or 0.0:.1f} / "
            f"{percentile(lateness, 0.99) or 0.0:.1f} / {max(lateness, default=0):.1f} ms",
        ),
        (
            "ticks / batches / claims",
            f"{ticks:,} / {batches:,} / {claimed:,} "
            f"({claimed / max(batches, 1):.1f} claims per batch)",
        ),
        (
            "store commands per fire",
            f"{store_commands / per:.2f} "
            f"(incl. inside Lua; {commands['cmdstat_evalsha'] / per:.3f} EVALSHA per fire)",
        ),
        (
            "store round trips per batch",
            f"{store_trips / max(batches, 1):.2f} ({store_trips:,} in all, {finishes:,} finishes)",
        ),
        (
            "broker round trips per batch",
            f"{broker_trips / max(batches, 1):.2f} ({broker_trips / per:.3f} per fire)",
        ),
        ("beat CPU s per 1,000 fires", f"{cpu / per * 1000:.3f} ({cpu:.1f} s in all)"),
        (
            "redis CPU s per 1,000 fires",
            f"store {(after['store_cpu'] - before['store_cpu']) / per * 1000:.3f}, "
            f"broker {(after['broker_cpu'] - before['broker_cpu']) / per * 1000:.3f}",
        ),
    ]
    top = sorted(((n, c) for n, c in commands.items() if c > 0), key=lambda x: -x[1])[:8]
    rows.append(("top store commands", ", ".join(f"{n[8:]} {c / per:.2f}" for n, c in top)))
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    if r["profile"]:
        print(r["profile"])
    if args.json:
        args.json.write_text(json.dumps(dict(rows), indent=2) + "\n")


if __name__ == "__main__":
    main()
