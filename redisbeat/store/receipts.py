"""The worker hook's duplicate check: each try of a task id redisbeat sent runs once.

A worker asks :meth:`ReceiptCalls.receive` as a message arrives, before Celery runs it: one
script (``receive.lua``) marks that try of the task id as received, or, when a worker already
received another copy of it, started it or ran it, records the copy (in the entry's run state
and history, or in a sent delayed task's record) and says to drop it. The run's start and end
renew the mark (``track.lua`` for an entry, :meth:`ReceiptCalls.mark_run` for a delayed
task), so a run is remembered while it may still go on and ``redisbeat_duplicate_window_seconds``
after it ended. A mark lives in the shard of its entry (or delayed task), next to what it
records: one script, one Redis Cluster slot. Each script checks the shard's layout record
against the layout the worker follows, so a worker started before a reshard reads the
layout again and marks where the entry (or task) lives now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .base import StoreBase
from .errors import LayoutChanged, translated
from .keys import Keys
from .records import text, wire
from .runner import Call, Script
from .shards import Layout

RECEIVE = Script.named("receive", "seen")

Lane = Literal["periodic", "delayed"]


@dataclass(frozen=True)
class Delivery:
    """One message redisbeat sent, as a worker received it."""

    #: ``periodic`` (``name`` is the entry's) or ``delayed`` (``name`` is the task's key).
    lane: Lane
    name: str
    task_id: str
    #: The tries before this one (Celery's ``retries`` header): a retry is a run of its own.
    retries: int
    due_ms: int | None
    #: The broker's tag of this message ('' when it does not last across redeliveries: only
    #: kombu's virtual transports, Redis among them, keep it).
    tag: str
    #: The broker says it gives this message again (its first receiver did not ack it).
    redelivered: bool
    worker: str


@dataclass(frozen=True)
class Receipt:
    """What a worker is to do with a message: run it, or drop it as a copy."""

    run: bool
    #: For a copy: how far its first copy got (``received``, ``started``, ``ended``), and
    #: on which worker.
    stage: str = ""
    first: str = ""


class ReceiptCalls(StoreBase):
    """The duplicate check's calls (a worker's)."""

    @translated
    def receive(self, d: Delivery, hold_ms: int) -> Receipt:
        """Mark ``d`` as received (its mark lasts ``hold_ms``, until its run starts) and run
        it, or record it as a copy of a run a worker already received, started or ran."""

        def receive(layout: Layout) -> Any:
            k = self._lane_keys(d.lane, d.name, layout)
            keys: list[str | bytes] = [wire(k.seen(d.task_id, d.retries)), k.shard_layout]
            if d.lane == "periodic":
                keys += [k.state, wire(k.history(d.name))]
            else:
                keys.append(wire(k.delayed_done(d.name)))
            args = ["receive", d.lane, wire(d.name), d.task_id, d.worker, hold_ms]
            args += [layout.spelled, d.tag, "1" if d.redelivered else ""]
            args += ["" if d.due_ms is None else d.due_ms, self.history_size]
            return _followed(self.runner.run(Call(RECEIVE, keys, args), "none"))

        reply = self._with_layout(receive)
        if int(reply[0]) == 1:
            return Receipt(True)
        return Receipt(False, text(reply[1]), text(reply[2]))

    @translated
    def mark_run(
        self, lane: Lane, name: str, task_id: str, retries: int, op: str, worker: str
    ) -> None:
        """Mark a delayed task's try as ``start``-ed or ``end``-ed (an entry's run is marked
        with :meth:`run_started` and :meth:`run_ended`)."""
        ttl = self.mark_ms(op)
        if not ttl:
            return
        stage = "started" if op == "start" else "ended"

        def mark(layout: Layout) -> Any:
            k = self._lane_keys(lane, name, layout)
            keys: list[str | bytes] = [wire(k.seen(task_id, retries)), k.shard_layout]
            args = [stage, lane, wire(name), task_id, worker, ttl, layout.spelled]
            return _followed(self.runner.run(Call(RECEIVE, keys, args), "none"))

        self._with_layout(mark)

    def _lane_keys(self, lane: Lane, name: str, layout: Layout) -> Keys:
        if lane == "periodic":
            return self.shard(name).keys
        return self.shard_scripts[sent_shard(layout, name)].keys


def sent_shard(layout: Layout, key: str) -> int:
    """The shard a sent delayed task's marks (and its not-started count) go to: the one its
    key hashes to by the count a reshard moves to, where the reshard brings the task and its
    sent record (:func:`~.delayed_moving.move_sent_records`); by the count when none runs."""
    return layout.home(key)


def _followed(reply: Any) -> Any:
    """A worker script's reply, unless it says the worker followed an old layout."""
    if reply == -2 or (isinstance(reply, list) and reply and reply[0] == -2):
        raise LayoutChanged()
    return reply
