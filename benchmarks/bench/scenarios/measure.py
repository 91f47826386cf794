"""How the scenarios measure: placing a workload ahead of its beats, waiting for a run's
steady state, offering a rate and reading what arrived and what it cost (and what bounded
it), and the rate row that capacity, cold start and the cluster scenario print."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..adapters import Adapter, Spec, now_ms
from ..harness import BeatProcess, Rig, machine_jiffies, redis_usage, specs_for
from ..judging import Fires, judge, rounded
from .profiles import LOAD_RATE, MAX_ENTRIES, REDISBEAT, START_S, Profile, Table

#: The longest a scheduler's beats may take to send their first message (start-up on a
#: loaded machine: Django's setup, imports); a run that sends nothing by then measures 0/s.
FIRST_SEND_MS = 60_000
#: The longest lead a cold start is placed ahead of its beats' start.
MAX_COLD_LEAD_MS = 60_000
CORES = os.cpu_count() or 1

RATE_COLUMNS = [
    "scheduler",
    "beats",
    "offered/s",
    "sustained/s",
    "late p50 ms",
    "late p99 ms",
    "late max ms",
    "drift",
    "missed",
    "doubles",
    "off grid",
    "beat CPU s / 1000",
    "store cmds / fire",
    "steady after s",
]


def lead_ms(adapter: Adapter, count: int) -> int:
    """How far ahead to place the first occurrence of ``count`` entries about to be loaded."""
    return int((START_S + count / LOAD_RATE.get(adapter.name, 1_500)) * 1000)


def fresh(rig: Rig, name: str, via_proxy: bool = False) -> Adapter:
    """The adapter ``name`` with nothing stored and the broker queue drained: every
    scheduler starts a scenario from the same empty state."""
    adapter = rig.adapter(name, via_proxy=via_proxy)
    adapter.clear()
    rig.drain()
    return adapter


def cold_specs(count: int) -> list[Spec]:
    """``count`` entries due every hour, the first in half an hour: stored, never sent while
    a scenario measures."""
    return specs_for(count, 3600, now_ms() + 1800_000, prefix="c")


def asleep(adapter: Adapter) -> int:
    """Store 1,000 cold entries, so the beats sleep; how many beats to start (two where two
    can both work)."""
    adapter.load(cold_specs(1000))
    return 2 if adapter.max_active_beats > 1 else 1


def one_beat_estimate(capacity: Table | None, profile: Profile) -> int:
    """What one redisbeat beat can send, for sizing an offer above it: the most it sustained
    in this run's capacity scenario, else the profile's top capacity rate."""
    rows = capacity.rows if capacity else []
    sent = [r["sustained/s"] for r in rows if r["scheduler"] == REDISBEAT]
    return max(1, max(sent, default=max(profile.rates[REDISBEAT])))


def own_window(profile: Profile) -> Profile:
    """The profile with the measuring window of the redisbeat-only rate scenarios."""
    return replace(profile, window=profile.own_window or profile.window)


def measure_rate(
    rig: Rig,
    adapter: Adapter,
    rate: int,
    beats: int,
    profile: Profile,
    store_ports: Sequence[int] = (),
    cold_s: float | None = None,
    period: float | None = None,
    env: Mapping[str, str] | None = None,
    ahead: bool = True,
) -> tuple[Fires, dict[str, float]]:
    """Offer ``rate`` fires/s to ``beats`` beats; what arrived, and what it cost. The store's
    commands and CPU are read from the redis-servers on ``store_ports`` (by default the
    rig's store), which must be where the adapter keeps its schedule. Measured over the
    profile's window from the steady state, or with ``cold_s`` over that many seconds from
    the first occurrence: the beats' start, every entry new to them. The entries' period is
    the profile's (shorter where it would store over MAX_ENTRIES) unless ``period`` says;
    ``env`` adds to the beats' environment. ``ahead=False`` places the first occurrence
    only the beats' start-up ahead, not the whole load too: what the load reaches late
    starts a period later, on its grid, long before a steady-state window opens."""
    ports = list(store_ports) or [rig.store.port]
    period = period or min(profile.period, MAX_ENTRIES / rate)
    count = max(1, round(rate * period))
    lead = lead_ms(adapter, count) if ahead or cold_s else int(START_S * 1000)
    specs, start, load_s, procs = _placed(
        rig, adapter, count, period, beats, cold_s, env or {}, lead
    )
    first = max(start, now_ms())
    w0 = first if cold_s else steady(rig, first, period, count)
    w1 = w0 + int((cold_s or profile.window) * 1000)
    before = Reading.of(procs, ports)
    sleep_until(w1)
    after = Reading.of(procs, ports)
    # Late arrivals of what was due in the window still count, up to a period.
    sleep_until(w1 + int(min(period, 5) * 1000))
    alive = all(p.alive() for p in procs)
    rig.stop_beats()
    assert rig.sink is not None
    fires = judge(specs, rig.sink.arrivals(), (w0, w1))
    cost = after.cost_since(before, max(1, fires.arrived_in_window), min(beats, CORES))
    cost.update(load_s=load_s, steady_s=(w0 - first) / 1000, beats_alive=float(alive))
    return fires, cost


def _placed(
    rig: Rig,
    adapter: Adapter,
    count: int,
    period: float,
    beats: int,
    cold_s: float | None,
    env: Mapping[str, str],
    lead: int,
) -> tuple[list[Spec], int, float, list[BeatProcess]]:
    """``count`` entries stored, the first due ``lead`` ms ahead, and ``beats`` beats
    started: the specs, the first occurrence, how long loading took, and the beats."""
    while True:
        adapter.clear()
        rig.drain()
        start = now_ms() + lead
        specs = specs_for(count, period, start)
        began = time.monotonic()
        adapter.load(specs)
        load_s = time.monotonic() - began
        procs = rig.start_beats(adapter, beats, **env)
        if not cold_s or _up_before(adapter, beats, start) or lead >= MAX_COLD_LEAD_MS:
            return specs, start, load_s, procs
        # A cold start is measured from a beat already working at the first occurrence: on
        # a loaded machine its start-up may outlast the lead, so the run starts over.
        rig.stop_beats()
        lead *= 2


@dataclass(frozen=True)
class Reading:
    """The counters a window's cost is the difference of, read at one moment."""

    at: float
    beats_cpu: float
    #: Per store redis-server: commands and CPU seconds since it started.
    redis: list[tuple[int, float]]
    #: The machine's busy and total CPU ticks.
    machine: tuple[int, int]
    log_sizes: list[int]
    procs: list[BeatProcess]

    @classmethod
    def of(cls, procs: list[BeatProcess], ports: Sequence[int]) -> Reading:
        redis = [redis_usage([port]) for port in ports]
        return cls(
            time.monotonic(),
            _cpu(procs),
            [(calls.total(), cpu) for calls, cpu in redis],
            machine_jiffies(),
            [p.log_size() for p in procs],
            procs,
        )

    def cost_since(self, before: Reading, sent: int, beat_cores: int) -> dict[str, float]:
        """Per message sent: beat CPU, store commands and Redis CPU; over the window: the
        busiest store redis-server's share of a core, the beats' share of the cores they
        can use (one each), the machine's share of all its cores; and the beats' loud
        log lines."""
        seconds = max(1e-9, self.at - before.at)
        cpu = [a[1] - b[1] for a, b in zip(self.redis, before.redis, strict=True)]
        commands = sum(a[0] - b[0] for a, b in zip(self.redis, before.redis, strict=True))
        beats_cpu = self.beats_cpu - before.beats_cpu
        busy, total = (a - b for a, b in zip(self.machine, before.machine, strict=True))
        lines = (
            p.loud_lines(start, end)
            for p, start, end in zip(self.procs, before.log_sizes, self.log_sizes, strict=True)
        )
        return {
            "cpu_per_1000": beats_cpu / sent * 1000,
            "store_cmds_per_fire": commands / sent,
            "store_cpu_ms_per_1000": sum(cpu) * 1000 / sent * 1000,
            "redis_busy": max(cpu, default=0.0) / seconds,
            "beats_busy": beats_cpu / seconds / max(1, beat_cores),
            "machine_busy": busy / total if total else 0.0,
            "log_lines": float(sum(lines)),
        }


def _up_before(adapter: Adapter, beats: int, due_ms: int) -> bool:
    """Whether ``beats`` of the adapter's beats started work before ``due_ms`` (True when the
    adapter cannot tell)."""
    while now_ms() < due_ms:
        up = adapter.beats_up()
        if up is None or up >= beats:
            return True
        time.sleep(0.05)
    return False


def _cpu(procs: list[BeatProcess]) -> float:
    return sum(p.cpu_seconds() for p in procs if p.alive())


def steady(rig: Rig, start: int, period: float, count: int) -> int:
    """When a run reaches its steady state, at most four periods after its first message
    arrived: at least one period in, once as many messages arrived as there are entries (a
    scheduler that falls behind sends each entry once per round), and, where messages carry
    their due time, once the latest is less than 100 ms late (a backlog from the first round
    is worked off). Counting from the first message rather than the start keeps a beat's
    start-up on a loaded machine out of the window, for every scheduler alike."""
    assert rig.sink is not None
    while rig.sink.count() == 0 and now_ms() < start + FIRST_SEND_MS:
        time.sleep(0.05)
    first = rig.sink.latest()
    begun = max(start, first.arrived_ms if first is not None else now_ms())
    sleep_until(begun + int(period * 1000))
    deadline = begun + int(4 * period * 1000)
    while now_ms() < deadline:
        latest = rig.sink.latest()
        if (
            rig.sink.count() >= count
            and latest is not None
            and (latest.due_header is None or latest.arrived_ms - latest.due_header < 100)
        ):
            break
        time.sleep(0.05)
    return now_ms()


def sleep_until(ms: int) -> None:
    delay = (ms - now_ms()) / 1000
    if delay > 0:
        time.sleep(delay)


def keeps_up(fires: Fires, rate: int) -> bool:
    return fires.fires_per_s >= 0.95 * rate and fires.missed <= 0.01 * max(1, fires.due)


def rate_row(
    name: str, rate: int, beats: int, fires: Fires, cost: dict[str, float]
) -> dict[str, Any]:
    return {
        "scheduler": name,
        "beats": beats,
        "offered/s": rate,
        "sustained/s": round(fires.fires_per_s),
        "late p50 ms": rounded(fires.late(0.5), 1),
        "late p99 ms": rounded(fires.late(0.99), 1),
        "late max ms": max(fires.lateness_ms, default=None),
        "drift": rounded(fires.drift_ratio, 5),
        "missed": fires.missed,
        "doubles": fires.doubles,
        "off grid": fires.off_grid,
        "beat CPU s / 1000": round(cost["cpu_per_1000"], 3),
        "store cmds / fire": round(cost["store_cmds_per_fire"], 2),
        "steady after s": round(cost["steady_s"], 1),
    }
