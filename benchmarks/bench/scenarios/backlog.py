"""The backlog scenario: every beat stopped for ten minutes, then started on what fell due
meanwhile: delayed tasks by the hundred thousand, and periodic entries ten occurrences
behind each. How long the beats take to drain it and at what rate, and whether each delayed
task went out exactly once and each periodic entry once for all it missed (catch_up "once",
the default)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from itertools import islice
from typing import Any

from ..adapters import RedisbeatAdapter, Spec
from ..harness import BeatProcess, Rig
from ..judging import Arrival, judge
from .delayed import ONCE_S, load_delayed
from .measure import fresh
from .profiles import REDISBEAT, Profile, Table

OUTAGE_MS = 600_000
#: The periodic entries' period: ten occurrences of each fall due during the outage.
EVERY_S = 60
BEATS = 2
#: After the backlog's last message, how long a late double may still arrive.
SETTLE_S = 2.0
COLUMNS = [
    "beats",
    "delayed",
    "periodic",
    "drain s",
    "drain/s",
    "peak/s",
    "vs peak",
    "delayed missed",
    "delayed doubled",
    "periodic coalesced",
    "periodic sent more than once",
    "periodic unsent",
    "beat peak RSS MiB",
    "log lines",
]


def backlog(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    minutes = OUTAGE_MS // 60_000
    table = Table(
        "backlog",
        f"Backlog: every beat stopped for {minutes} minutes, then {BEATS} started",
        COLUMNS,
        axes=("seconds since the backlog's first message", "messages per second"),
    )
    if REDISBEAT not in schedulers:
        return table
    adapter = fresh(rig, REDISBEAT)
    assert isinstance(adapter, RedisbeatAdapter) and adapter.shards == 1
    stopped = adapter._store().now_ms() - OUTAGE_MS
    delayed = _spread("b", profile.backlog_delayed, ONCE_S, stopped, OUTAGE_MS)
    load_delayed(adapter._store(), ((s.name, s.anchor_ms) for s in delayed))
    periodic = _spread("p", profile.backlog_periodic, EVERY_S, stopped, EVERY_S * 1000)
    _left_by_the_outage(adapter, periodic)
    procs = rig.start_beats(adapter, BEATS)
    got = _drained(rig, procs, [*delayed, *periodic])
    rss = max((p.peak_rss_bytes() for p in procs if p.alive()), default=0)
    lines = sum(p.loud_lines() for p in procs)
    rig.stop_beats()
    assert rig.sink is not None
    rig.sink.idle_for(0.3, 10)
    got += rig.sink.arrivals(len(got))
    started = min(p.started_ms for p in procs)
    row: dict[str, Any] = {"beats": BEATS, "delayed": len(delayed), "periodic": len(periodic)}
    row |= _drain(got, delayed, periodic, started, table.series.setdefault("drain", []))
    fires = judge(delayed, got, (stopped, stopped + OUTAGE_MS))
    row |= {"delayed missed": fires.missed, "delayed doubled": fires.doubles}
    row |= _coalesced(got, periodic, started)
    row |= {"beat peak RSS MiB": round(rss / 2**20, 1), "log lines": lines}
    table.rows.append(row)
    adapter.clear()
    table.notes.append(_how(minutes))
    return table


def _spread(prefix: str, count: int, every: float, first_ms: int, span_ms: int) -> list[Spec]:
    """``count`` specs whose first occurrences are spread evenly over ``span_ms``."""
    return [Spec(f"{prefix}{i:07d}", every, first_ms + i * span_ms // count) for i in range(count)]


def _left_by_the_outage(adapter: RedisbeatAdapter, specs: list[Spec]) -> None:
    """Store the periodic entries, each due at its first occurrence after the stop: what
    the stop leaves in the schedule. The API schedules a written entry from now (its next
    occurrence on the grid), so the due times are then set in the schedule's sorted set, as
    the suite's own tests do."""
    adapter.load(specs)
    store = adapter._store()
    it = iter(specs)
    while chunk := list(islice(it, 10_000)):
        store.client.zadd(store.keys.schedule, {s.name: s.anchor_ms for s in chunk}, xx=True)


def _drained(rig: Rig, procs: list[BeatProcess], specs: list[Spec]) -> list[Arrival]:
    """What arrived until every spec had a message (or the beats died, or a generous
    timeout passed), and ``SETTLE_S`` after."""
    assert rig.sink is not None
    waiting = {s.name for s in specs}
    got: list[Arrival] = []
    deadline = time.monotonic() + 60 + len(specs) / 1000
    while waiting and time.monotonic() < deadline and any(p.alive() for p in procs):
        time.sleep(0.2)
        new = rig.sink.arrivals(len(got))
        got += new
        waiting.difference_update(a.entry for a in new)
    time.sleep(SETTLE_S)
    return got


def _drain(
    got: list[Arrival],
    delayed: list[Spec],
    periodic: list[Spec],
    started_ms: int,
    series: list[tuple[float, float]],
) -> dict[str, Any]:
    """The backlog (every delayed task's message, each periodic entry's first): from the
    beats' start to its last message, its mean rate from first to last message, and its
    best whole second; each whole second's count is appended to ``series``."""
    names = {s.name for s in delayed}
    at = [a.arrived_ms for a in got if a.entry in names]
    at += [a[0].arrived_ms for a in _by_entry(got, periodic).values() if a]
    if not at:
        return {}
    first, last = min(at), max(at)
    rate = len(at) / max(0.001, (last - first) / 1000)
    whole = (last - first) // 1000  # seconds the last, partial one is not among
    per_second = Counter((t - first) // 1000 for t in at if (t - first) // 1000 < whole)
    peak = max(per_second.values(), default=rate)
    series.extend((float(second), float(per_second[second])) for second in range(whole))
    return {
        "drain s": round((last - started_ms) / 1000, 1),
        "drain/s": round(rate),
        "peak/s": round(peak),
        "vs peak": round(rate / peak, 2) if peak else None,
    }


def _by_entry(got: list[Arrival], specs: list[Spec]) -> dict[str, list[Arrival]]:
    """Each spec's messages, in order of arrival."""
    out: dict[str, list[Arrival]] = defaultdict(list)
    names = {s.name for s in specs}
    for a in sorted(got, key=lambda a: a.arrived_ms):
        if a.entry in names:
            out[a.entry].append(a)
    return out


def _coalesced(got: list[Arrival], periodic: list[Spec], started_ms: int) -> dict[str, int]:
    """Per periodic entry, its messages' due times (``redisbeat_due``). Coalesced: at most
    one for an occurrence due before the beats started, and that one the latest of them
    (none when the send stands for an occurrence due between the start and its claim),
    and no occurrence sent twice. Sent more than once: more than one before the start, or
    one occurrence twice."""
    by_entry = _by_entry(got, periodic)
    once = more = unsent = 0
    for spec in periodic:
        dues = sorted(a.due_header for a in by_entry.get(spec.name, []) if a.due_header is not None)
        if not dues:
            unsent += 1
            continue
        every = spec.every_ms
        latest = spec.anchor_ms + (started_ms - 1 - spec.anchor_ms) // every * every
        before = [due for due in dues if due <= latest]
        if len(before) > 1 or len(set(dues)) < len(dues):
            more += 1
        elif before in ([latest], []):
            once += 1
    return {
        "periodic coalesced": once,
        "periodic sent more than once": more,
        "periodic unsent": unsent,
    }


def _how(minutes: int) -> str:
    return (
        f"What {minutes} minutes without a beat leave, written before the beats start: "
        "delayed tasks stored with `delay_many`, due times spread evenly over the "
        f"{minutes} minutes before the load (the API takes a past due time as it is); "
        f'periodic entries every {EVERY_S} s (catch_up "once", the default) stored with '
        "`upsert_many` on a grid from the stop, then each due at its first occurrence after "
        "the stop (set in the schedule's sorted set with ZADD XX, since the API schedules a "
        "written entry from now, as the suite's tests do), no run state, as entries never "
        "sent before. Drain: from starting the beat processes to the backlog's last message "
        "(each delayed task's, each periodic entry's first); drain/s from its first message "
        "to its last; peak/s its best whole second. Missed and doubled: delayed tasks with "
        "no message or more than one. Coalesced: periodic entries that sent one message "
        "for all their missed occurrences, standing for the latest (or for one due between "
        "the start and its claim), and no occurrence twice. RSS is each beat's peak "
        "(VmHWM), the larger; log lines are the beats' at WARNING and above."
    )
