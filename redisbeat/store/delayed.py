"""Delayed one-off tasks: delay, reschedule, cancel, and cancel by owner (reading them back
and listing them: :mod:`.delayed_reads`).

A delayed task lives in the shard its key hashes to, in three small records: its due time in
the shard's delayed schedule, its JSON record, and, when it has an owner, its due time in
that owner's index in the same shard. Every change is one Lua script, so the three never
disagree, and a change racing the beat that sends the task either wins or comes too late,
never both (:mod:`.lua.change_delayed`).

While a reshard runs, a write goes to the task's new shard, after moving the task there
(:func:`~.delayed_moving.placed_delayed`); a task a beat holds is written where it is, by a
script that first checks the beat still holds it, and looked for again when it does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from ..errors import RedisBeatError
from ..schedule.clock import from_ms
from ..schedule.delayed import Delay, change_of, check_key
from .delayed_moving import Place, placed_delayed
from .delayed_reads import MAX_PAGE, DelayedReads
from .delayed_scripts import Changed
from .errors import LayoutChanged, translated
from .shards import Layout

#: Delays written per pipeline by :meth:`DelayedCalls.delay_many`.
CHUNK = 1000
#: How many times a write looks again for a task that left the beat holding it meanwhile
#: (each time, the reshard or the writer itself has moved it on).
MAX_PLACINGS = 10


class DelayedCalls(DelayedReads):
    """The delayed-task API of :class:`~redisbeat.ScheduleStore` (its reads inherited)."""

    @translated
    def delay(
        self,
        task: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        eta: datetime | None = None,
        countdown: float | timedelta | None = None,
        key: str | None = None,
        owner: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Send ``task`` once, at ``eta`` (an aware datetime) or ``countdown`` seconds from
        now by the Redis clock; returns its key (generated when not given). A pending task
        under the same key is replaced; a key whose task was already sent starts a new one.
        ``task`` is a task name, a Celery task or a signature (its arguments and options
        are used, with ``args`` after its own)."""
        d = Delay.of(
            task, args, kwargs, eta=eta, countdown=countdown, key=key, owner=owner, options=options
        )
        return self._delay_chunk([d])[0]

    @translated
    def delay_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Many delays, pipelined: each item a mapping of :meth:`delay`'s arguments (``task``,
        ``args``, ``kwargs``, ``eta`` or ``countdown``, ``key``, ``owner``, ``options``).
        Every item is checked before any is written; returns the keys in order."""
        delays = [Delay.from_item(item) for item in items]
        keys: list[str] = []
        it = iter(delays)
        while chunk := list(islice(it, CHUNK)):
            keys += self._delay_chunk(chunk)
        return keys

    def _delay_chunk(self, chunk: list[Delay]) -> list[str]:
        todo = chunk

        def write(layout: Layout) -> list[str]:
            nonlocal todo
            for _ in range(MAX_PLACINGS):
                todo, stale = self._write_delays(todo, layout)
                if stale:  # what was written stays written: only the rest is tried again
                    raise LayoutChanged()
                if not todo:
                    return [d.key for d in chunk]
            raise RedisBeatError(f"delayed tasks {[d.key for d in todo]} kept moving")

        return self._with_layout(write)

    def _write_delays(self, chunk: list[Delay], layout: Layout) -> tuple[list[Delay], bool]:
        """Write each delay where its task goes now, one pipeline per server: the delays
        to write again (their shard's layout changed, or their task left the beat that
        held it meanwhile), and whether a layout changed."""
        places = placed_delayed(self, [d.key for d in chunk], layout)
        calls = [
            self.delayed_scripts(places[d.key].shard).delay_call(
                d, layout.spelled, wake=i == len(chunk) - 1, held=places[d.key].held
            )
            for i, d in enumerate(chunk)
        ]
        again, stale = [], False
        for d, reply in zip(chunk, self.runner.run_spread(calls, "strict"), strict=True):
            if isinstance(reply, Exception):
                raise reply
            stale = stale or reply == -2
            if reply in (-2, -3):
                again.append(d)
        return again, stale

    @translated
    def reschedule(
        self,
        key: str,
        *,
        eta: datetime | None = None,
        countdown: float | timedelta | None = None,
        by: timedelta | None = None,
    ) -> datetime | None:
        """Move a pending task to ``eta``, to ``countdown`` seconds from now, or ``by`` a
        timedelta from its due time (negative: sooner). Returns its new due time; None when
        it comes too late (a beat has claimed it, and sends it at its old time) or no
        pending task has that key."""
        op, amount = change_of(key, eta, countdown, by)
        changed = self._change(key, op, amount)
        return from_ms(changed.due_ms) if changed.outcome == "done" else None

    @translated
    def cancel(self, key: str) -> bool:
        """Cancel a pending task: True when it will not be sent; False when it comes too late
        (a beat has claimed it: when due, or up to ``redisbeat_claim_ahead_seconds``
        before) or no pending task has that key."""
        return self._change(key, "cancel").outcome == "done"

    def _change(self, key: str, op: str, amount: int = 0) -> Changed:
        check_key(key)
        return self._changes([key], op, amount)[key]

    @translated
    def cancel_owner(self, owner: str) -> int:
        """Cancel every pending task of ``owner``; returns how many will not be sent (those
        a beat is sending already are sent)."""
        cancelled, after = 0, None
        while page := self.pending(owner, MAX_PAGE, after):
            changes = self._changes([t.key for t in page], "cancel")
            cancelled += sum(c.outcome == "done" for c in changes.values())
            after = page[-1]
        return cancelled

    def _changes(self, keys: list[str], op: str, amount: int = 0) -> dict[str, Changed]:
        """Change each task where it is now, one pipeline per server; a change that lost the
        race with a move (the layout changed, or the task left the beat holding it, where
        it was looked for) is tried again, and each task's outcome counted once."""
        decided: dict[str, Changed] = {}

        def change(layout: Layout) -> dict[str, Changed]:
            for _ in range(MAX_PLACINGS):
                todo = [key for key in dict.fromkeys(keys) if key not in decided]
                if not todo:
                    return decided
                places = placed_delayed(self, todo, layout)
                calls = [
                    self.delayed_scripts(places[key].shard).change_call(
                        key, op, layout.spelled, amount
                    )
                    for key in todo
                ]
                replies = self.runner.run_spread(calls, "strict")
                if _decide(todo, replies, places, decided):
                    raise LayoutChanged()
            raise RedisBeatError(f"delayed tasks {todo} kept moving")

        return self._with_layout(change)


def _decide(
    keys: list[str], replies: list[Any], places: Mapping[str, Place], decided: dict[str, Changed]
) -> bool:
    """Record in ``decided`` the changes that settled; whether one found the layout old."""
    stale = False
    for key, reply in zip(keys, replies, strict=True):
        if isinstance(reply, Exception):
            raise reply
        if reply == -2:
            stale = True
            continue
        changed = Changed.from_reply(reply)
        if not (places[key].held and changed.outcome == "missing"):
            decided[key] = changed
    return stale
