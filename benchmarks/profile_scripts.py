"""What Redis spends on each fire's two scripts, the claim and the finish, apart.

    .venv/bin/python -m benchmarks.profile_scripts [--entries 10000] [--batch 100]
        [--batches 50] [--missed 0] [--skipped] [--callgrind]

Starts a private redis-server, stores ``entries`` interval entries (with arguments of their
own, as the benchmark's have) all due at once, and runs the two scripts of a beat's hot
path from this process: ``batches`` claims of ``batch`` entries each, then a 'sent' finish
of each batch (with ``--missed``, each send reports that many occurrences missed before it,
as a beat behind schedule does; with ``--skipped``, each claim is finished as skipped for
being late, as an entry with catch_up 'skip' is behind schedule). A first round writes
every entry's run state, as on a schedule that has run before; the second is measured.
Reported per fire, for the claim and the finish apart: Redis's CPU time (``INFO cpu``,
which includes the kernel's work on its sockets and varies with what else the machine
runs), and with ``--callgrind`` the instructions redis-server ran, counted by valgrind's
callgrind (repeatable to a fraction of a percent whatever else the machine runs: the figure
to compare two versions of a script by), with the functions they were spent in. The beat's
own work is not here: ``benchmarks.profile_beat`` has it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis

from .common import unwind_on_sigterm

PHASES = ("claim", "finish")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_scripts", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--entries", type=int, default=10_000, help="entries stored, all due")
    parser.add_argument("--batch", type=int, default=100, help="claims per batch")
    parser.add_argument("--batches", type=int, default=50, help="batches measured")
    parser.add_argument(
        "--missed",
        type=int,
        default=0,
        help="occurrences each send found missed before it, as a beat behind schedule counts them",
    )
    parser.add_argument(
        "--skipped",
        action="store_true",
        help="finish each claim as skipped for being late, as catch_up 'skip' does behind schedule",
    )
    parser.add_argument(
        "--callgrind", action="store_true", help="count instructions under valgrind's callgrind"
    )
    parser.add_argument("--top", type=int, default=12, help="functions shown per script")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.entries < args.batch * args.batches:
        sys.exit("--entries must be at least --batch x --batches: every claim is a full batch")
    if args.callgrind and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        sys.exit("--callgrind needs valgrind (Debian/Ubuntu: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="redisbeat-scripts-") as tmp:
        work = Path(tmp)
        fires, cpu = _served(work / "plain", args, None)
        late = f", each late with {args.missed} missed before it" if args.missed else ""
        late += ", each skipped for being late" if args.skipped else ""
        print(f"{fires:,} fires in batches of {args.batch}, {args.entries:,} entries stored{late}")
        for phase in PHASES:
            print(f"{phase:<7} Redis CPU {cpu[phase] / fires * 1e6:6.1f} µs per fire")
        if args.callgrind:
            # A server per phase, counted from its start to its end: its exit dump is whole.
            for phase in PHASES:
                _served(work / phase, args, phase)
                [dump] = (work / phase).glob("callgrind.*")
                _print_instructions(phase, dump, fires, args.top)
    return 0


def _served(
    work: Path, args: argparse.Namespace, counted: str | None
) -> tuple[int, dict[str, float]]:
    """A private redis-server in ``work`` (under callgrind, counting ``counted``, when given)
    and the two rounds on it: (fires, Redis CPU s per phase)."""
    from redisbeat_testkit.redis_server import RedisServer

    work.mkdir()
    if counted:
        # The kit starts the server REDISBEAT_TEST_REDIS_SERVER names: valgrind's, here.
        os.environ["REDISBEAT_TEST_REDIS_SERVER"] = str(_under_callgrind(work))
    try:
        server = RedisServer(work).start()
    finally:
        os.environ.pop("REDISBEAT_TEST_REDIS_SERVER", None)
    try:
        return _run(server.url(), args, counted)
    finally:
        server.stop()


def _under_callgrind(work: Path) -> Path:
    """A redis-server launcher that runs it under callgrind, counting nothing until told."""
    wrapper = work / "redis-server-callgrind"
    binary = shutil.which("redis-server")
    out = work / "callgrind.%p"
    wrapper.write_text(
        f"#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file={out} "
        f'{binary} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _run(url: str, args: argparse.Namespace, counted: str | None) -> tuple[int, dict[str, float]]:
    """Two rounds of claims and finishes, the second measured: (fires, CPU s per phase)."""
    from redisbeat import ScheduleStore

    client = redis.Redis.from_url(url, decode_responses=True)
    store = ScheduleStore(redis.Redis.from_url(url, decode_responses=True), prefix="scripts")
    try:
        _load(store, client, args.entries)
        _round(store, args, None)
        _load(store, client, args.entries)
        meter = Meter(client, counted)
        return _round(store, args, meter), meter.cpu
    finally:
        store.close()
        client.close()


def _load(store: Any, client: redis.Redis, count: int) -> None:
    """``count`` entries (stored once), every one due now, oldest first."""
    from redisbeat import Entry, Interval

    names = [f"e{i:07d}" for i in range(count)]
    if not client.exists(store.keys.entries):
        store.upsert_many(
            Entry(name, "proj.ping", Interval(10), kwargs={"entry": name}) for name in names
        )
    now = store.now_ms()
    for first in range(0, count, 10_000):
        chunk = names[first : first + 10_000]
        client.zadd(
            store.keys.schedule, {name: now - 60_000 + first + i for i, name in enumerate(chunk)}
        )


class Meter:
    """Redis's CPU time per phase; under callgrind, it counts the ``counted`` phase alone."""

    def __init__(self, client: redis.Redis, counted: str | None) -> None:
        self.client = client
        self.counted = counted
        self.pid = int(client.info("server")["process_id"])
        self.cpu: dict[str, float] = {}

    def _used(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    def _count(self, phase: str, on: bool) -> None:
        if phase == self.counted:
            switch = ["callgrind_control", "-i", "on" if on else "off", str(self.pid)]
            subprocess.run(switch, check=True, capture_output=True)

    def start(self, phase: str) -> None:
        self.cpu[phase] = self.cpu.get(phase, 0.0) - self._used()
        self._count(phase, True)

    def stop(self, phase: str) -> None:
        self._count(phase, False)
        self.cpu[phase] += self._used()


def _round(store: Any, args: argparse.Namespace, meter: Meter | None) -> int:
    """Claim ``batches`` full batches, finishing each as sent; measured by ``meter``."""
    from redisbeat import occurrence_id
    from redisbeat.beat.batch import LATE
    from redisbeat.store.records import Outcome

    # Each batch is finished before the next claim, as a beat does: a finish goes under the
    # lease its shard's last claim set.
    fires = 0
    for _ in range(args.batches):
        if meter:
            meter.start("claim")
        batch = store.claim("profile", 600_000, args.batch)
        if meter:
            meter.stop("claim")
        done = [
            Outcome(
                c.name,
                "skipped" if args.skipped else "sent",
                c.due_ms,
                c.due_ms + 10_000,
                occurrence_id("p", c.name, c.due_ms),
                error=LATE if args.missed or args.skipped else "",
                missed=args.missed,
            )
            for c in batch.claims
        ]
        if meter:
            meter.start("finish")
        result = store.finish("profile", batch.lease_until_ms, done)
        if meter:
            meter.stop("finish")
        if result.finished != len(done):
            sys.exit(f"finished {result.finished} of {len(done)} claims: not a beat's hot path")
        fires += len(done)
    return fires


def _print_instructions(phase: str, dump: Path, fires: int, top: int) -> None:
    out = subprocess.run(
        ["callgrind_annotate", str(dump)], check=True, capture_output=True, text=True
    ).stdout
    rows = [m for m in re.finditer(r"^\s*([\d,]+) \(\s*([\d.]+)%\)\s+(.*)$", out, re.M)]
    total = next((m for m in rows if "PROGRAM TOTALS" in m[3]), None)
    if total is None:
        print(f"{phase}: callgrind counted nothing ({dump.name})")
        return
    print(f"\n{phase}: {int(total[1].replace(',', '')) / fires:,.0f} instructions per fire")
    for m in [m for m in rows if m is not total][:top]:
        print(f"  {m[2]:>5}%  {m[3][:100]}")


if __name__ == "__main__":
    unwind_on_sigterm()  # so the server is stopped
    sys.exit(main())
