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

from ..schedule.clock import from_ms, valid_ms
from .base import StoreBase
from .errors import translated
from .keys import shard_of
from .receipts import Delivery
from .records import text, wire
from .run_state import NOT_STARTED
from .runner import Call, Script

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


@dataclass(frozen=True)
class Run:
    """One occurrence in an entry's history: how the beats dealt with it and, with the
    worker hook, what became of its run (``outcome`` None: not known, or still running)."""

    task_id: str
    due: datetime | None
    #: ``sent``, ``skipped`` (``reason`` says why), ``failed`` (the message was refused),
    #: ``run`` for a run whose send the history no longer holds, or ``duplicate``: a copy of
    #: the run a worker dropped (``reason`` says how far the first got, and where).
    result: str
    sent_at: datetime | None = None
    beat: str = ""
    reason: str = ""
    #: Occurrences missed (not sent within their grace) just before this one.
    missed: int = 0
    outcome: str | None = None
    exception: str | None = None
    started: datetime | None = None
    ended: datetime | None = None
    #: Seconds from the run's start to its end, by the Redis clock.
    runtime: float | None = None
    worker: str = ""
    #: For a run the worker could not start: why, in words, and what fixes it.
    detail: str | None = None

    @property
    def late(self) -> float | None:
        """Seconds from the due time to the send."""
        if self.due is None or self.sent_at is None:
            return None
        return (self.sent_at - self.due).total_seconds()


class RunCalls(StoreBase):
    """The worker hook's writes, and the reads of runs and histories."""

    def _track(
        self, op: str, name: str, run: dict[str, Any], number: int, retries: int, count: str = ""
    ) -> Any:
        shard = self.shard(name)
        k = shard.keys
        keys: list[str | bytes] = [k.running, k.state, wire(k.history(name)), k.schedule]
        mark = wire(k.seen(str(run["task_id"]), retries))
        keys += [k.inflight, mark, k.not_started, k.entries]
        args = [op, wire(name), json.dumps(run), number, k.events, self.mark_ms(op), wire(count)]
        return self.runner.run(Call(TRACK, keys, args), "lenient")

    @translated
    def run_started(
        self, name: str, task_id: str, due_ms: int | None, worker: str, retries: int = 0
    ) -> None:
        """Mark the entry as running this task (until it ends, or ``run_expiry`` passes),
        and this try of the task id as started (``retries``: the tries before it)."""
        run = {"task_id": task_id, "due": due_ms, "worker": worker}
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
        self._track("end", name, run, self.history_size, retries)

    @translated
    def run_not_started(self, d: Delivery, what: NotStarted) -> None:
        """Record a run a worker could not start: for an entry, its outcome (run state and
        history) and, for either lane, one more in its shard's count of such runs (a delayed
        task's try is marked ended with :meth:`mark_run`)."""
        if d.lane == "delayed":
            index = shard_of(d.name, self.layout.shards)  # where delay() wrote it
            key = self.shard_scripts[index].keys.not_started
            self.client.hincrby(key, wire(what.counted_as), 1)
            return
        run = {"task_id": d.task_id, "due": d.due_ms, "worker": d.worker}
        run.update(outcome=what.outcome, task=what.task, detail=what.detail)
        if what.exception:
            run["exception"] = what.exception
        self._track("end", d.name, run, self.history_size, d.retries, what.counted_as)

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
        marker = _record(self.client.hget(key, wire(name)))
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
                marker = _record(raw)
                if marker is not None and _ms(marker.get("until"), 0) > now_ms:
                    found[name] = Running(
                        task_id=str(marker.get("task_id", "")),
                        due=_time(marker.get("due")),
                        worker=str(marker.get("worker", "")),
                        started=_time(marker.get("started")),
                        until_ms=_ms(marker.get("until"), 0),
                    )
        return found

    @translated
    def history(self, name: str, limit: int = 20) -> list[Run]:
        """The entry's last ``limit`` occurrences, newest first: each send, skip, failure
        and missed count the beats recorded and, with the worker hook, its run's outcome.
        Empty unless ``redisbeat_history_size`` is set."""
        key = self.shard(name).keys.history(name)
        raw = self.client.lrange(wire(key), 0, 3 * max(self.history_size, limit) - 1)
        return join_history([r for r in map(_record, raw) if r is not None])[:limit]


def join_history(records: list[dict[str, Any]]) -> list[Run]:
    """Runs from a history's records (newest first): each send with its run's outcome."""
    outcomes: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("kind") == "run":
            outcomes.setdefault(str(r.get("task_id", "")), r)
    runs: list[Run] = []
    told = {str(r.get("task_id") or "") for r in records if r.get("kind") == "send"}
    for r in records:
        task_id = str(r.get("task_id") or "")
        if r.get("kind") == "send":
            runs.append(_run(r, outcomes.get(task_id) if task_id else None))
        elif r.get("kind") == "run" and task_id not in told and outcomes.get(task_id) is r:
            # An outcome whose send was trimmed, or came from a run the beats did not send.
            runs.append(_run({"task_id": task_id, "due": r.get("due"), "result": "run"}, r))
        elif r.get("kind") == "duplicate":
            runs.append(_duplicate(r))
    runs.sort(key=lambda run: run.sent_at or run.ended or run.due or _EPOCH, reverse=True)
    return runs


def _run(send: dict[str, Any], run: dict[str, Any] | None) -> Run:
    run = run or {}
    runtime = run.get("runtime")
    return Run(
        task_id=str(send.get("task_id") or ""),
        due=_time(send.get("due")),
        result=str(send.get("result", "")),
        sent_at=_time(send.get("at")),
        beat=str(send.get("beat") or ""),
        reason=str(send.get("reason") or ""),
        missed=int(_ms(send.get("missed"), 0)),
        outcome=str(run["outcome"]) if run.get("outcome") else None,
        exception=str(run["exception"]) if run.get("exception") else None,
        started=_time(run.get("started")),
        ended=_time(run.get("ended")),
        runtime=runtime / 1000 if isinstance(runtime, (int, float)) else None,
        worker=str(run.get("worker") or ""),
        detail=str(run["detail"]) if run.get("detail") else None,
    )


#: How far the first copy of a run had got when a worker dropped another (a copy's reason).
_STAGES = {"received": "already received", "started": "already running", "ended": "already ran"}


def _duplicate(copy: dict[str, Any]) -> Run:
    """A copy a worker dropped: a row of its own (the run's outcome stays its send's)."""
    reason = _STAGES.get(str(copy.get("stage")), "already seen")
    first = str(copy.get("first") or "")
    return Run(
        task_id=str(copy.get("task_id") or ""),
        due=_time(copy.get("due")),
        result="duplicate",
        reason=f"{reason} on {first}" if first else reason,
        outcome="duplicate",
        ended=_time(copy.get("at")),
        worker=str(copy.get("worker") or ""),
    )


_EPOCH = from_ms(0)


def _record(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        data = json.loads(text(raw))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _ms(value: Any, default: int) -> int:
    return int(value) if valid_ms(value) else default


def _time(value: Any) -> datetime | None:
    return from_ms(int(value)) if valid_ms(value) else None
