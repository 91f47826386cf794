"""The chaos workload: thousands of 1-5 s entries and one-offs, and live edits during the run;
for some scenarios, delayed one-off tasks too, rescheduled and cancelled as the run goes.

Every write goes through the public store API, and every version is put on the checker's
timeline with the Redis time before and after the write. A delayed task is on the timeline
as a one-off under the name its sends' task ids are derived from (its key after
:data:`~redisbeat.store.keys.DELAYED_MARK`); its message's ``entry`` argument says that name.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import redis

from redisbeat import Entry, ScheduleStore
from redisbeat.schedule.kinds import Clocked, Cron, Interval
from redisbeat.schedule.timing import from_ms
from redisbeat.store.keys import DELAYED_MARK

from .checker import Timeline

log = logging.getLogger(__name__)
T = TypeVar("T")

TASK = "proj.ping"
#: Zones for the cron entries: a second-resolution cron must not care about the zone's offset.
ZONES = ("UTC", "Asia/Kathmandu", "America/New_York", "Australia/Lord_Howe")


#: The first entries' names start so, and no edit touches them: a beat frozen after sending
#: one of them (the kill -9 scenario) is known to leave a claim that must be sent again.
STEADY = "chaos-0000"


class Workload:
    """Builds the entries, writes them and edits them, recording every version."""

    def __init__(self, store: ScheduleStore, timeline: Timeline, rng: random.Random) -> None:
        self.store = store
        self.timeline = timeline
        self.rng = rng
        self.live: dict[str, Entry] = {}
        self.disabled: set[str] = set()
        #: Delayed tasks still pending, as far as the workload knows: key -> due ms.
        self.delayed: dict[str, int] = {}
        self.edits = 0
        self._serial = 0

    # -- building -----------------------------------------------------------------------------

    def _name(self) -> str:
        self._serial += 1
        return f"chaos-{self._serial:06d}"

    def periodic(self, first_ms: int) -> Entry:
        """A 1-5 s interval (anchored) or seconds-field cron entry, first due near first_ms."""
        name = self._name()
        every = self.rng.randint(1, 5)
        options = {"expires": 30} if self.rng.random() < 0.1 else {}
        if self.rng.random() < 0.6:
            anchor = first_ms + self.rng.randrange(every * 1000)
            schedule: Interval | Cron = Interval(every)
            start_at = from_ms(anchor)
        else:
            schedule = Cron(f"*/{every} * * * * *", tz=self.rng.choice(ZONES))
            start_at = None
        return Entry(
            name, TASK, schedule, kwargs={"entry": name}, options=options, start_at=start_at
        )

    def one_off(self, at_ms: int) -> Entry:
        name = self._name()
        return Entry(name, TASK, Clocked(from_ms(at_ms)), kwargs={"entry": name}, one_off=True)

    # -- writing ------------------------------------------------------------------------------

    def load(self, count: int, one_offs: int, first_ms: int, last_one_off_ms: int) -> None:
        entries = [self.periodic(first_ms) for _ in range(count)]
        span = max(1, last_one_off_ms - first_ms)
        entries += [self.one_off(first_ms + self.rng.randrange(span)) for _ in range(one_offs)]
        before = self.store.now_ms()
        self.store.upsert_many(entries)
        after = self.store.now_ms()
        for entry in entries:
            self.timeline.record(entry, entry.name, before, after)
            if not entry.one_off:
                self.live[entry.name] = entry

    def load_delayed(self, count: int, first_ms: int, last_ms: int) -> None:
        """``count`` delayed tasks due at random moments from ``first_ms`` to ``last_ms``."""
        span = max(1, last_ms - first_ms)
        dues = {f"task-{i:06d}": first_ms + self.rng.randrange(span) for i in range(count)}
        before = self.store.now_ms()
        self.store.delay_many(
            {"task": TASK, "key": key, "kwargs": {"entry": DELAYED_MARK + key}, "eta": from_ms(due)}
            for key, due in dues.items()
        )
        after = self.store.now_ms()
        for key, due in dues.items():
            self.timeline.record(_delayed(key, due), DELAYED_MARK + key, before, after)
        self.delayed.update(dues)

    def edit(self) -> None:
        """One random live edit: add, remove, change the period, disable or enable; with
        delayed tasks pending, now and then a reschedule or a cancel of one."""
        if self.delayed and self.rng.random() < 0.3:
            self._edit_delayed(self.rng.choice(sorted(self.delayed)))
            return
        kind = self.rng.choice(["add", "remove", "period", "disable", "enable"])
        if kind == "enable" and not self.disabled:
            kind = "disable"
        candidates = sorted(n for n in set(self.live) - self.disabled if not n.startswith(STEADY))
        name = self.rng.choice(candidates) if kind in ("remove", "period", "disable") else ""
        if kind == "add":
            self._write(self.periodic(self._soon()), "upsert")
        elif kind == "remove":
            self._write(None, "remove", name)
        elif kind == "period":
            self._write(self._new_period(self.live[name]), "upsert")
        elif kind == "disable":
            self._write(replace(self.live[name], enabled=False), "disable", name)
        else:
            name = self.rng.choice(sorted(self.disabled))
            self._write(replace(self.live[name], enabled=True), "enable", name)
        self.edits += 1

    def _edit_delayed(self, key: str) -> None:
        """Reschedule the task a few seconds on, or cancel it; a change that comes too late
        (a beat is sending it) leaves it as it was."""
        before = self._retrying(self.store.now_ms)
        if self.rng.random() < 0.5:
            if self._retrying(lambda: self.store.cancel(key)):
                after = self._retrying(self.store.now_ms)
                self.timeline.record(None, DELAYED_MARK + key, before, after)
            self.delayed.pop(key)
        else:
            # Past the checker's slack around the write, so that its send is required.
            due = self._soon() + 8000 + self.rng.randrange(4000)
            moved = self._retrying(lambda: self.store.reschedule(key, eta=from_ms(due)))
            if moved is not None:
                after = self._retrying(self.store.now_ms)
                self.timeline.record(_delayed(key, due), DELAYED_MARK + key, before, after)
                self.delayed[key] = due
            else:
                self.delayed.pop(key)
        self.edits += 1

    def _soon(self) -> int:
        return (self._retrying(self.store.now_ms) // 1000 + 2) * 1000

    def _new_period(self, entry: Entry) -> Entry:
        every = self.rng.choice([n for n in range(1, 6) if n != _period(entry)])
        if isinstance(entry.schedule, Interval):
            anchor = self._soon() + self.rng.randrange(every * 1000)
            return replace(entry, schedule=Interval(every), start_at=from_ms(anchor))
        assert isinstance(entry.schedule, Cron)
        return replace(entry, schedule=Cron(f"*/{every} * * * * *", tz=entry.schedule.tz))

    def _write(self, entry: Entry | None, how: str, name: str = "") -> None:
        name = entry.name if entry is not None else name
        before = self._retrying(self.store.now_ms)

        def write() -> None:
            if how == "upsert" and entry is not None:
                self.store.upsert(entry)
            elif how == "remove":
                self.store.remove(name)
            elif how == "disable":
                self.store.disable(name)
            else:
                self.store.enable(name)

        self._retrying(write)
        after = self._retrying(self.store.now_ms)
        self.timeline.record(entry, name, before, after)
        if entry is None:
            self.live.pop(name, None)
            self.disabled.discard(name)
        else:
            self.live[name] = entry
            (self.disabled.discard if entry.enabled else self.disabled.add)(name)

    @staticmethod
    def _retrying(call: Callable[[], T]) -> T:
        """Call until Redis answers: the store may be restarting or failing over under us, and
        the same write again is harmless."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return call()
            except (redis.RedisError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise
                log.debug("workload call failed (%s); retrying", exc)
                time.sleep(0.2)


def _period(entry: Entry) -> int:
    s = entry.schedule
    if isinstance(s, Interval):
        return round(s.every)
    assert isinstance(s, Cron)
    return int(s.expr.split()[0].removeprefix("*/"))


def _delayed(key: str, due_ms: int) -> Entry:
    """A delayed task as the checker models it: a one-off due once, at ``due_ms``."""
    return Entry(f"delayed-{key}", TASK, Clocked(from_ms(due_ms)), one_off=True)
