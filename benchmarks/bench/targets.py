"""The targets the project set itself, each met or not, read from a run's tables: a target
whose scenario did not run (or ran too small to judge it) says "not measured"."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .scenarios.profiles import REDISBEAT, Table

Add = Callable[[str, Any, "bool | None"], None]


def rows_of(tables: dict[str, Table], scenario: str) -> list[dict[str, Any]]:
    return tables[scenario].rows if scenario in tables else []


def kept_up(row: dict[str, Any]) -> bool:
    """A rate row that kept up: 95% of the offered rate sustained, nothing missed."""
    return bool(row["sustained/s"] >= 0.95 * row["offered/s"] and row["missed"] == 0)


def targets(tables: dict[str, Table]) -> Table:
    out = Table("targets", "Targets", ["target", "measured", "met"])

    def add(target: str, measured: Any, met: bool | None) -> None:
        shown = measured if measured is not None else "not measured"
        verdict = "n/a" if met is None else ("yes" if met else "NO")
        out.rows.append({"target": target, "measured": shown, "met": verdict})

    for check in (_one_beat, _instrumented, _cluster, _storage, _scale, _overload, _backlog):
        check(tables, add)
    return out


def _one_beat(tables: dict[str, Table], add: Add) -> None:
    cap = rows_of(tables, "capacity")
    # The highest offered rate kept up with (a sustained rate a little under it is the
    # window's edge, one over it a beat catching up on a backlog).
    kept = [r for r in cap if r["scheduler"] == REDISBEAT and kept_up(r)]
    best = max((r["offered/s"] for r in kept), default=None)
    add("one beat keeps up with >= 5,000 fires/s", best, None if best is None else best >= 5000)
    row = next((r for r in cap if r["scheduler"] == REDISBEAT and r["offered/s"] == 1000), None)
    p99 = row["late p99 ms"] if row else None
    add("late p99 < 10 ms at 1,000 fires/s", p99, None if p99 is None else p99 < 10)
    drift = row["drift"] if row else None
    add(
        "no drift (mean period within 0.1% of nominal)",
        drift,
        None if drift is None else abs(drift - 1) <= 0.001,
    )
    trips = next((r for r in rows_of(tables, "round-trips") if r["scheduler"] == REDISBEAT), None)
    per_batch = trips["round trips / claim batch"] if trips else None
    add(
        "<= 2 store round trips per batch",
        per_batch,
        None if not isinstance(per_batch, (int, float)) else per_batch <= 2,
    )
    cmds = row["store cmds / fire"] if row else None
    add("<= 6 store commands per fire at 1,000 fires/s", cmds, None if cmds is None else cmds <= 6)
    cold = next((r for r in rows_of(tables, "cold-start") if r["offered/s"] >= 5000), None)
    add(
        "first 40 s from start at 5,000 fires/s, default settings: kept up, p99 <= 50 ms",
        f"{cold['sustained/s']:,}/s, p99 {cold['late p99 ms']} ms" if cold else None,
        None if cold is None else _on_time(cold),
    )


def _on_time(row: dict[str, Any]) -> bool:
    return kept_up(row) and (row["late p99 ms"] or 0) <= 50


def _instrumented(tables: dict[str, Table], add: Add) -> None:
    # Judged at the cold start's rate, where a receiver's cost can show.
    rows = [r for r in rows_of(tables, "instrumented") if r["offered/s"] >= 5000]
    traced = next((r for r in rows if r["receiver"] != "none"), None)
    ratio = traced["vs none"] if traced else None
    add(
        "cold start at 5,000 fires/s: with a before_task_publish receiver >= 60% of the "
        "throughput without",
        ratio,
        None if ratio is None else ratio >= 0.6,
    )
    judged = [r for r in rows if r["offered/s"] >= 5000]
    add(
        "cold start at 5,000 fires/s, with and without a receiver: kept up, p99 <= 50 ms",
        "; ".join(
            f"{r['receiver']}: {r['sustained/s']:,}/s, p99 {r['late p99 ms']} ms" for r in judged
        )
        or None,
        all(_on_time(r) for r in judged) if judged else None,
    )


def _cluster(tables: dict[str, Table], add: Add) -> None:
    """A 3-master cluster with 2 beats keeps up with what one Redis with 2 beats does, at
    p99 <= 50 ms at 1,000 fires/s."""
    rows = [r for r in rows_of(tables, "cluster") if r["beats"] == 2 and kept_up(r)]
    if not rows:
        return
    one = max((r["sustained/s"] for r in rows if r["store"] == "one Redis"), default=0)
    cluster = [r for r in rows if r["store"] != "one Redis"]
    most = max((r["sustained/s"] for r in cluster), default=0)
    add("cluster, 2 beats >= one Redis, 2 beats (fires/s)", f"{most:,} vs {one:,}", most >= one)
    at_1000 = [r["late p99 ms"] for r in cluster if r["offered/s"] == 1000]
    worst = max(at_1000, default=None)
    add("cluster p99 <= 50 ms at 1,000 fires/s", worst, None if worst is None else worst <= 50)


def _storage(tables: dict[str, Table], add: Add) -> None:
    """Size, edits, idle and failover."""
    sizes = [r for r in rows_of(tables, "size") if r["scheduler"] == REDISBEAT]
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        growth = large["beat RSS MiB"] / small["beat RSS MiB"] - 1 if small["beat RSS MiB"] else 0
        add(
            f"RSS with {large['stored']:,} entries within 10% of {small['stored']:,}",
            f"{small['beat RSS MiB']} -> {large['beat RSS MiB']} MiB ({growth:+.1%})",
            growth <= 0.10,
        )
        add(
            f"start-up to first send < 1 s with {large['stored']:,} entries",
            large["start-up to first send s"],
            large["start-up to first send s"] < 1,
        )
    edits = [
        r["late p99 ms"] for r in rows_of(tables, "edit-latency") if r["scheduler"] == REDISBEAT
    ]
    worst = max((p for p in edits if isinstance(p, (int, float))), default=None)
    add("edit latency p99 < 50 ms", worst, None if worst is None else worst < 50)
    idle = next((r for r in rows_of(tables, "idle") if r["scheduler"] == REDISBEAT), None)
    per_s = idle["store commands / s / beat"] if idle else None
    add("idle <= 0.1 commands/s per beat", per_s, None if per_s is None else per_s <= 0.1)
    killed = next((r for r in rows_of(tables, "failover") if r["scheduler"] == REDISBEAT), None)
    # Done once the other beat sends again and the killed one's claims are sent too.
    took = max(killed["sends resume after s"], killed["late max after kill s"]) if killed else None
    add(
        "failover after kill -9 <= 5 s",
        f"sends resume after {killed['sends resume after s']} s, latest occurrence "
        f"{killed['late max after kill s']} s late"
        if killed
        else None,
        None if took is None else took <= 5,
    )


def _scale(tables: dict[str, Table], add: Add) -> None:
    cores = os.cpu_count() or 1
    rows = [r for r in rows_of(tables, "scale") if r["run"] == "overload"]
    behind = [r for r in rows if r["bottleneck"] != "kept up"]
    # A ratio to one beat says how beats scale only where one beat was at its limit; only
    # beat counts the machine has a core for are judged, and a saturated Redis excuses one.
    limited = {_group(r) for r in behind if r["beats"] == 1}
    judged = [
        r
        for r in rows
        if _group(r) in limited and 1 < r["beats"] <= cores and r["bottleneck"] != "redis"
    ]
    worst = min(judged, key=lambda r: (r["vs one beat"] or 0) / r["beats"], default=None)
    add(
        f"N beats >= 0.8 x N x one beat until Redis CPU saturates (N <= {cores} cores)",
        f"worst {worst['vs one beat']}x at {worst['beats']} beats ({worst['store']}, every "
        f"{worst['every s']:g} s; bottleneck: {worst['bottleneck']})"
        if worst
        else None,
        None if worst is None else (worst["vs one beat"] or 0) >= 0.8 * worst["beats"],
    )
    _beat_cost(rows, judged, add, cores)
    _eight_beats(rows, add, cores)
    stores = dict.fromkeys(r["store"] for r in behind)
    costs = {s: max(r["Redis CPU µs / fire"] for r in behind if r["store"] == s) for s in stores}
    add(
        "Redis CPU per fire <= 15 µs at the beats' limit (the most of any scale row behind)",
        "; ".join(f"{s}: {us:g} µs" for s, us in costs.items()) or None,
        all(us <= 15 for us in costs.values()) if costs else None,
    )
    keep = [r for r in rows_of(tables, "scale") if r["run"] == "keep-up"]
    row = next((r for r in keep if r["offered/s"] >= 10_000), None)
    add(
        "one beat keeps up with 10,000 entries due every second, late p99 <= 50 ms",
        f"{row['sustained/s']:,}/s, p99 {row['late p99 ms']} ms" if row else None,
        None if row is None else _on_time(row),
    )


def _beat_cost(
    rows: list[dict[str, Any]], judged: list[dict[str, Any]], add: Add, cores: int
) -> None:
    """What each beat spends per message, N beats against one: a beat count's rate is its
    beats' cores over that cost, so at most 1.25 times one beat's cost means N beats, each
    with a core, sustain 0.8 x N times one beat. On a machine whose cores the beats share
    with Redis, a row's rate stops where the machine does; its cost still says this."""
    alone = {_group(r): r["beat CPU ms / message"] for r in rows if r["beats"] == 1}
    ratios = [
        (r["beat CPU ms / message"] / alone[_group(r)], r) for r in judged if alone[_group(r)]
    ]
    worst = max(ratios, key=lambda pair: pair[0], default=None)
    add(
        f"N beats: beat CPU per message <= 1.25 x one beat's, so N beats with a core each "
        f"sustain >= 0.8 x N (N <= {cores} cores)",
        f"worst {worst[0]:.2f}x at {worst[1]['beats']} beats ({worst[1]['store']}, every "
        f"{worst[1]['every s']:g} s)"
        if worst
        else None,
        None if worst is None else worst[0] <= 1.25,
    )


#: What 8 beats must sustain on a 16-core machine, entries due every second, by store.
EIGHT_BEATS = {"one Redis": 30_000, "cluster, 3 masters": 60_000}


def _eight_beats(rows: list[dict[str, Any]], add: Add, cores: int) -> None:
    """The rates 8 beats sustain, judged on a machine with 16 cores or more (on fewer they
    share cores with each other and the servers, and the ratios above say what they can)."""
    eight = {r["store"]: r["sustained/s"] for r in rows if r["beats"] == 8 and r["every s"] == 1}
    shown = "; ".join(f"{store}: {rate:,}/s" for store, rate in eight.items()) or None
    judged = cores >= 16 and set(eight) == set(EIGHT_BEATS)
    add(
        "8 beats on 16 cores, entries every 1 s: one Redis >= 30,000 fires/s, a 3-master "
        "cluster >= 60,000",
        shown if judged or shown is None else f"{shown} (on {cores} cores: not judged)",
        all(eight[s] >= least for s, least in EIGHT_BEATS.items()) if judged else None,
    )


def _group(row: dict[str, Any]) -> tuple[str, float]:
    return row["store"], row["every s"]


def _overload(tables: dict[str, Table], add: Add) -> None:
    far = next((r for r in rows_of(tables, "overload") if r["run"] == "far behind"), None)
    # Judged only where the beat was behind: one that kept up shows nothing of the kind.
    behind = far if far and not kept_up(far) else None
    cpu = behind["vs keeping up"] if behind else None
    add(
        "far behind: CPU per message <= 1.2 x keeping up",
        cpu if far is None or behind else "kept up: not behind",
        None if cpu is None else cpu <= 1.2,
    )
    peak = behind["vs peak"] if behind else None
    add(
        "far behind: sends at >= 90% of its peak rate",
        peak if far is None or behind else "kept up: not behind",
        None if peak is None else peak >= 0.9,
    )


def _backlog(tables: dict[str, Table], add: Add) -> None:
    row = next(iter(rows_of(tables, "backlog")), None)
    if row is None:
        add("backlog: every delayed task sent exactly once", None, None)
        return
    missed, doubled = row["delayed missed"], row["delayed doubled"]
    add(
        "backlog: every delayed task sent exactly once (missed / doubled)",
        f"{missed:,} / {doubled:,} of {row['delayed']:,}",
        missed == 0 and doubled == 0,
    )
    add(
        "backlog: each periodic entry sent once for all it missed (catch_up once)",
        f"{row['periodic coalesced']:,} of {row['periodic']:,}",
        row["periodic coalesced"] == row["periodic"],
    )
