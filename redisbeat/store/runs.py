"""What became of what the beats sent: runs on workers (the worker hook) and each entry's
history.

A worker with the hook (:mod:`redisbeat.worker`) marks an entry as running when a task
redisbeat sent starts and records the outcome when it ends, one script call each. The
beats read the markers for entries whose ``overlap`` is not ``"allow"``. The history is a
list per entry, newest first: the finish pushes each send (and skip, failure or missed
occurrences), the worker each run's outcome; :meth:`RunCalls.history` joins them by task id.
A run a worker could not start (its task not registered there, its message refused) is an
outcome too, and is counted by task in each shard, for the beats' metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .base import StoreBase
from .errors import LayoutChanged, translated
from .history import Run, join_history, json_record, ms_of, time_of
from .receipts import Delivery, sent_shard
from .records import text, wire
from .run_state import NOT_STARTED
from .runner import Call, Script
from .shards import Layout

TRACK = Script.named("track", "seen")
#: What a run's end says of it (Celery's states, as a worker hook reports them), or that
#: the worker could not start it (:data:`~.run_state.NOT_STARTED`).
OUTCOMES = ("succeeded", "failed", "retried", "revoked", *NOT_STARTED)


@dataclass(frozen=True)
class NotStarted:
    """A run a worker could not start, as the worker hook records it."""

    #: One of :data:`~.run_state.NOT_STARTED`.
    outcome: str
    #: The task's name, as the message gives it.
    task: str
    #: The type name of the exception the worker raised (None: none that says more).
    exception: str | None
    #: Why, in words, and what fixes it.
    detail: str

    @property
    def counted_as(self) -> str:
        """Its field in a shard's count (:attr:`~.keys.Keys.not_started`)."""
        return f"{self.outcome}:{self.task}"


@dataclass(frozen=True)
class Running:
    """A run going on on a worker now, as its worker marked it."""

    task_id: str
    due: datetime | None
    worker: str
    started: datetime | None
    #: When it stops counting as running if its worker never says it ended (ms).
    until_ms: int


class RunCalls(StoreBase):
    """The worker hook's writes, and the reads of runs and histories."""

    def _track(
        self, op: str, name: str, run: dict[str, Any], number: int, retries: int, count: str = ""
    ) -> Any:
        """Run track.lua where the entry lives now: a reshard since the layout was read makes
        the script refuse, and the layout is read again. While a reshard runs, an entry not
        yet moved is written in its old shard (the reshard then carries what was written),
        one that has moved in its new shard."""
        mark = str(run["task_id"]), retries
        args = [op, wire(name), json.dumps(run), number, self.keys.events, self.mark_ms(op)]
        args.append(wire(count))

        def write(layout: Layout) -> Any:
            index = self.located([name])[name]
            old = index != layout.home(name)
            reply = self._track_in(index, mark, args, layout, old)
            if reply == -4:  # it left its old shard since it was looked for: its new one
                reply = self._track_in(layout.home(name), mark, args, layout, False)
            if reply in (-2, -3):  # the layout changed, or the entry is on its way
                raise LayoutChanged()
            return reply

        return self._with_layout(write)

    def _track_in(
        self, index: int, mark: tuple[str, int], args: list[Any], layout: Layout, old: bool
    ) -> Any:
        k = self.shard_scripts[index].keys
        name = text(args[1])
        keys: list[str | bytes] = [k.running, k.state, wire(k.history(name)), k.schedule]
        keys += [k.inflight, wire(k.seen(*mark)), k.not_started, k.entries]
        keys += [k.shard_layout, k.moving]
        believed = [layout.spelled, "1" if old else ""]
        return self.runner.run(Call(TRACK, keys, [*args, *believed]), "lenient")

    @translated
    def run_started(
        self, name: str, task_id: str, due_ms: int | None, worker: str, retries: int = 0
    ) -> None:
        """Mark the entry as running this task (until it ends, or ``run_expiry`` passes),
        and this try of the task id as started (``retries``: the tries before it)."""
        run: dict[str, Any] = {"task_id": task_id, "due": due_ms, "worker": worker}
        if retries:
            run["retries"] = retries
        self._track("start", name, run, self.run_expiry_ms, retries)

    @translated
    def run_ended(
        self,
        name: str,
        task_id: str,
        due_ms: int | None,
        worker: str,
        outcome: str,
        exception: str | None = None,
        retries: int = 0,
    ) -> None:
        """Record how the run of ``task_id`` ended (one of :data:`OUTCOMES`)."""
        run = {"task_id": task_id, "due": due_ms, "worker": worker, "outcome": outcome}
        if exception:
            run["exception"] = exception
        if retries:
            run["retries"] = retries
        self._track("end", name, run, self.history_size, retries)

    @translated
    def run_not_started(self, d: Delivery, what: NotStarted) -> None:
        """Record a run a worker could not start: for an entry, its outcome (run state and
        history) and, for either lane, one more in its shard's count of such runs (a delayed
        task's try is marked ended with :meth:`mark_run`)."""
        if d.lane == "delayed":
            self._count_delayed(d, what)
            return
        run = {"task_id": d.task_id, "due": d.due_ms, "worker": d.worker}
        run.update(outcome=what.outcome, task=what.task, detail=what.detail)
        if what.exception:
            run["exception"] = what.exception
        self._track("end", d.name, run, self.history_size, d.retries, what.counted_as)

    def _count_delayed(self, d: Delivery, what: NotStarted) -> None:
        """Count a delayed task's run the worker could not start, in the shard its marks
        are in (:func:`~.receipts.sent_shard`), the layout checked as track.lua checks it."""
        mark = d.task_id, d.retries
        args = ["count", wire(d.name), "{}", 0, self.keys.events, 0, wire(what.counted_as)]

        def count(layout: Layout) -> Any:
            reply = self._track_in(sent_shard(layout, d.name), mark, args, layout, False)
            if reply == -2:
                raise LayoutChanged()
            return reply

        self._with_layout(count)

    @translated
    def not_started(self) -> dict[tuple[str, str], int]:
        """Runs the workers could not start, in all, by outcome and task: every shard's
        count, in one round trip (a hash of a few fields each)."""
        pipe = self.client.pipeline(transaction=False)
        for shard in self.all_shards():
            pipe.hgetall(shard.keys.not_started)
        found: dict[tuple[str, str], int] = {}
        for counts in pipe.execute():
            for field, value in counts.items():
                outcome, _, task = text(field).partition(":")
                if task and text(value).isdigit():
                    found[outcome, task] = found.get((outcome, task), 0) + int(value)
        return found

    @translated
    def mark_sending(self, name: str, task_id: str, due_ms: int, now_ms: int) -> None:
        """Mark the entry as running ``task_id`` from its send on (a beat, before sending an
        entry with an overlap policy): a run still queued holds the next occurrence back too.
        The worker's start and end replace and clear it."""
        marker = {"task_id": task_id, "due": due_ms, "worker": "", "queued": True}
        marker["until"] = now_ms + self.run_expiry_ms
        self.client.hset(self.shard(name).keys.running, wire(name), json.dumps(marker))

    @translated
    def unmark_sending(self, name: str, task_id: str) -> None:
        """Take back :meth:`mark_sending`'s marker: the message was not sent after all."""
        key = self.shard(name).keys.running
        marker = json_record(self.client.hget(key, wire(name)))
        if marker is not None and marker.get("task_id") == task_id and marker.get("queued"):
            self.client.hdel(key, wire(name))

    @translated
    def running(self, names: Iterable[str], now_ms: int) -> dict[str, Running]:
        """Of ``names``, those a worker runs now (their marker not past its ``until``)."""
        found: dict[str, Running] = {}
        by_shard: dict[int, list[str]] = {}
        for name, index in self.located(list(names)).items():
            by_shard.setdefault(index, []).append(name)
        for index, group in by_shard.items():
            key = self.shard_scripts[index].keys.running
            raws = self.client.hmget(key, [wire(n) for n in group])
            for name, raw in zip(group, raws, strict=True):
                marker = json_record(raw)
                if marker is not None and ms_of(marker.get("until"), 0) > now_ms:
                    found[name] = Running(
                        task_id=str(marker.get("task_id", "")),
                        due=time_of(marker.get("due")),
                        worker=str(marker.get("worker", "")),
                        started=time_of(marker.get("started")),
                        until_ms=ms_of(marker.get("until"), 0),
                    )
        return found

    @translated
    def history(self, name: str, limit: int = 20) -> list[Run]:
        """The entry's last ``limit`` occurrences, newest first: each send, skip, failure
        and missed count the beats recorded and, with the worker hook, its run's outcome.
        Empty unless ``redisbeat_history_size`` is set."""
        key = self.shard(name).keys.history(name)
        raw = self.client.lrange(wire(key), 0, 3 * max(self.history_size, limit) - 1)
        return join_history([r for r in map(json_record, raw) if r is not None])[:limit]
