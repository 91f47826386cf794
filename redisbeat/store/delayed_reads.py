"""Reading delayed one-off tasks back: one task, an owner's pending tasks page by page, and
how many are pending.

While a reshard runs, a task is in its old shard until the move takes it, then (after a
moment in the old shard's moving hash, which the reads look at too) in its new one; it
never goes back. So a task is read in its old shard first and its new one after, and a page
is read twice over every shard of both counts: a task the first pass missed, because it
moved from a shard not yet read to one read already, is where the second pass looks.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from itertools import islice
from typing import Any

from ..errors import RedisBeatError
from ..schedule.clock import MAX_MS, from_ms, to_ms
from ..schedule.delayed import DelayedTask, check_key, read_definition
from .base import StoreBase
from .delayed_scripts import DelayedScripts, PendingRow, pending_rows
from .errors import translated
from .records import text_or_none, wire

#: The most :meth:`DelayedReads.pending` returns in one page.
MAX_PAGE = 1000


class DelayedReads(StoreBase):
    """The delayed-task reads of :class:`~redisbeat.ScheduleStore`."""

    def delayed_scripts(self, shard: int) -> DelayedScripts:
        return DelayedScripts(self.runner, self.keys.of_shard(shard))

    @translated
    def get_delayed(self, key: str) -> DelayedTask | None:
        """A pending task (``state`` "pending", or "sending" once a beat has claimed it);
        once sent, what became of it ("sent" or "failed", with its task id and time)
        for ``redisbeat_delayed_retention_seconds``; else None."""
        check_key(key)
        layout = self.layout
        shards = dict.fromkeys([layout.origin(key), layout.home(key)])  # old shard first
        done: list[str] = []
        for shard in shards:
            k = self.keys.of_shard(shard)
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(k.delayed_tasks, wire(key))
            pipe.zscore(k.delayed, wire(key))
            pipe.hget(k.delayed_inflight, wire(key))
            pipe.get(k.delayed_done(key))
            if layout.moving_to is not None:
                pipe.hget(k.delayed_moving, wire(key))
            raw, score, claim, sent, *moving = pipe.execute()
            task = _pending(key, text_or_none(raw), score, text_or_none(claim))
            task = task or _moving(key, text_or_none(moving[0]) if moving else None)
            if task is not None:
                return task
            done += [text_or_none(sent) or ""]
        return _done(key, max(done, key=_sent_at))

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
        """How many tasks are pending (or being sent): the owner's, or all for None (while
        a reshard runs, a task it is moving at that moment may be left out)."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(self.layout.span):
            k = self.keys.of_shard(shard)
            pipe.zcard(k.delayed if owner is None else k.delayed_owner(owner))
        return sum(int(n) for n in pipe.execute())

    def _page(self, owner: str | None, limit: int, after: DelayedTask | None) -> list[DelayedTask]:
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
            raise RedisBeatError(f"pending: limit must be an integer from 1 to {MAX_PAGE}")
        after_ms = None if after is None else to_ms(after.eta)
        after_key = "" if after is None else after.key
        layout = self.layout
        moving = layout.moving_to is not None
        calls = [
            self.delayed_scripts(shard).pending_call(owner, after_ms, after_key, limit, moving)
            for shard in range(layout.span)
        ]
        pages: list[list[PendingRow]] = []
        for _ in range(2 if moving else 1):
            for reply in self.runner.run_spread(calls, "none"):
                if isinstance(reply, Exception):
                    raise reply
                pages.append(pending_rows(reply))
        rows: Iterator[PendingRow] = heapq.merge(*pages, key=lambda r: (r.due_ms, r.key))
        listed: dict[str, PendingRow] = {}
        for row in (r for r in rows if r.definition is not None):
            listed.setdefault(row.key, row)
        return [
            _task(r.key, r.due_ms, r.definition, "sending" if r.sending else "pending")
            for r in islice(sorted(listed.values(), key=lambda r: (r.due_ms, r.key)), limit)
        ]


def _pending(key: str, raw: str | None, score: Any, claim: str | None) -> DelayedTask | None:
    """The task as its shard holds it (None: it holds none under the key)."""
    if raw is None or score is None:
        return None
    due, state = int(score), "pending"
    held = _claim_due(claim, due)
    if held is not None:
        due, state = held, "sending"
    return _task(key, due, raw, state)


def _moving(key: str, raw: str | None) -> DelayedTask | None:
    """The task as a reshard set it aside to move, for moments (None: it is not moving)."""
    try:
        moved = json.loads(raw or "{}")
        definition, due = moved["definition"], int(moved["score"])
    except (KeyError, TypeError, ValueError):
        return None
    return _task(key, due, definition, "pending") if isinstance(definition, str) else None


def _claim_due(raw: str | None, score: int) -> int | None:
    """The due time of a beat's claim on the task, while it holds one (else None)."""
    try:
        claim = json.loads(raw or "{}")
        lease_until, due = int(claim["lease_until"]), int(claim["due"])
    except (KeyError, TypeError, ValueError):
        return None
    return due if lease_until == score and 0 <= due <= MAX_MS else None


def _sent_at(raw: str) -> int:
    """When a sent task's record says it went out (0: none, or not readable): of a task
    sent from its old shard and another under the same key from its new one, the later."""
    try:
        return int(json.loads(raw or "null")["at"])
    except (KeyError, TypeError, ValueError):
        return 0


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
