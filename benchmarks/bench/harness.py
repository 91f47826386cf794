"""The machinery of a benchmark run: private servers, beat processes and the sink.

A :class:`Rig` owns two private redis-servers: the broker, which only the beats' messages
and the sink touch, and the store, where redisbeat and celery-redbeat keep their schedules
(django-celery-beat keeps its in a private PostgreSQL), so the store's ``INFO
commandstats`` counts the schedulers' own Redis work and nothing else. The sink pops the
broker queue in a thread and stamps each message on arrival; :mod:`.judging` turns the
arrivals into the numbers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import environ_without_django, stop_process
from redisbeat_testkit.proxy import TcpProxy
from redisbeat_testkit.redis_server import RedisServer

from ..common import QueuePopper, parse_message
from .adapters import ADAPTERS, Adapter, Spec, now_ms
from .judging import Arrival

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: Commands the harness itself sends to the store (reading the counters).
HARNESS_COMMANDS = frozenset({"info", "config|resetstat", "ping", "flushdb", "select"})
#: The first line of a Celery log record: ``[2026-01-01 12:00:00,000: WARNING/MainProcess]``.
LOG_RECORD = re.compile(rb"^\[[^\]]*: ([A-Z]+)/")
LOUD = frozenset({b"WARNING", b"ERROR", b"CRITICAL"})


def decode(raw: bytes, arrived_ms: int) -> Arrival:
    """The task id and due header of a message, and the entry from its body."""
    headers, kwargs = parse_message(raw)
    due = headers.get("redisbeat_due")
    return Arrival(arrived_ms, kwargs["entry"], headers["id"], None if due is None else int(due))


class Sink:
    """Every message the beats send, popped as it arrives."""

    def __init__(self, url: str) -> None:
        self.reader = QueuePopper(url).start()
        self._mark = 0

    def mark(self) -> None:
        """Forget what arrived so far: the next :meth:`arrivals` starts here."""
        self._mark = len(self.reader.raw)

    def count(self) -> int:
        return len(self.reader.raw) - self._mark

    def last_arrival_ms(self) -> int:
        """When the latest message arrived (0: none since the mark)."""
        raw = self.reader.raw
        return raw[-1][0] if len(raw) > self._mark else 0

    def latest(self) -> Arrival | None:
        """The message that arrived last since the mark, decoded."""
        raw = self.reader.raw
        if len(raw) <= self._mark:
            return None
        at, message = raw[-1]
        return decode(message, at)

    def arrivals(self, skip: int = 0) -> list[Arrival]:
        """What arrived since the mark, less the first ``skip`` (already read)."""
        have = len(self.reader.raw)
        return [decode(raw, at) for at, raw in self.reader.raw[self._mark + skip : have]]

    def with_header(self, name: str) -> int:
        """How many messages since the mark carry the header ``name``."""
        raw = self.reader.raw[self._mark :]
        return sum(1 for _, message in raw if name in json.loads(message)["headers"])

    def idle_for(self, seconds: float, timeout: float) -> None:
        """Wait until nothing has arrived for ``seconds`` (at most ``timeout``)."""
        deadline = time.monotonic() + timeout
        seen, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = len(self.reader.raw)
            if n != seen:
                seen, since = n, time.monotonic()
            elif time.monotonic() - since >= seconds:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        self.reader.stop_popping()


class BeatProcess:
    """One ``celery beat`` process, with its CPU time and memory read from /proc."""

    def __init__(self, adapter: Adapter, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.started = time.monotonic()
        self.started_ms = now_ms()
        self._out = log.open("wb")
        command = [sys.executable, "-m", "celery", "-A", "benchmarks.bench.app", "beat"]
        command += ["-S", adapter.scheduler, "--loglevel", "WARNING"]
        # Only the adapter says which Django project a beat runs, if any (not a test run's).
        self.process = subprocess.Popen(
            command,
            cwd=log.parent,
            env={**environ_without_django(), **env},
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime

    def rss_bytes(self) -> int:
        return rss_of(self.pid)

    def peak_rss_bytes(self) -> int:
        """The most resident memory it has had, so far."""
        return rss_of(self.pid, "VmHWM")

    def log_size(self) -> int:
        return self.log.stat().st_size

    def loud_lines(self, start: int = 0, end: int | None = None) -> int:
        return loud_lines(self.log, start, end)

    def kill(self, sig: int) -> None:
        self.process.send_signal(sig)
        self.process.wait(30)

    def stop(self) -> None:
        stop_process(self.process)
        self._out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Rig:
    """The private servers, the sink and the adapters of one benchmark run."""

    def __init__(self, directory: Path, max_interval: float = 5.0) -> None:
        self.directory = directory
        self.max_interval = max_interval
        (directory / "broker").mkdir(parents=True, exist_ok=True)
        (directory / "store").mkdir(exist_ok=True)
        self.broker = RedisServer(directory / "broker")
        self.store = RedisServer(directory / "store")
        self.sink: Sink | None = None
        self.adapters: dict[str, Adapter] = {}
        self.beats: list[BeatProcess] = []
        self.proxies: list[TcpProxy] = []
        self._logs = 0

    def __enter__(self) -> Rig:
        self.broker.start()
        self.store.start()
        self.sink = Sink(self.broker.url(0))
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_beats()
        for proxy in self.proxies:
            proxy.stop()
        for adapter in self.adapters.values():
            adapter.teardown()
        if self.sink is not None:
            self.sink.stop()
        self.store.stop()
        self.broker.stop()

    def adapter(self, name: str, via_proxy: bool = False) -> Adapter:
        """The set-up adapter ``name``; with ``via_proxy`` its beats reach the store through
        a TCP proxy that counts round trips (``self.proxies[-1]``)."""
        key = f"{name}+proxy" if via_proxy else name
        if key not in self.adapters:
            url = self.store.url(0)
            if via_proxy:
                proxy = TcpProxy(self.store.port).start()
                self.proxies.append(proxy)
                url = proxy.url(0)
            adapter = ADAPTERS[name](self.directory / key.replace("+", "-"), url)
            adapter.workdir.mkdir(parents=True, exist_ok=True)
            adapter.setup()
            self.adapters[key] = adapter
        return self.adapters[key]

    # -- beats --------------------------------------------------------------------------------

    def start_beats(self, adapter: Adapter, count: int, **env: str) -> list[BeatProcess]:
        beat_env = {
            **adapter.beat_env(),
            "BENCH_BROKER_URL": self.broker.url(0),
            "BENCH_MAX_INTERVAL": str(self.max_interval),
            **env,
        }
        started = []
        for _ in range(count):
            self._logs += 1
            log = adapter.workdir / f"beat-{self._logs}.log"
            started.append(BeatProcess(adapter, beat_env, log))
        self.beats += started
        return started

    def stop_beats(self) -> None:
        for beat in self.beats:
            beat.stop()
        self.beats = []

    def drain(self) -> None:
        """Empty the broker queue and forget what arrived."""
        assert self.sink is not None
        self.sink.idle_for(0.3, 10)
        self.sink.mark()

    # -- counters -----------------------------------------------------------------------------

    def store_commands(self) -> Counter[str]:
        """Calls per command on the store since it started (the harness's own left out)."""
        return redis_usage([self.store.port])[0]


def redis_usage(ports: Sequence[int]) -> tuple[Counter[str], float]:
    """Calls per command (the harness's own left out) and CPU seconds (``used_cpu_sys`` +
    ``used_cpu_user``), summed over the redis-servers on ``ports`` since each started: a
    store may be one server or every master of a cluster."""
    calls: Counter[str] = Counter()
    cpu = 0.0
    for port in ports:
        client = redis.Redis(port=port)
        try:
            stats, usage = client.info("commandstats"), client.info("cpu")
        finally:
            client.close()
        for name, v in stats.items():
            if name.removeprefix("cmdstat_") not in HARNESS_COMMANDS:
                calls[name.removeprefix("cmdstat_")] += int(v["calls"])
        cpu += float(usage["used_cpu_sys"]) + float(usage["used_cpu_user"])
    return calls, cpu


def loud_lines(log: Path, start: int = 0, end: int | None = None) -> int:
    """Lines of a beat's log records at WARNING and above (a traceback's lines included)
    written between byte offsets ``start`` and ``end``; the start-up banner is no record."""
    with log.open("rb") as f:
        f.seek(start)
        text = f.read() if end is None else f.read(max(0, end - start))
    count, loud = 0, False
    for line in text.splitlines():
        record = LOG_RECORD.match(line)
        if record:
            loud = record.group(1) in LOUD
        count += loud
    return count


def rss_of(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory (``VmHWM``: its peak), in bytes, from /proc (0 when it
    says none)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0


def machine_jiffies() -> tuple[int, int]:
    """The machine's busy and total CPU time since boot, in clock ticks, all cores."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user and nice
    return total - idle, total


def specs_for(count: int, every: float, start_ms: int, prefix: str = "e") -> list[Spec]:
    """``count`` entries every ``every`` seconds, spread evenly over the period from start."""
    step = every * 1000 / count
    return [Spec(f"{prefix}{i:07d}", every, start_ms + int(i * step)) for i in range(count)]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    wait_until(predicate, timeout, what, 0.02)
