"""The numbers: what arrived for a set of entries over a window, matched against what was due.

An :class:`Arrival` is one message as the sink popped it; :func:`judge` matches arrivals to
their entries' occurrences, which come from the definitions
(:class:`~benchmarks.bench.adapters.Spec`), never from a scheduler's bookkeeping.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..common import percentile
from .adapters import Spec


@dataclass(frozen=True)
class Arrival:
    """One message popped off the broker queue."""

    arrived_ms: int
    entry: str
    task_id: str
    #: The ``redisbeat_due`` header, when the scheduler sends one.
    due_header: int | None


@dataclass
class Fires:
    """What arrived for a set of entries over a window, against what was due."""

    window_ms: tuple[int, int]
    due: int = 0
    #: Messages that arrived inside the window.
    arrived_in_window: int = 0
    delivered: int = 0
    missed: int = 0
    doubles: int = 0
    #: Sends whose redisbeat_due header is not an occurrence of their entry.
    off_grid: int = 0
    lateness_ms: list[int] = field(default_factory=list)
    #: Per entry: mean observed period / nominal period, from the window's start on.
    drift: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return (self.window_ms[1] - self.window_ms[0]) / 1000

    @property
    def fires_per_s(self) -> float:
        return self.arrived_in_window / self.seconds if self.seconds else 0.0

    def late(self, q: float) -> float | None:
        return percentile(self.lateness_ms, q)

    @property
    def drift_ratio(self) -> float | None:
        """None when no entry arrived twice inside the window."""
        return statistics.fmean(self.drift) if self.drift else None


def judge(specs: Sequence[Spec], arrivals: Iterable[Arrival], window: tuple[int, int]) -> Fires:
    """Match arrivals to occurrences: the ``redisbeat_due`` header when there is one (checked
    against the grid), otherwise the last grid point at or before the arrival."""
    start, end = window
    by_name = {s.name: s for s in specs}
    fires = Fires(window)
    seen: Counter[tuple[str, int]] = Counter()
    times: dict[str, list[int]] = defaultdict(list)
    for a in sorted(arrivals, key=lambda a: a.arrived_ms):
        spec = by_name.get(a.entry)
        if spec is None:
            continue
        if a.arrived_ms >= start:  # past the warm-up, which start-up may have delayed
            times[a.entry].append(a.arrived_ms)
        if start <= a.arrived_ms < end:
            fires.arrived_in_window += 1
        due = due_of(spec, a)
        if (due - spec.anchor_ms) % spec.every_ms:
            fires.off_grid += 1
            continue
        if not start <= due < end:
            continue
        seen[(a.entry, due)] += 1
        if seen[(a.entry, due)] == 1:
            fires.lateness_ms.append(a.arrived_ms - due)
    for spec in specs:
        every = spec.every_ms
        first = spec.anchor_ms + max(0, -(-(start - spec.anchor_ms) // every)) * every
        for due in range(first, end, every):
            fires.due += 1
            if seen[(spec.name, due)]:
                fires.delivered += 1
            else:
                fires.missed += 1
    fires.doubles = sum(n - 1 for n in seen.values() if n > 1)
    for name, at in times.items():
        if len(at) >= 2:
            at.sort()
            fires.drift.append((at[-1] - at[0]) / (len(at) - 1) / by_name[name].every_ms)
    return fires


def due_of(spec: Spec, arrival: Arrival) -> int:
    """The occurrence a message is for: its ``redisbeat_due`` header, or else the entry's grid
    point at or before its arrival."""
    if arrival.due_header is not None:
        return arrival.due_header
    every = spec.every_ms
    return spec.anchor_ms + (arrival.arrived_ms - spec.anchor_ms) // every * every


def rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
