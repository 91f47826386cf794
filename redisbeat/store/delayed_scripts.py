"""The delayed tasks' Lua scripts, each behind one typed wrapper (see :mod:`.scripts`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..schedule.clock import MAX_MS
from ..schedule.delayed import Delay
from .errors import LayoutChanged
from .keys import Keys
from .records import Outcome, text, wire
from .runner import Call, Runner, Script

DELAY = Script.named("delay")
FINISH_DELAYED = Script.named("finish_delayed")
CHANGE = Script.named("change_delayed")
PENDING = Script.named("pending")


@dataclass(frozen=True)
class Changed:
    """What a cancel or reschedule did: ``done`` (it won), ``late`` (a beat is sending the
    task at ``due_ms``), or ``missing`` (no pending task has the key)."""

    outcome: str
    due_ms: int

    @classmethod
    def from_reply(cls, reply: Any) -> Changed:
        """Raises :class:`~.errors.LayoutChanged` for -2 (the writer's layout is old)."""
        if reply == -2:
            raise LayoutChanged()
        code, due = int(reply[0]), int(reply[1])
        return cls({1: "done", 0: "late"}.get(code, "missing"), due)


@dataclass(frozen=True)
class PendingRow:
    key: str
    due_ms: int
    #: The stored record (None: it went between the index and the read).
    definition: str | None
    sending: bool


class DelayedScripts:
    """One shard's delayed-task scripts."""

    def __init__(self, runner: Runner, keys: Keys) -> None:
        self.runner = runner
        self.keys = keys

    def delay_call(self, d: Delay, layout: str, wake: bool, held: bool = False) -> Call:
        """Write ``d`` (its reply: the due ms, -2 when ``layout`` is no longer the shard's,
        or -3 when ``held`` asked for a task a beat holds here and none does); ``wake``
        publishes a wake-up (once per pipeline is enough)."""
        k = self.keys
        args = [
            wire(d.key),
            d.definition(),
            "" if d.at_ms is None else d.at_ms,
            d.countdown_ms or 0,
            d.owner or "",
            k.delayed_owner_prefix,
            k.events if wake else "",
            layout,
            "1" if held else "",
        ]
        return Call(DELAY, [k.delayed, k.delayed_tasks, k.shard_layout, k.delayed_inflight], args)

    def finish_call(
        self, beat_id: str, lease_until_ms: int, outcomes: list[Outcome], keep_ms: int
    ) -> Call:
        """Finish claimed tasks (its reply: :meth:`FinishResult.from_reply`); what became of
        a sent one is kept ``keep_ms``."""
        k = self.keys
        args: list[Any] = [
            beat_id,
            lease_until_ms,
            k.events,
            MAX_MS,
            k.delayed_owner_prefix,
            k.delayed_done_prefix,
            keep_ms,
        ]
        for o in outcomes:
            args += [wire(o.name), o.action, "", o.task_id, o.due_ms, o.error]
        return Call(FINISH_DELAYED, [k.delayed, k.delayed_inflight, k.delayed_tasks], args)

    def change_call(self, key: str, op: str, layout: str, amount_ms: int = 0) -> Call:
        """Cancel (``op`` 'cancel') or move the task: 'at' a due ms, 'in' ms from now, 'by'
        ms from its due time (its reply: :meth:`Changed.from_reply`, or -2 when ``layout``
        is no longer the shard's)."""
        k = self.keys
        args = [wire(key), k.delayed_owner_prefix, op, amount_ms, k.events, layout]
        keys = [k.delayed, k.delayed_tasks, k.delayed_inflight, k.shard_layout]
        return Call(CHANGE, keys, args)

    def change(self, key: str, op: str, layout: str, amount_ms: int = 0) -> Changed:
        """Raises :class:`~.errors.LayoutChanged` when ``layout`` is no longer the shard's."""
        call = self.change_call(key, op, layout, amount_ms)
        return Changed.from_reply(self.runner.run(call, "strict"))

    def pending_call(
        self, owner: str | None, after_ms: int | None, after_key: str, limit: int, moving: bool
    ) -> Call:
        """Up to ``limit`` of the owner's tasks in this shard (every task, for None) after
        (``after_ms``, ``after_key``) in due order, with those a reshard has set aside here
        to move when ``moving`` (its reply: :func:`pending_rows`)."""
        k = self.keys
        index = k.delayed if owner is None else k.delayed_owner(owner)
        keys = [index, k.delayed_tasks, k.delayed, k.delayed_inflight, k.delayed_moving]
        start = "-inf" if after_ms is None else after_ms
        args = [start, wire(after_key), limit, "1" if moving else "", wire(owner or "")]
        return Call(PENDING, keys, args)


def pending_rows(reply: Any) -> list[PendingRow]:
    """The rows of pending.lua's reply."""
    return [
        PendingRow(
            text(reply[i]),
            int(reply[i + 1]),
            None if reply[i + 2] is None else text(reply[i + 2]),
            reply[i + 3] == 1,
        )
        for i in range(0, len(reply), 4)
    ]
