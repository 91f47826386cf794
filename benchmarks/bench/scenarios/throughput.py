"""The throughput scenarios: how many fires per second one beat sustains (capacity), what
each costs in store round trips, and how far more redisbeat beats go (scale-out)."""

from __future__ import annotations

from typing import Any

from redisbeat.store.scripts import CLAIM

from ..adapters import now_ms
from ..harness import Rig, specs_for
from ..judging import judge
from .measure import (
    RATE_COLUMNS,
    fresh,
    keeps_up,
    lead_ms,
    measure_rate,
    rate_row,
    sleep_until,
)
from .profiles import DCB, MAX_ENTRIES, REDISBEAT, Profile, Table


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
        fires, cost = measure_rate(rig, rig.adapter(name), rate, 1, profile, cold_s=seconds)
        table.rows.append(rate_row(name, rate, 1, fires, cost))
        rig.adapter(name).clear()
    table.notes.append(
        f"The capacity run's workload at {rate:,} fires/s, measured over the first {seconds:g} "
        "s from the first occurrence instead of from the steady state: the beat starts a few "
        "seconds before it, and every entry's first send (parsing its definition, building "
        "its message) falls in the window. Default settings: redisbeat's entry cache of "
        "10,000 holds a fifth of the entries."
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
    single = measure_rate(rig, adapter, rate, 1, profile)
    how = "twice the most one beat sustained in the capacity run"
    if 2 * single[0].fires_per_s > rate * 1.05:
        # One beat did more than half of it (the capacity run kept up at its top rate, so
        # it never found one beat's limit): offer twice what one beat did here, so that
        # the offer does not cap what more beats can show.
        rate = int(round(2 * single[0].fires_per_s, -1))
        single = measure_rate(rig, adapter, rate, 1, profile)
        how = "twice what one beat sustained when offered twice the capacity run's most"
    base = single[0].fires_per_s
    for beats in profile.scale_beats:
        fires, cost = single if beats == 1 else measure_rate(rig, adapter, rate, beats, profile)
        row = rate_row(REDISBEAT, rate, beats, fires, cost)
        row["vs one beat"] = round(fires.fires_per_s / base, 2) if base else ""
        table.rows.append(row)
        table.series.setdefault(REDISBEAT, []).append((beats, fires.fires_per_s))
    adapter.clear()
    table.notes.append(
        f"Offered {rate:,} fires/s, {how}. "
        "celery-redbeat and django-celery-beat run one active beat whatever is started."
    )
    return table
