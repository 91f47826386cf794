"""The benchmark scenarios: each runs every scheduler in turn on the same rig and workload.

Every scenario returns a :class:`Table`: one row per scheduler and setting, the numbers the
docs quote, and the series its chart draws.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..common import percentile
from .adapters import Adapter, Spec, now_ms
from .harness import (
    BeatProcess,
    Fires,
    Rig,
    due_of,
    judge,
    rounded,
    specs_for,
    wait_for,
)

REDISBEAT = "redisbeat"
REDBEAT = "celery-redbeat"
DCB = "django-celery-beat"
#: Entries each scheduler's loader writes per second, at worst: how far ahead a workload's
#: first occurrence is placed, so that every entry is still ahead when its beat starts.
LOAD_RATE = {REDISBEAT: 3_500, REDBEAT: 2_500, DCB: 1_500}
#: The most entries a capacity step stores: above that, the period shortens instead.
MAX_ENTRIES = 50_000


def lead_ms(adapter: Adapter, count: int) -> int:
    """How far ahead to place the first occurrence of ``count`` entries about to be loaded."""
    return int((START_S + count / LOAD_RATE.get(adapter.name, 1_500)) * 1000)


#: Seconds for beats to start (imports, connecting, first tick) before the first occurrence.
START_S = 4.0
#: redisbeat's default lease (redisbeat_lease_seconds).
LEASE_S = 30
#: Celery's default beat_max_loop_interval, used by the idle scenario.
IDLE_MAX_INTERVAL = 300
#: Edit latency: a new entry is due this long after the call that stores it.
DUE_AFTER_MS = 250


@dataclass(frozen=True)
class Profile:
    name: str
    #: Capacity: entries' period and the measuring window, seconds.
    period: float
    window: float
    #: Offered rates tried per scheduler, in order, until one falls behind.
    rates: dict[str, tuple[int, ...]]
    scale_beats: tuple[int, ...]
    #: Stored entries per scheduler for the size scenario.
    sizes: dict[str, tuple[int, ...]]
    edits: dict[str, int]
    idle_seconds: float


QUICK = Profile(
    "quick",
    period=10,
    window=10,
    rates={
        REDISBEAT: (100, 1_000, 5_000, 10_000),
        REDBEAT: (100, 1_000),
        DCB: (100, 1_000),
    },
    scale_beats=(1, 2),
    sizes={REDISBEAT: (10_000, 100_000), REDBEAT: (10_000, 100_000), DCB: (10_000,)},
    edits={REDISBEAT: 30, REDBEAT: 5, DCB: 5},
    idle_seconds=15,
)
FULL = Profile(
    "full",
    period=10,
    window=30,
    rates={
        REDISBEAT: (100, 1_000, 2_000, 5_000, 10_000, 15_000, 20_000, 30_000),
        REDBEAT: (100, 500, 1_000, 5_000),
        DCB: (100, 500, 1_000),
    },
    scale_beats=(1, 2, 4),
    sizes={
        REDISBEAT: (10_000, 100_000, 1_000_000),
        REDBEAT: (10_000, 100_000),
        DCB: (10_000, 100_000),
    },
    edits={REDISBEAT: 200, REDBEAT: 30, DCB: 30},
    idle_seconds=60,
)
#: Every scenario at a toy size: what the test suite runs to check the harness works.
SMOKE = Profile(
    "smoke",
    period=2,
    window=2,
    rates={REDISBEAT: (50,), REDBEAT: (50,), DCB: (20,)},
    scale_beats=(1, 2),
    sizes={REDISBEAT: (1_000,), REDBEAT: (1_000,), DCB: (1_000,)},
    edits={REDISBEAT: 3, REDBEAT: 2, DCB: 2},
    idle_seconds=3,
)
PROFILES = {p.name: p for p in (SMOKE, QUICK, FULL)}


@dataclass
class Table:
    """One scenario's results."""

    scenario: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: What the chart draws: series name -> [(x, y)], with its axis labels.
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    axes: tuple[str, str] = ("", "")
    log_axes: bool = False


def _measure_rate(
    rig: Rig, adapter: Adapter, rate: int, beats: int, profile: Profile
) -> tuple[Fires, dict[str, float]]:
    """Offer ``rate`` fires/s to ``beats`` beats; what arrived, and what it cost."""
    period = min(profile.period, MAX_ENTRIES / rate)
    count = max(1, round(rate * period))
    adapter.clear()
    rig.drain()
    start = now_ms() + lead_ms(adapter, count)
    specs = specs_for(count, period, start)
    began = time.monotonic()
    adapter.load(specs)
    load_s = time.monotonic() - began
    # redisbeat's entry cache holds every entry that fires (its default holds 10,000).
    cache = {"BENCH_REDISBEAT_CACHE": str(max(10_000, count))} if adapter.name == REDISBEAT else {}
    procs = rig.start_beats(adapter, beats, **cache)
    first = max(start, now_ms())
    w0 = _steady(rig, first, period, count)
    w1 = w0 + int(profile.window * 1000)
    cpu0, cmds0 = _cpu(procs), rig.store_commands()
    _sleep_until(w1)
    cpu1, cmds1 = _cpu(procs), rig.store_commands()
    # Late arrivals of what was due in the window still count, up to a period.
    _sleep_until(w1 + int(min(period, 5) * 1000))
    alive = all(p.alive() for p in procs)
    rig.stop_beats()
    assert rig.sink is not None
    fires = judge(specs, rig.sink.arrivals(), (w0, w1))
    sent = max(1, fires.arrived_in_window)
    cost = {
        "load_s": load_s,
        "steady_s": (w0 - first) / 1000,
        "cpu_per_1000": (cpu1 - cpu0) / sent * 1000,
        "store_cmds_per_fire": (cmds1.total() - cmds0.total()) / sent,
        "beats_alive": float(alive),
    }
    return fires, cost


def _cpu(procs: list[BeatProcess]) -> float:
    return sum(p.cpu_seconds() for p in procs if p.alive())


#: The longest a scheduler's beats may take to send their first message (start-up on a
#: loaded machine: Django's setup, imports); a run that sends nothing by then measures 0/s.
FIRST_SEND_MS = 60_000


def _steady(rig: Rig, start: int, period: float, count: int) -> int:
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
    _sleep_until(begun + int(period * 1000))
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


def _sleep_until(ms: int) -> None:
    delay = (ms - now_ms()) / 1000
    if delay > 0:
        time.sleep(delay)


def _keeps_up(fires: Fires, rate: int) -> bool:
    return fires.fires_per_s >= 0.95 * rate and fires.missed <= 0.01 * max(1, fires.due)


def _rate_row(name: str, rate: int, beats: int, fires: Fires, cost: dict[str, float]) -> dict:
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


def capacity(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    table = Table(
        "capacity",
        "Capacity: one beat, rising offered rates",
        RATE_COLUMNS,
        axes=("offered fires/s", "sustained fires/s"),
        log_axes=True,
    )
    for name in schedulers:
        adapter = rig.adapter(name)
        for rate in profile.rates[name]:
            fires, cost = _measure_rate(rig, adapter, rate, 1, profile)
            table.rows.append(_rate_row(name, rate, 1, fires, cost))
            table.series.setdefault(name, []).append((rate, fires.fires_per_s))
            if not _keeps_up(fires, rate):
                table.notes.append(f"{name} falls behind at {rate:,} fires/s offered.")
                break
        adapter.clear()
    table.notes.append(
        f"Interval entries every {profile.period:g} s (fewer seconds above "
        f"{MAX_ENTRIES // int(profile.period):,} fires/s, so that at most {MAX_ENTRIES:,} are "
        "stored), spread evenly over the period, redisbeat's `redisbeat_entry_cache_size` "
        "raised to the number of entries when above its default; "
        f"measured over {profile.window:g} s from the steady state (see How it measures). "
        "Lateness is arrival minus due time, the due time being redisbeat's `redisbeat_due` "
        "header checked against the entry's grid, or for the others the grid point at or "
        "before the arrival."
    )
    return table


def round_trips(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """Store round trips per batch and per fire, counted by a TCP proxy, at 100 fires/s."""
    table = Table(
        "round-trips",
        "Store round trips, counted on the wire (100 fires/s, one beat)",
        ["scheduler", "fires", "round trips / fire", "claims", "round trips / claim batch"],
    )
    for name in schedulers:
        if name == DCB:
            table.rows.append({"scheduler": name, "round trips / fire": "PostgreSQL"})
            continue
        adapter = rig.adapter(name, via_proxy=True)
        proxy = rig.proxies[-1]
        count = round(100 * profile.period)
        adapter.clear()
        rig.drain()
        start = now_ms() + lead_ms(adapter, count)
        specs = specs_for(count, profile.period, start)
        adapter.load(specs)
        rig.start_beats(adapter, 1)
        w0 = max(start, now_ms()) + int(profile.period * 1000)
        _sleep_until(w0)
        trips0, cmds0 = proxy.requests, rig.store_commands()
        _sleep_until(w0 + int(profile.window * 1000))
        trips, cmds = proxy.requests - trips0, rig.store_commands() - cmds0
        rig.stop_beats()
        assert rig.sink is not None
        fires = judge(specs, rig.sink.arrivals(), (w0, w0 + int(profile.window * 1000)))
        sent = max(1, fires.arrived_in_window)
        claims = cmds.get("zrangebyscore", 0) if name == REDISBEAT else 0
        table.rows.append(
            {
                "scheduler": name,
                "fires": fires.arrived_in_window,
                "round trips / fire": round(trips / sent, 2),
                "claims": claims or "",
                "round trips / claim batch": round(trips / claims, 2) if claims else "",
            }
        )
        adapter.clear()
    table.notes.append(
        "A round trip is one request the beat writes to the store's socket (a pipeline is one). "
        "For redisbeat a claim batch is one run of the claim script (counted by its "
        "ZRANGEBYSCORE); the trips include heartbeats and wake-ups."
    )
    return table


def scale_out(rig: Rig, profile: Profile, schedulers: list[str], capacity_table: Table) -> Table:
    table = Table(
        "scale-out",
        "Scale-out: redisbeat with more beats at the same offered rate",
        [*RATE_COLUMNS, "vs one beat"],
        axes=("beats", "sustained fires/s"),
    )
    if REDISBEAT not in schedulers:
        return table
    # Twice what one beat sustained: more than one beat can do.
    kept = [r["sustained/s"] for r in capacity_table.rows if r["scheduler"] == REDISBEAT]
    rate = 2 * max(kept) if kept else max(profile.rates[REDISBEAT])
    adapter = rig.adapter(REDISBEAT)
    base = None
    for beats in profile.scale_beats:
        fires, cost = _measure_rate(rig, adapter, rate, beats, profile)
        row = _rate_row(REDISBEAT, rate, beats, fires, cost)
        base = base or fires.fires_per_s
        row["vs one beat"] = round(fires.fires_per_s / base, 2) if base else ""
        table.rows.append(row)
        table.series.setdefault(REDISBEAT, []).append((beats, fires.fires_per_s))
    adapter.clear()
    table.notes.append(
        f"Offered {rate:,} fires/s, twice the most one beat sustained in the capacity run. "
        "celery-redbeat and django-celery-beat run one active beat whatever is started."
    )
    return table


def size(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """Many stored entries, few due: memory, start-up and per-fire cost should stay flat."""
    table = Table(
        "size",
        "Size: stored entries of which 50 are due each second",
        [
            "scheduler",
            "stored",
            "load s",
            "start-up to first send s",
            "beat RSS MiB",
            "sustained/s",
            "late p99 ms",
            "store cmds / fire",
        ],
        axes=("stored entries", "beat RSS MiB"),
        log_axes=True,
    )
    for name in schedulers:
        adapter = rig.adapter(name)
        for stored in profile.sizes.get(name, ()):
            adapter.clear()
            rig.drain()
            # The cold entries are due in an hour; 50 hot ones every second from start-up.
            cold = specs_for(stored, 3600, now_ms() + 1800_000, prefix="c")
            began = time.monotonic()
            adapter.load(cold)
            hot_start = now_ms() + lead_ms(adapter, 50) - int(START_S * 1000) + 1000
            hot = specs_for(50, 1, hot_start, prefix="h")
            adapter.load(hot)
            load_s = time.monotonic() - began
            _sleep_until(hot_start)
            (proc,) = rig.start_beats(adapter, 1)
            assert rig.sink is not None
            sink = rig.sink
            wait_for(lambda s=sink, p=proc: s.count() > 0 or not p.alive(), 120, f"{name} sends")
            first = min(a.arrived_ms for a in sink.arrivals())
            startup = (first - proc.started_ms) / 1000
            w0 = now_ms() + 2000
            _sleep_until(w0)
            cmds0 = rig.store_commands()
            w1 = w0 + int(profile.window * 1000)
            _sleep_until(w1)
            cmds1 = rig.store_commands()
            rss = proc.rss_bytes() if proc.alive() else 0
            _sleep_until(w1 + 2000)
            rig.stop_beats()
            fires = judge(hot, sink.arrivals(), (w0, w1))
            sent = max(1, fires.arrived_in_window)
            table.rows.append(
                {
                    "scheduler": name,
                    "stored": stored,
                    "load s": round(load_s, 1),
                    "start-up to first send s": round(startup, 2),
                    "beat RSS MiB": round(rss / 2**20, 1),
                    "sustained/s": round(fires.fires_per_s),
                    "late p99 ms": rounded(fires.late(0.99), 1),
                    "store cmds / fire": round((cmds1.total() - cmds0.total()) / sent, 2),
                }
            )
            table.series.setdefault(name, []).append((stored, rss / 2**20))
        adapter.clear()
    table.notes.append(
        "Start-up counts from starting the `celery beat` process (Python and Celery imports "
        "included) to the first message on the queue; RSS is read after the window."
    )
    return table


def edit_latency(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """An entry due at once, stored while the beats sleep: how soon it is sent."""
    table = Table(
        "edit-latency",
        "Edit latency: a new entry due at once, beats asleep",
        ["scheduler", "path", "edits", "late p50 ms", "late p99 ms", "late max ms"],
    )
    for name in schedulers:
        adapter = rig.adapter(name)
        adapter.clear()
        rig.drain()
        adapter.load(specs_for(1000, 3600, now_ms() + 1800_000, prefix="c"))
        beats = 2 if adapter.max_active_beats > 1 else 1
        rig.start_beats(adapter, beats)
        time.sleep(START_S)  # asleep: nothing is due for half an hour
        paths: list[tuple[str, Callable[[Spec], None]]] = [("API", adapter.add)]
        if name != REDBEAT:
            paths.append(("Django admin save", adapter.add_via_admin))
        for path, add in paths:
            latencies = []
            for i in range(profile.edits[name]):
                assert rig.sink is not None
                rig.sink.mark()
                # Due shortly after the call returns (every path takes well under this).
                spec = Spec(f"x-{path[0]}{i:05d}", 3600, now_ms() + DUE_AFTER_MS)
                add(spec)
                sink = rig.sink
                wait_for(lambda s=sink: s.count() > 0, 30, f"{name} to send the new entry")
                latencies.append(min(a.arrived_ms for a in sink.arrivals()) - spec.anchor_ms)
                time.sleep(0.05)
            table.rows.append(
                {
                    "scheduler": name,
                    "path": path,
                    "edits": len(latencies),
                    "late p50 ms": rounded(percentile(latencies, 0.5), 1),
                    "late p99 ms": rounded(percentile(latencies, 0.99), 1),
                    "late max ms": max(latencies),
                }
            )
        rig.stop_beats()
        adapter.clear()
    table.notes.append(
        f"Beats run with `beat_max_loop_interval` = {rig.max_interval:g} s (Celery's default "
        f"is 300 s); redisbeat ran two beats. Each new entry is due {DUE_AFTER_MS} ms after "
        "the call that stores it starts (every call returned sooner); the latency is its "
        "message's arrival on the queue minus that due time."
    )
    return table


def idle(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    table = Table(
        "idle",
        "Idle: 1,000 entries due in an hour, beats asleep",
        ["scheduler", "beats", "seconds", "store commands / s / beat"],
    )
    for name in schedulers:
        adapter = rig.adapter(name)
        adapter.clear()
        rig.drain()
        adapter.load(specs_for(1000, 3600, now_ms() + 1800_000, prefix="c"))
        beats = 2 if adapter.max_active_beats > 1 else 1
        # Celery's default loop interval: what a beat costs left alone.
        rig.start_beats(adapter, beats, BENCH_MAX_INTERVAL=str(IDLE_MAX_INTERVAL))
        time.sleep(START_S + 2)
        before = rig.store_commands()
        time.sleep(profile.idle_seconds)
        spent = rig.store_commands() - before
        rig.stop_beats()
        per = spent.total() / profile.idle_seconds / beats
        table.rows.append(
            {
                "scheduler": name,
                "beats": beats,
                "seconds": profile.idle_seconds,
                "store commands / s / beat": round(per, 2) if name != DCB else "PostgreSQL",
            }
        )
        adapter.clear()
    table.notes.append(
        f"Every scheduler with Celery's default `beat_max_loop_interval` ({IDLE_MAX_INTERVAL} "
        "s) and its own defaults: redisbeat's heartbeat every 10 s. Commands run by scripts "
        "count one each, as INFO commandstats counts them. django-celery-beat's schedule is "
        "in PostgreSQL, so it runs no Redis command."
    )
    return table


def failover(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """kill -9 the beat doing the work: how long until the entries are sent again."""
    table = Table(
        "failover",
        "Failover: kill -9 of a working beat, 200 fires/s",
        ["scheduler", "beats", "sends resume after s", "late max after kill s", "missed"],
    )
    for name in schedulers:
        if name == DCB:
            table.rows.append(
                {
                    "scheduler": name,
                    "beats": 1,
                    "sends resume after s": "when restarted",
                    "late max after kill s": "",
                    "missed": "",
                }
            )
            continue
        adapter = rig.adapter(name)
        adapter.clear()
        rig.drain()
        start = now_ms() + int(START_S * 1000)
        specs = specs_for(200, 1, start)
        adapter.load(specs)
        procs = rig.start_beats(adapter, 2)
        _sleep_until(start + 4000)
        assert rig.sink is not None
        sink = rig.sink
        victim = _working_beat(procs)
        killed = now_ms()
        victim.kill(signal.SIGKILL)
        by_name = {s.name: s for s in specs}

        def resumed(s: Any = sink, k: int = killed, by: Any = by_name) -> int | None:
            """ms from the kill to the first message of an occurrence due after it."""
            after = [a.arrived_ms for a in s.arrivals() if due_of(by[a.entry], a) > k]
            return min(after) - k if after else None

        wait_for(resumed, 120, f"{name} to resume")
        resumed_ms = resumed() or 0
        # What the killed beat held comes back when its lease (or lock) runs out.
        w1 = now_ms() + 2000
        _sleep_until(w1 + (LEASE_S * 1000 if name == REDISBEAT else 2000) + 3000)
        rig.stop_beats()
        fires = judge(specs, sink.arrivals(), (killed, w1))
        table.rows.append(
            {
                "scheduler": name,
                "beats": 2,
                "sends resume after s": round(resumed_ms / 1000, 2),
                "late max after kill s": round(max(fires.lateness_ms, default=0) / 1000, 2),
                "missed": fires.missed,
            }
        )
        adapter.clear()
    table.notes.append(
        "Two beats each (django-celery-beat allows one, so a killed beat stops everything "
        "until something restarts it). 'Sends resume after' runs from the kill to the first "
        "message of an occurrence due after it. redisbeat's other beat never stopped; the "
        "killed beat's claims wait for their lease (30 s by default). celery-redbeat's "
        "standby waits for the lock to expire (its default timeout: 5 x the loop interval)."
    )
    return table


def _working_beat(procs: list[BeatProcess]) -> BeatProcess:
    """The beat using the most CPU over half a second: the one holding a lock, if any."""
    before = [p.cpu_seconds() for p in procs]
    time.sleep(0.5)
    spent = [p.cpu_seconds() - b for p, b in zip(procs, before, strict=True)]
    return procs[spent.index(max(spent))]


SCENARIOS = ("capacity", "round-trips", "scale-out", "size", "edit-latency", "idle", "failover")


def run(rig: Rig, profile: Profile, schedulers: list[str], only: list[str]) -> list[Table]:
    """Run the scenarios in ``only`` (all when empty) for ``schedulers``."""
    wanted = set(only or SCENARIOS)
    tables: list[Table] = []
    cap: Table | None = None
    steps: list[tuple[str, Callable[[], Table]]] = [
        ("capacity", lambda: capacity(rig, profile, schedulers)),
        ("round-trips", lambda: round_trips(rig, profile, schedulers)),
        ("scale-out", lambda: scale_out(rig, profile, schedulers, cap or Table("", "", []))),
        ("size", lambda: size(rig, profile, schedulers)),
        ("edit-latency", lambda: edit_latency(rig, profile, schedulers)),
        ("idle", lambda: idle(rig, profile, schedulers)),
        ("failover", lambda: failover(rig, profile, schedulers)),
    ]
    for name, step in steps:
        if name not in wanted:
            continue
        began = time.monotonic()
        print(f"[{name}] ...", flush=True)
        table = step()
        if name == "capacity":
            cap = table
        table.notes.append(f"Scenario time: {time.monotonic() - began:.0f} s.")
        tables.append(table)
        print(f"[{name}] done in {time.monotonic() - began:.0f} s", flush=True)
    return tables
