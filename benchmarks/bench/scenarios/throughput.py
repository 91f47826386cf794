"""The throughput scenarios: how many fires per second one beat sustains (capacity), from
its start (cold start, and with a ``before_task_publish`` receiver: instrumented), and what
each fire costs in store round trips."""

from __future__ import annotations

from typing import Any

from redisbeat.store.scripts import CLAIM

from ..adapters import now_ms
from ..harness import Rig, specs_for
from ..judging import judge
from .measure import RATE_COLUMNS, fresh, keeps_up, lead_ms, measure_rate, rate_row, sleep_until
from .profiles import DCB, MAX_ENTRIES, REDISBEAT, Profile, Table

INSTRUMENTED_COLUMNS = [
    "receiver",
    "offered/s",
    "sustained/s",
    "vs none",
    "late p50 ms",
    "late p99 ms",
    "missed",
    "doubles",
    "beat CPU s / 1000",
    "CPU vs none",
    "with traceparent",
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
            fires, cost = measure_rate(rig, adapter, rate, 1, profile)
            table.rows.append(rate_row(name, rate, 1, fires, cost))
            table.series.setdefault(name, []).append((rate, fires.fires_per_s))
            if not keeps_up(fires, rate):
                table.notes.append(f"{name} falls behind at {rate:,} fires/s offered.")
                break
        adapter.clear()
    table.notes.append(
        f"Interval entries every {profile.period:g} s (fewer seconds above "
        f"{MAX_ENTRIES // int(profile.period):,} fires/s, so that at most {MAX_ENTRIES:,} are "
        "stored), spread evenly over the period, every scheduler at its default settings "
        "(redisbeat's `redisbeat_entry_cache_size` of 10,000 holds a fifth of 50,000 "
        "entries); "
        f"measured over {profile.window:g} s from the steady state (see How it measures). "
        "Lateness is arrival minus due time, the due time being redisbeat's `redisbeat_due` "
        "header checked against the entry's grid, or for the others the grid point at or "
        "before the arrival."
    )
    return table


def cold_start(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """One beat started on a stored workload: what it sends from the first occurrence on,
    every entry new to it (a restart, a deploy), at default settings."""
    rate, seconds = profile.cold_rate, profile.cold_seconds
    table = Table(
        "cold-start",
        f"Cold start: one beat's first {seconds:g} s, {rate:,} fires/s offered",
        RATE_COLUMNS,
    )
    for name in schedulers:
        if name != REDISBEAT:
            continue  # the others fall behind below this rate in the capacity run
        table.rows.append(_cold_row(rig, profile, name))
    table.notes.append(
        f"The capacity run's workload at {rate:,} fires/s, measured over the first {seconds:g} "
        "s from the first occurrence instead of from the steady state: the beat starts a few "
        "seconds before it, and every entry's first send (parsing its definition, building "
        "its message) falls in the window. Default settings: redisbeat's entry cache of "
        "10,000 holds a fifth of the entries."
    )
    return table


def _cold_row(rig: Rig, profile: Profile, name: str, **env: str) -> dict[str, Any]:
    """The cold start's rate row, the beat's environment added to with ``env``."""
    rate, adapter = profile.cold_rate, rig.adapter(name)
    fires, cost = measure_rate(rig, adapter, rate, 1, profile, cold_s=profile.cold_seconds, env=env)
    adapter.clear()
    return rate_row(name, rate, 1, fires, cost)


def instrumented(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """The cold start without and with a ``before_task_publish`` receiver that writes a trace
    context into each message's headers, as OpenTelemetry's Celery instrumentation does: a
    receiver may change every message, so redisbeat cannot reuse a built one."""
    rate, seconds = profile.cold_rate, profile.cold_seconds
    table = Table(
        "instrumented",
        f"Instrumented: the cold start with a before_task_publish receiver, {rate:,} fires/s",
        INSTRUMENTED_COLUMNS,
    )
    if REDISBEAT not in schedulers:
        return table
    assert rig.sink is not None
    rows: list[dict[str, Any]] = []
    for receiver, env in (("none", {}), ("traceparent", {"BENCH_RECEIVER": "1"})):
        row = {"receiver": receiver, **_cold_row(rig, profile, REDISBEAT, **env)}
        row["with traceparent"] = rig.sink.with_header("traceparent")
        base = rows[0] if rows else row
        sent, cpu = base["sustained/s"], base["beat CPU s / 1000"]
        row["vs none"] = round(row["sustained/s"] / sent, 2) if sent else None
        row["CPU vs none"] = round(row["beat CPU s / 1000"] / cpu, 2) if cpu else None
        rows.append(row)
    table.rows += rows
    table.notes.append(
        f"The cold-start run ({rate:,} fires/s, the first {seconds:g} s from the first "
        "occurrence, one beat, default settings) twice, one after the other: as it is, then "
        "with `BENCH_RECEIVER=1`, which connects a `before_task_publish` receiver in the "
        "beat's app that looks up the task, takes its id and writes a new W3C `traceparent` "
        "into the message's headers (what OpenTelemetry's Celery instrumentation does, "
        "without its SDK). 'with traceparent' counts the run's messages carrying it; "
        "'beat CPU s / 1000' is CPU ms per message."
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
        table.rows.append(_round_trips_of(rig, profile, name))
    table.notes.append(
        "A round trip is one request the beat writes to the store's socket (a pipeline is one). "
        "For redisbeat a claim batch is one run of the claim script (a request that holds "
        "the script's SHA); the trips include heartbeats and wake-ups."
    )
    return table


def _round_trips_of(rig: Rig, profile: Profile, name: str) -> dict[str, Any]:
    """One scheduler's row: its beat reaches the store through a proxy that counts requests."""
    adapter = fresh(rig, name, via_proxy=True)
    proxy = rig.proxies[-1]
    claim_sha = CLAIM.sha.encode()
    proxy.tally(claim_sha)
    count = round(100 * profile.period)
    start = now_ms() + lead_ms(adapter, count)
    specs = specs_for(count, profile.period, start)
    adapter.load(specs)
    rig.start_beats(adapter, 1)
    w0 = max(start, now_ms()) + int(profile.period * 1000)
    sleep_until(w0)
    trips0, claims0 = proxy.requests, proxy.tallies[claim_sha]
    sleep_until(w0 + int(profile.window * 1000))
    trips, claims = proxy.requests - trips0, proxy.tallies[claim_sha] - claims0
    rig.stop_beats()
    assert rig.sink is not None
    fires = judge(specs, rig.sink.arrivals(), (w0, w0 + int(profile.window * 1000)))
    sent = max(1, fires.arrived_in_window)
    claims = claims if name == REDISBEAT else 0
    adapter.clear()
    return {
        "scheduler": name,
        "fires": fires.arrived_in_window,
        "round trips / fire": round(trips / sent, 2),
        "claims": claims or "",
        "round trips / claim batch": round(trips / claims, 2) if claims else "",
    }
