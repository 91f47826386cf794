"""The overload scenario: one redisbeat beat far behind, offered several times what it can
send, next to the same beat at its limit and keeping up with half of it. A beat behind
schedule must not get slower per message, nor louder: when it is behind, every cycle
counts."""

from __future__ import annotations

from typing import Any

from ..adapters import Adapter
from ..harness import Rig
from ..judging import Fires, rounded
from .measure import fresh, measure_rate, one_beat_estimate, own_window
from .profiles import MAX_ENTRIES, REDISBEAT, Profile, Table

#: How many times what one beat can send the far-behind run offers.
OVERLOAD = 4
#: The at-its-limit run offers this much over what the beat sent far behind.
LIMIT = 1.25
FAR, AT_LIMIT, KEEPING_UP = "far behind", "at its limit", "keeping up"
COLUMNS = [
    "run",
    "offered/s",
    "sustained/s",
    "vs peak",
    "late p50 ms",
    "late p99 ms",
    "missed",
    "doubles",
    "beat CPU ms / message",
    "vs keeping up",
    "store cmds / fire",
    "log lines",
    "steady after s",
]


def overload(rig: Rig, profile: Profile, schedulers: list[str], capacity: Table | None) -> Table:
    table = Table(
        "overload",
        f"Overload: one beat offered {OVERLOAD}x what it can send, at its limit, keeping up",
        COLUMNS,
    )
    if REDISBEAT not in schedulers:
        return table
    run = own_window(profile)
    estimate = one_beat_estimate(capacity, profile)
    # The same entries in every run, only their period differs: the beat's entry cache
    # holds the same share of them.
    entries = min(MAX_ENTRIES, round(estimate * profile.period))
    adapter = fresh(rig, REDISBEAT)
    far = _run(rig, run, adapter, FAR, OVERLOAD * estimate, entries)
    limit = _run(rig, run, adapter, AT_LIMIT, round(LIMIT * far["sustained/s"]), entries)
    peak = max(far["sustained/s"], limit["sustained/s"])
    keeping = _run(rig, run, adapter, KEEPING_UP, max(1, peak // 2), entries)
    adapter.clear()
    for row in (far, limit, keeping):
        row["vs peak"] = round(row["sustained/s"] / peak, 2) if peak else None
        base = keeping["beat CPU ms / message"]
        row["vs keeping up"] = round(row["beat CPU ms / message"] / base, 2) if base else None
        table.rows.append(row)
    table.notes.append(
        f"One beat at default settings, {entries:,} entries in every run (their period sets "
        f"the offered rate). Far behind: {OVERLOAD} x {estimate:,} fires/s (one beat's "
        "estimate: the most it sustained in this run's capacity scenario, else the "
        f"profile's top rate); at its limit: {LIMIT:g} x what it sent far behind; keeping "
        "up: half the peak, the most it sent in either. Measured over "
        f"{run.window:g} s from the steady state (at most four periods in, behind or not). "
        "'vs keeping up' is the CPU per message over the keeping-up run's. Log lines are "
        "the beat's at WARNING and above (it runs with `--loglevel WARNING`) written "
        "during the window."
    )
    return table


def _run(
    rig: Rig, profile: Profile, adapter: Adapter, name: str, rate: int, entries: int
) -> dict[str, Any]:
    fires, cost = measure_rate(rig, adapter, rate, 1, profile, period=entries / rate, ahead=False)
    return _row(name, rate, fires, cost)


def _row(name: str, rate: int, fires: Fires, cost: dict[str, float]) -> dict[str, Any]:
    return {
        "run": name,
        "offered/s": rate,
        "sustained/s": round(fires.fires_per_s),
        "late p50 ms": rounded(fires.late(0.5), 1),
        "late p99 ms": rounded(fires.late(0.99), 1),
        "missed": fires.missed,
        "doubles": fires.doubles,
        "beat CPU ms / message": round(cost["cpu_per_1000"], 3),
        "store cmds / fire": round(cost["store_cmds_per_fire"], 2),
        "log lines": int(cost["log_lines"]),
        "steady after s": round(cost["steady_s"], 1),
    }
