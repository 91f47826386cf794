"""Delayed one-off tasks: delay, reschedule, cancel, read back, list and cancel by owner.

A delayed task lives in the shard its key hashes to, in three small records: its due time in
the shard's delayed schedule, its JSON record, and, when it has an owner, its due time in
that owner's index in the same shard. Every change is one Lua script, so the three never
disagree, and a change racing the beat that sends the task either wins or comes too late,
never both (:mod:`.lua.change_delayed`).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from ..errors import RedisBeatError
from ..schedule.clock import MAX_MS, from_ms, to_ms
from ..schedule.delayed import Delay, DelayedTask, change_of, check_key, read_definition
from .base import StoreBase
from .delayed_scripts import Changed, DelayedScripts, PendingRow
from .errors import LayoutChanged, translated
from .keys import shard_of
from .records import text_or_none, wire
from .shards import Layout

#: Delays written per pipeline by :meth:`DelayedCalls.delay_many`.
CHUNK = 1000
#: The most :meth:`DelayedCalls.pending` returns in one page.
MAX_PAGE = 1000


class DelayedCalls(StoreBase):
    """The delayed-task API of :class:`~redisbeat.ScheduleStore`."""

    def delayed_scripts(self, shard: int) -> DelayedScripts:
        return DelayedScripts(self.runner, self.keys.of_shard(shard))

    def _delayed_home(self, key: str, layout: Layout) -> DelayedScripts:
        if layout.moving_to is not None:
            raise RedisBeatError(
                f"a reshard of {self.keys.layout} is running: delayed tasks can be written "
                "once it ends"
            )
        return self.delayed_scripts(shard_of(key, layout.shards))

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
        def write(layout: Layout) -> list[str]:
            homes = [self._delayed_home(d.key, layout) for d in chunk]
            calls = [
                home.delay_call(d, layout.spelled, wake=i == len(chunk) - 1)
                for i, (home, d) in enumerate(zip(homes, chunk, strict=True))
            ]
            for reply in self.runner.run_many(calls):
                if isinstance(reply, Exception):
                    raise reply
                if reply == -2:
                    raise LayoutChanged()
            return [d.key for d in chunk]

        return self._with_layout(write)

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
        return self._delayed_home(key, self.layout).change(key, op, amount)

    @translated
    def get_delayed(self, key: str) -> DelayedTask | None:
        """A pending task (``state`` "pending", or "sending" once a beat has claimed it);
        once sent, what became of it ("sent" or "failed", with its task id and time)
        for ``redisbeat_delayed_retention_seconds``; else None."""
        check_key(key)
        k = self._delayed_home(key, self.layout).keys
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(k.delayed_tasks, wire(key))
        pipe.zscore(k.delayed, wire(key))
        pipe.hget(k.delayed_inflight, wire(key))
        pipe.get(k.delayed_done(key))
        raw, score, claim, done = pipe.execute()
        definition = text_or_none(raw)
        if definition is None or score is None:
            return _done(key, text_or_none(done))
        due, state = int(score), "pending"
        held = _claim_due(text_or_none(claim), due)
        if held is not None:
            due, state = held, "sending"
        return _task(key, due, definition, state)

    @translated
    def pending(
        self, owner: str, limit: int = 100, after: DelayedTask | None = None
    ) -> list[DelayedTask]:
        """The owner's pending tasks in due order (ties by key), at most ``limit``; pass
        the last one of a page as ``after`` for the next."""
        return self._page(owner, limit, after)

    @translated
    def upcoming(self, limit: int = 100, after: DelayedTask | None = None) -> list[DelayedTask]:
        """Every owner's pending tasks, and those without one, paged as :meth:`pending`."""
        return self._page(None, limit, after)

    @translated
    def count_pending(self, owner: str | None = None) -> int:
        """How many tasks are pending (or being sent): the owner's, or all for None."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(self.layout.shards):
            k = self.keys.of_shard(shard)
            pipe.zcard(k.delayed if owner is None else k.delayed_owner(owner))
        return sum(int(n) for n in pipe.execute())

    def _page(self, owner: str | None, limit: int, after: DelayedTask | None) -> list[DelayedTask]:
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
            raise RedisBeatError(f"pending: limit must be an integer from 1 to {MAX_PAGE}")
        after_ms = None if after is None else to_ms(after.eta)
        after_key = "" if after is None else after.key
        pages = [
            self.delayed_scripts(shard).pending(owner, after_ms, after_key, limit)
            for shard in range(self.layout.shards)
        ]
        rows: Iterator[PendingRow] = heapq.merge(*pages, key=lambda r: (r.due_ms, r.key))
        return [
            _task(r.key, r.due_ms, r.definition, "sending" if r.sending else "pending")
            for r in islice((r for r in rows if r.definition is not None), limit)
        ]

    @translated
    def cancel_owner(self, owner: str) -> int:
        """Cancel every pending task of ``owner``; returns how many will not be sent (those
        a beat is sending already are sent)."""
        cancelled, after = 0, None
        while page := self.pending(owner, MAX_PAGE, after):
            calls = [
                self._delayed_home(t.key, self.layout).change_call(t.key, "cancel") for t in page
            ]
            replies = self.runner.run_many(calls)
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
                cancelled += Changed.from_reply(reply).outcome == "done"
            after = page[-1]
        return cancelled


def _claim_due(raw: str | None, score: int) -> int | None:
    """The due time of a beat's claim on the task, while it holds one (else None)."""
    try:
        claim = json.loads(raw or "{}")
        lease_until, due = int(claim["lease_until"]), int(claim["due"])
    except (KeyError, TypeError, ValueError):
        return None
    return due if lease_until == score and 0 <= due <= MAX_MS else None


def _done(key: str, raw: str | None) -> DelayedTask | None:
    """What became of a task once sent, while it is kept (None: nothing is)."""
    try:
        done = json.loads(raw or "null")
        due, at, outcome = int(done["due"]), int(done["at"]), done["outcome"]
    except (KeyError, TypeError, ValueError):
        return None
    owner, task, copies = done.get("owner"), done.get("task"), done.get("duplicates")
    return DelayedTask(
        key,
        task if isinstance(task, str) else "",
        from_ms(due),
        owner if isinstance(owner, str) else None,
        state="failed" if outcome == "failed" else "sent",
        task_id=str(done.get("task_id") or "") or None,
        sent_at=from_ms(at),
        error=done.get("error") if isinstance(done.get("error"), str) else None,
        duplicates=copies if isinstance(copies, int) and copies > 0 else 0,
    )


def _task(key: str, due_ms: int, definition: str | None, state: Any) -> DelayedTask:
    record = read_definition(definition or "")
    owner = record.get("owner")
    return DelayedTask(
        key,
        record["task"],
        from_ms(due_ms),
        owner if isinstance(owner, str) else None,
        tuple(record.get("args") or ()),
        dict(record.get("kwargs") or {}),
        dict(record.get("options") or {}),
        state,
    )
