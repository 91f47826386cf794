"""The independent checker: what should have been sent, what the broker queue got, the verdict.

It trusts nothing the scheduler records in Redis. The expected occurrences come from the
definitions the workload wrote (with the Redis time of every write), computed here with plain
arithmetic for intervals and croniter for cron strings; the deliveries are the messages
popped off the broker queue, with the time they arrived.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from croniter import croniter

from redisbeat import Entry, ScheduleStore
from redisbeat.errors import EntryNotFound
from redisbeat.schedule.ids import occurrence_id
from redisbeat.schedule.kinds import Clocked, Cron, Interval
from redisbeat.schedule.timing import to_ms
from redisbeat.store.keys import DELAYED_MARK

from ..common import QueuePopper, parse_message


@dataclass(frozen=True)
class Version:
    """A definition in force from a write; ``entry`` None means removed."""

    entry: Entry | None
    #: Redis time just before and just after the write.
    written_from_ms: int
    written_to_ms: int


@dataclass(frozen=True)
class Delivery:
    task_id: str
    entry: str
    arrived_ms: int
    expires: str | None


@dataclass
class Timeline:
    """Every version of every entry the workload wrote, in order."""

    versions: dict[str, list[Version]] = field(default_factory=lambda: defaultdict(list))

    def record(self, entry: Entry | None, name: str, before_ms: int, after_ms: int) -> None:
        self.versions[name].append(Version(entry, before_ms, after_ms))


def occurrences(entry: Entry, start_ms: int, end_ms: int) -> Iterator[int]:
    """Due times of ``entry`` in [start_ms, end_ms], from its definition alone."""
    if not entry.enabled:
        return
    s = entry.schedule
    if isinstance(s, Clocked):
        at = to_ms(s.at)
        if start_ms <= at <= end_ms:
            yield at
    elif isinstance(s, Interval):
        assert entry.start_at is not None, "the chaos workload anchors every interval"
        anchor, every = to_ms(entry.start_at), round(s.every * 1000)
        k = max(0, math.ceil((start_ms - anchor) / every))
        while (due := anchor + k * every) <= end_ms:
            yield due
            k += 1
    elif isinstance(s, Cron):
        start = datetime.fromtimestamp((start_ms - 1) / 1000, timezone.utc)
        it = croniter(s.expr, start.astimezone(_zone(s.tz)), second_at_beginning=True)
        while (due := round(it.get_next(float) * 1000)) <= end_ms:
            yield due
    else:
        raise TypeError(f"the checker does not model {type(s).__name__} schedules")


def _zone(name: str | None) -> Any:
    from zoneinfo import ZoneInfo

    return ZoneInfo(name or "UTC")


class QueueReader(QueuePopper):
    """The broker queue popped as messages arrive, decoded into deliveries."""

    def __init__(self, url: str, queue: str = "celery", forward_to: str | None = None) -> None:
        super().__init__(url, queue, forward_to)
        self._decoded: list[Delivery] = []
        self._read = 0

    def snapshot(self) -> list[Delivery]:
        """Everything popped so far that a scenario's entry sent."""
        have = len(self.raw)  # appended by one thread only: a prefix is always complete
        fresh = self.raw[self._read : have]
        self._read = have
        self._decoded += [d for at, raw in fresh if (d := decode(raw, at)) is not None]
        return list(self._decoded)

    def stop(self) -> list[Delivery]:
        """Stop once the queue is empty; everything popped."""
        self.stop_popping()
        return self.snapshot()


def decode(raw: bytes, arrived_ms: int) -> Delivery | None:
    """The task id from a message's headers, the entry from its body; None for a message no
    scenario entry sent (the beats' app schedules Celery's celery.backend_cleanup daily at
    04:00, which a run that crosses that hour sees)."""
    headers, kwargs = parse_message(raw)
    if "entry" not in kwargs:
        return None
    return Delivery(headers["id"], kwargs["entry"], arrived_ms, headers.get("expires"))


@dataclass
class Verdict:
    """The checker's table row for one scenario."""

    scenario: str
    entries: int
    faults: int
    due: int
    delivered: int
    coalesced: int
    missed: int
    repeated_same_id: int
    repeated_other_id: int
    bad_expiry: int
    early_ms: int
    late_p50_ms: int
    late_p99_ms: int
    late_max_ms: int
    #: The largest lateness less a lease for each fault after the first that began while
    #: its occurrence waited (from a lease before it was due until it arrived): a takeover
    #: caught by the next fault before it sent waits out a second lease.
    late_after_faults_ms: int = 0
    #: Entries whose last acknowledged write the store lost (the rest is not judged for them).
    writes_lost: int = 0
    #: With a worker (the hook on), by the task's own count: the task ids delivered that
    #: ran, the extra runs of any that ran more than once, and those that never ran (bar
    #: messages with an ``expires``, which Celery may drop as expired). None: no worker.
    worker_ran: int | None = None
    worker_ran_twice: int = 0
    worker_not_run: int = 0
    missed_examples: list[str] = field(default_factory=list)
    other_id_examples: list[str] = field(default_factory=list)
    #: Occurrences sent more than once: entry@due and the arrival of each copy (ms).
    repeat_examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def judge(
    scenario: str,
    prefix: str,
    timeline: Timeline,
    deliveries: Iterable[Delivery],
    *,
    window: tuple[int, int],
    slack_ms: int,
    faults: int = 0,
    ignore: frozenset[str] = frozenset(),
    outages: Sequence[tuple[int, int]] = (),
    claim_ahead_ms: int = 0,
    fault_starts: Sequence[int] = (),
    lease_ms: int = 0,
) -> Verdict:
    """Compare what was due in ``window`` (Redis ms) with what arrived.

    An occurrence is *covered* when it was delivered, or when it fell due during one of the
    ``outages`` (a fault, widened by a lease either side) and a later occurrence of the same
    entry was delivered: a late claim sends the last occurrence due and coalesces the ones
    before it. Anywhere else, a skipped occurrence is missed. Each fault in ``fault_starts``
    (ms) after the first that began while an occurrence waited may add a ``lease_ms`` to
    its lateness (``late_after_faults_ms`` takes it off). Around
    every write (``slack_ms`` either side) an occurrence may or may not be sent. A delivery
    whose task id is no occurrence of its entry is a repeat under another id (or an
    occurrence invented out of thin air): always a defect. A beat claims up to
    ``claim_ahead_ms`` before an occurrence is due, and the claim decides it: a version's
    occurrences due that soon after the write that replaced it may still be sent.
    """
    start, end = window
    deliveries = sorted(
        (d for d in deliveries if d.entry not in ignore), key=lambda d: d.arrived_ms
    )
    # Occurrences due after the window may have been sent before the beats stopped.
    horizon = max([end, *(d.arrived_ms for d in deliveries[-1:])])
    required: dict[str, dict[str, int]] = defaultdict(dict)  # entry -> task id -> due
    allowed: dict[str, dict[str, int]] = defaultdict(dict)
    expires_of: dict[str, float] = {}
    for name, versions in timeline.versions.items():
        if name in ignore:
            continue
        for i, version in enumerate(versions):
            if version.entry is None:
                continue
            until = (
                versions[i + 1].written_to_ms + claim_ahead_ms if i + 1 < len(versions) else horizon
            )
            # A new entry starts in the future; around an edit either version may fire.
            fuzzy_to = version.written_to_ms + (slack_ms if i else 0)
            next_from = versions[i + 1].written_from_ms - slack_ms if i + 1 < len(versions) else end
            expires = version.entry.options.get("expires")
            for due in occurrences(version.entry, version.written_from_ms, until):
                task_id = occurrence_id(prefix, name, due)
                allowed[name][task_id] = due
                if isinstance(expires, (int, float)):
                    expires_of[task_id] = float(expires)
                if start <= due <= end and fuzzy_to < due <= next_from:
                    required[name][task_id] = due

    copies: Counter[str] = Counter()
    arrivals: dict[str, list[int]] = defaultdict(list)
    first: dict[str, Delivery] = {}
    other: list[Delivery] = []
    bad_expiry = 0
    for d in deliveries:
        if d.task_id not in allowed.get(d.entry, {}):
            other.append(d)
            continue
        copies[d.task_id] += 1
        arrivals[d.task_id].append(d.arrived_ms)
        first.setdefault(d.task_id, d)
        due = allowed[d.entry][d.task_id]
        if d.task_id in expires_of and not _expiry_ok(d, expires_of[d.task_id], due):
            bad_expiry += 1

    lateness: list[int] = []
    early = 0
    after_faults = 0
    for task_id, d in first.items():
        due = allowed[d.entry][task_id]
        lateness.append(d.arrived_ms - due)
        early = min(early, d.arrived_ms - due)
        waited_through = sum(due - lease_ms <= s <= d.arrived_ms for s in fault_starts)
        after_faults = max(after_faults, d.arrived_ms - due - lease_ms * max(0, waited_through - 1))
    sent_by_entry: dict[str, list[tuple[int, int]]] = defaultdict(list)  # (due, arrived)
    for task_id, d in first.items():
        sent_by_entry[d.entry].append((allowed[d.entry][task_id], d.arrived_ms))

    due_count = coalesced = 0
    missed: list[str] = []
    for name, wanted in required.items():
        sends = sent_by_entry.get(name, [])
        for task_id, due in wanted.items():
            due_count += 1
            if task_id in first:
                continue
            if any(a <= due <= b for a, b in outages) and any(due < s for s, _ in sends):
                coalesced += 1
            else:
                missed.append(f"{name}@{due}")
    lateness.sort()
    required_ids = {task_id for wanted in required.values() for task_id in wanted}
    return Verdict(
        scenario=scenario,
        entries=len(timeline.versions),
        writes_lost=len(ignore),
        faults=faults,
        due=due_count,
        delivered=len(required_ids & first.keys()),
        coalesced=coalesced,
        missed=len(missed),
        repeated_same_id=sum(n - 1 for n in copies.values()),
        repeated_other_id=len(other),
        bad_expiry=bad_expiry,
        early_ms=early,
        late_p50_ms=_percentile(lateness, 0.50),
        late_p99_ms=_percentile(lateness, 0.99),
        late_max_ms=lateness[-1] if lateness else 0,
        late_after_faults_ms=after_faults,
        missed_examples=sorted(missed)[:10],
        other_id_examples=[f"{d.entry}:{d.task_id}@{d.arrived_ms}" for d in other[:10]],
        repeat_examples=[
            f"{first[i].entry}@{allowed[first[i].entry][i]} arrived {arrivals[i]}"
            for i, n in copies.items()
            if n > 1
        ][:10],
    )


def lost_writes(store: ScheduleStore, timeline: Timeline) -> set[str]:
    """Entries whose last acknowledged write is not what the store holds now."""
    lost = set()
    for name, versions in timeline.versions.items():
        if name.startswith(DELAYED_MARK):
            continue  # a delayed task is no entry; its sends are what is judged
        want = versions[-1].entry
        try:
            have: Entry | None = store.get(name)
        except EntryNotFound:
            have = None
        if want is None or have is None:
            if (want is None) != (have is None):
                lost.add(name)
        elif want.one_off:
            continue  # a one-off leaves the schedule once sent; its definition stays as written
        elif (have.schedule, have.start_at, have.enabled) != (
            want.schedule,
            want.start_at,
            want.enabled,
        ):
            lost.add(name)
    return lost


def _expiry_ok(d: Delivery, seconds: float, due: int) -> bool:
    """The message expires ``seconds`` after the beat sent it, by the clock every host shares:
    a moment between its due time and its arrival (a broker that held the message up makes
    it arrive later, not expire later), give or take the checker's own delays."""
    if d.expires is None:
        return False
    sent_at = to_ms(datetime.fromisoformat(d.expires)) - int(seconds * 1000)
    return min(due, d.arrived_ms) - 3000 <= sent_at <= d.arrived_ms + 1000


def _percentile(values: list[int], q: float) -> int:
    if not values:
        return 0
    return values[min(len(values) - 1, math.ceil(q * len(values)) - 1)]
