"""The profiled run: the real beat ticking in this process, the counters read either side of
the measured window, and what arrived in it."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from .counters import Batches, Consumer, Probe, RoundTrips
from .tracing import Tracer
from .workload import configure, load


def run(args: argparse.Namespace, store_server: Any, broker_server: Any) -> dict[str, Any]:
    app = configure(
        store_server.url(),
        broker_server.url(),
        args.batch,
        args.cache_size,
        args.log_level,
        args.claim_ahead,
    )
    from redisbeat.beat.scheduler import RedisScheduler

    period = args.entries_per_rate
    loaded = load(app, args.rate, period)
    tracer = Tracer(app).connect() if args.receiver else None
    consumer = Consumer(broker_server.url())
    trips = RoundTrips()
    trips.install()
    scheduler = RedisScheduler(app)
    batches = Batches(scheduler.store)
    probe = Probe(store_server.url(), broker_server.url(), trips, batches)
    profiler = _profiler(args)
    warmup = period + 2.0 if args.warmup is None else args.warmup
    begin = loaded.start_ms / 1000 + warmup
    try:
        before, after, end = _tick(
            scheduler, batches, probe, profiler, begin, loaded.count, args.seconds
        )
    finally:
        arrived, due, traced = consumer.stop()
        scheduler.close()
        probe.close()
        if tracer is not None:
            tracer.disconnect()
    return {
        "entries": loaded.count,
        "loaded_s": loaded.seconds,
        "before": before,
        "after": after,
        **_arrivals(before, end, arrived, due),
        "traced": (traced, len(arrived), tracer.started, tracer.ended) if tracer else None,
        "store_port": store_server.port,
        "broker_port": broker_server.port,
        "profile": profiler.output_text(unicode=True, color=False, show_all=args.profile_all)
        if profiler
        else None,
    }


def _profiler(args: argparse.Namespace) -> Any:
    """pyinstrument's profiler when asked for, else None."""
    if not (args.profile or args.profile_all):
        return None
    from pyinstrument import Profiler

    return Profiler(interval=0.001)


def _tick(
    scheduler: Any,
    batches: Batches,
    probe: Probe,
    profiler: Any,
    begin: float,
    count: int,
    seconds: float,
) -> tuple[dict[str, Any], dict[str, Any], float]:
    """Tick the beat until ``seconds`` after it has claimed ``count`` occurrences (and not
    before ``begin``): the snapshots either side of the window, and when it ended. A SIGTERM
    ends it early, with what was measured so far."""
    end = math.inf
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    try:
        while True:
            now = time.time()
            if not before and now >= begin and batches.claimed >= count:
                before = probe.snapshot()
                end = before["wall"] + seconds
                if profiler is not None:
                    profiler.start()
            if now >= end:
                if profiler is not None:
                    profiler.stop()
                after = probe.snapshot()
                break
            scheduler.tick()
    except SystemExit:
        pass
    return before, after, end


def _arrivals(before: dict[str, Any], end: float, arrived: Any, due: Any) -> dict[str, Any]:
    """The messages that arrived in the window, and the lateness of those due once settled."""
    start, stop_ms = before["wall"] * 1000, end * 1000
    pairs = list(zip(arrived, due, strict=True))
    window = [(a, d) for a, d in pairs if start <= a < stop_ms]
    late = [a - d for a, d in pairs if before["settled"] * 1000 <= d and a < stop_ms]
    # A beat that is far behind sends nothing due after the start: then all that arrived.
    late = late or [a - d for a, d in window]
    return {"window": window, "lateness": late}
