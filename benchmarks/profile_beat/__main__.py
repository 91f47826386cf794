"""Measure one beat's hot path: how many fires per second it sustains, how late they arrive,
and what each costs in Redis commands, round trips and CPU.

    .venv/bin/python -m benchmarks.profile_beat [--rate 1000] [--seconds 10]
        [--entries-per-rate 10] [--batch 100] [--cache-size N] [--claim-ahead S]
        [--receiver] [--profile | --profile-all]

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
``--receiver`` connects ``before_task_publish`` and ``after_task_publish`` receivers like
OpenTelemetry's Celery instrumentation's (a span per message, W3C trace context put into its
headers), as an instrumented app has; the report then counts the messages that arrived with it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ..common import unwind_on_sigterm
from .measure import run
from .report import report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_beat", description=__doc__.splitlines()[0]
    )
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
        "--claim-ahead",
        type=float,
        help="redisbeat_claim_ahead_seconds (default: the setting's)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        help="seconds before measuring (default: one period and 2 s); measuring also waits "
        "until the beat has claimed as many occurrences as there are entries, so that it "
        "measures a beat that has seen them all, as a long-running beat has",
    )
    parser.add_argument(
        "--receiver",
        action="store_true",
        help="connect publish signal receivers like OpenTelemetry's Celery instrumentation",
    )
    parser.add_argument("--log-level", default="WARNING", help="the beat's log level")
    parser.add_argument("--profile", action="store_true", help="run under pyinstrument")
    parser.add_argument(
        "--profile-all", action="store_true", help="show library frames in the profile too"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
