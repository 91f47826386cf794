"""What a profiled run prints (and, with ``--json``, writes): one labelled line per figure."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..common import percentile


@dataclass(frozen=True)
class Deltas:
    """What the measured window changed, from the snapshots either side of it."""

    seconds: float
    fires: int
    ticks: int
    batches: int
    claimed: int
    finishes: int
    #: Store commands per INFO commandstats name, the snapshot's own INFO left out.
    commands: Counter[str]
    store_trips: int
    broker_trips: int
    cpu: float
    store_cpu: float
    broker_cpu: float

    @property
    def per(self) -> int:
        return max(self.fires, 1)


def deltas(r: dict[str, Any]) -> Deltas:
    before, after = r["before"], r["after"]
    ticks, batches, claimed, finishes = (
        a - b for a, b in zip(after["batches"], before["batches"], strict=True)
    )
    commands = Counter(after["commands"])
    commands.subtract(before["commands"])
    commands["cmdstat_info"] -= 1  # the snapshot's own INFO

    def trips(port: int) -> int:
        return int(after["trips"].get(port, 0)) - int(before["trips"].get(port, 0))

    return Deltas(
        seconds=after["wall"] - before["wall"],
        fires=len(r["window"]),
        ticks=ticks,
        batches=batches,
        claimed=claimed,
        finishes=finishes,
        commands=commands,
        store_trips=trips(r["store_port"]),
        broker_trips=trips(r["broker_port"]),
        cpu=after["cpu"] - before["cpu"],
        store_cpu=after["store_cpu"] - before["store_cpu"],
        broker_cpu=after["broker_cpu"] - before["broker_cpu"],
    )


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    rows = _rows(args, r, deltas(r))
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    if r["profile"]:
        print(r["profile"])
    if args.json:
        args.json.write_text(json.dumps(dict(rows), indent=2) + "\n")


def _rows(args: argparse.Namespace, r: dict[str, Any], d: Deltas) -> list[tuple[str, str]]:
    lateness, per, batches = r["lateness"], d.per, max(d.batches, 1)
    store_commands = sum(d.commands.values())
    rows = [
        (
            "offered",
            f"{args.rate:,} fires/s ({r['entries']:,} entries every "
            f"{args.entries_per_rate} s, batch {args.batch}), loaded in {r['loaded_s']:.1f} s",
        ),
        ("fires/s sustained", f"{d.fires / d.seconds:,.0f} ({d.fires:,} in {d.seconds:.1f} s)"),
        (
            "lateness p50 / p99 / max",
            f"{percentile(lateness, 0.5) or 0.0:.1f} / "
            f"{percentile(lateness, 0.99) or 0.0:.1f} / {max(lateness, default=0):.1f} ms",
        ),
        (
            "ticks / batches / claims",
            f"{d.ticks:,} / {d.batches:,} / {d.claimed:,} "
            f"({d.claimed / batches:.1f} claims per batch)",
        ),
        (
            "store commands per fire",
            f"{store_commands / per:.2f} "
            f"(incl. inside Lua; {d.commands['cmdstat_evalsha'] / per:.3f} EVALSHA per fire)",
        ),
        (
            "store round trips per batch",
            f"{d.store_trips / batches:.2f} ({d.store_trips:,} in all, {d.finishes:,} finishes)",
        ),
        (
            "broker round trips per batch",
            f"{d.broker_trips / batches:.2f} ({d.broker_trips / per:.3f} per fire)",
        ),
        ("beat CPU s per 1,000 fires", f"{d.cpu / per * 1000:.3f} ({d.cpu:.1f} s in all)"),
        (
            "redis CPU s per 1,000 fires",
            f"store {d.store_cpu / per * 1000:.3f}, broker {d.broker_cpu / per * 1000:.3f}",
        ),
    ]
    if r.get("traced") is not None:
        traced, arrived, started, ended = r["traced"]
        rows.append(
            (
                "traced (--receiver)",
                f"{traced:,} of {arrived:,} messages arrived with a traceparent; "
                f"{started:,} spans started, {ended:,} ended",
            )
        )
    top = sorted(((n, c) for n, c in d.commands.items() if c > 0), key=lambda x: -x[1])[:8]
    rows.append(("top store commands", ", ".join(f"{n[8:]} {c / per:.2f}" for n, c in top)))
    return rows
