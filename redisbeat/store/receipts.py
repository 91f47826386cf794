"""The worker hook's duplicate check: each try of a task id redisbeat sent runs once.

A worker asks :meth:`ReceiptCalls.receive` as a message arrives, before Celery runs it: one
script (``receive.lua``) marks that try of the task id as received, or, when a worker already
received another copy of it, started it or ran it, records the copy (in the entry's run state
and history, or in a sent delayed task's record) and says to drop it. The run's start and end
renew the mark (``track.lua`` for an entry, :meth:`ReceiptCalls.mark_run` for a delayed
task), so a run is remembered while it may still go on and ``redisbeat_duplicate_window_seconds``
after it ended. A mark lives in the shard of its entry (or delayed task), next to what it
records: one script, one Redis Cluster slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import StoreBase
from .errors import translated
from .keys import Keys, shard_of
from .records import text, wire
from .runner import Call, Script

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
        k = self._lane_keys(d.lane, d.name)
        keys: list[str | bytes] = [wire(k.seen(d.task_id, d.retries))]
        if d.lane == "periodic":
            keys += [k.state, wire(k.history(d.name))]
        else:
            keys.append(wire(k.delayed_done(d.name)))
        args = ["receive", d.lane, wire(d.name), d.task_id, d.worker, hold_ms, d.tag]
        args += ["1" if d.redelivered else "", "" if d.due_ms is None else d.due_ms]
        args.append(self.history_size)
        reply = self.runner.run(Call(RECEIVE, keys, args), "none")
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
        if ttl:
            k = self._lane_keys(lane, name)
            stage = "started" if op == "start" else "ended"
            keys = [wire(k.seen(task_id, retries))]
            args = [stage, lane, wire(name), task_id, worker, ttl]
            self.runner.run(Call(RECEIVE, keys, args), "none")

    def _lane_keys(self, lane: Lane, name: str) -> Keys:
        if lane == "periodic":
            return self.shard(name).keys
        index = shard_of(name, self.layout.shards)  # where delay() wrote it
        return self.shard_scripts[index].keys
