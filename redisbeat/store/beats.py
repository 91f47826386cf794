"""What a beat asks of Redis: claims and their leases, finishing a batch, the heartbeat, and
mending what it finds broken on the way (the ``beat_schedule`` record: :mod:`.config_record`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..errors import CorruptEntry
from ..schedule.clock import MAX_MS, from_ms
from ..schedule.entry import Entry
from .activity_log import log_summary
from .config_record import ConfigCalls
from .delayed_scripts import DelayedScripts
from .errors import translated
from .keys import DELAYED_MARK, bare, lane_of, shard_of
from .records import (
    ClaimBatch,
    FinishResult,
    Heartbeat,
    Outcome,
    text,
    text_or_none,
    wire,
)
from .runner import Call
from .scripts import Scripts, renewed_until
from .shards import Layout, ShardCursor

#: The fewest claims a batch shared among shards asks of each while the beat is busy (its
#: last claim was full): a shard's claim and its finish each cost Redis about 0.1 ms whatever
#: they take (a round trip, the script's set-up), so a beat behind on many shards claims from
#: the few due soonest in each lane (periodic and delayed), one shard per MIN_SHARE of the
#: batch and one at least, full batches each, and from the others next round. A beat whose
#: last claim was not full claims from every shard with something due, in one round trip:
#: there each occurrence's lateness counts more than the claim's cost.
MIN_SHARE = 100


class BeatCalls(ConfigCalls):
    """The beat protocol: each call is one Lua script, run atomically in Redis."""

    #: Whether the last claim took a whole batch (see :data:`MIN_SHARE`).
    _busy = False

    @translated
    def claim(self, beat_id: str, lease_ms: int, batch_size: int, ahead_ms: int = 0) -> ClaimBatch:
        """Claim what is due, and what falls due within ``ahead_ms`` (the beat sends each
        when due), from every shard with an entry or a delayed task due by then, in one
        round trip per server; the batch, in due order, says when the next claim is needed
        on any shard. A delayed task's claim is named by its key after :data:`DELAYED_MARK`."""
        most = max(1, batch_size // MIN_SHARE) if self._busy else None
        lanes = self._due_lanes(ahead_ms, most)
        size = -(-batch_size // len(lanes))  # the batch shared among them
        calls = [self._lane(*lane).claim_call(beat_id, lease_ms, size, ahead_ms) for lane in lanes]
        replies = self.runner.run_spread(calls, "lenient")
        batches, error = [], None
        for (lane, shard), reply in zip(lanes, replies, strict=True):
            if isinstance(reply, Exception):
                error = error or reply
                continue
            batch = ClaimBatch.from_reply(reply, lease_ms)
            self._cursor(lane).seen(shard, batch.next_due_ms, batch.now_ms)
            if lane == "delayed":
                marked = [replace(c, name=DELAYED_MARK + c.name) for c in batch.claims]
                batch = replace(batch, claims=marked)
            # Finishing, renewing and setting aside go where the claim was taken, under the
            # lease that shard's clock set, whatever the layout says by then.
            if batch.claims:
                self._claimed.update((claim.name, shard) for claim in batch.claims)
                self._leases[(lane, shard)] = batch.lease_until_ms
            batches.append(batch)
        if error is not None:
            raise error  # the claims taken are handed back (expire_lost)
        now_ms = min(b.now_ms for b in batches)  # the slowest clock: nothing goes out early
        claims = sorted((c for b in batches for c in b.claims), key=lambda c: c.due_ms)
        lease_until = min(b.lease_until_ms for b in batches)
        self._busy = len(claims) >= batch_size
        return ClaimBatch(now_ms, lease_until, self._earliest(now_ms), claims)

    def _due_lanes(self, ahead_ms: int, most: int | None) -> list[tuple[str, int]]:
        """The lanes and shards to claim from: those due within ``ahead_ms``, in each lane at
        most ``most`` of them (None: all), the soonest due (ties in the cursors' round
        order)."""
        periodic = self.cursor.due(ahead_ms) if self.layout.span > 1 else [0]
        lanes = [("periodic", s) for s in self._soonest(self.cursor, periodic, most)]
        delayed = self._soonest(self.delayed_cursor, self.delayed_cursor.due(ahead_ms), most)
        return lanes + [("delayed", s) for s in delayed]

    @staticmethod
    def _soonest(cursor: ShardCursor, shards: list[int], most: int | None) -> list[int]:
        """At most ``most`` of ``shards`` (None: all), those ``cursor`` last saw due soonest;
        a stable sort, so ties keep the cursor's round order."""
        if most is None or len(shards) <= most:
            return shards
        return sorted(shards, key=cursor.due_ms)[:most]

    def _lane(self, lane: str, shard: int) -> Scripts:
        return (self.delayed_lane if lane == "delayed" else self.shard_scripts)[shard]

    def _cursor(self, lane: str) -> ShardCursor:
        return self.delayed_cursor if lane == "delayed" else self.cursor

    def _earliest(self, now_ms: int) -> int | None:
        """When the next claim is needed on any shard of either lane."""
        dues = [c.earliest(now_ms) for c in (self.cursor, self.delayed_cursor)]
        known = [d for d in dues if d is not None]
        return min(known) if known else None

    def _claimed_shard(self, name: str) -> int:
        index = self._claimed.get(name)
        if index is not None:
            return index
        if lane_of(name) == "delayed":
            return shard_of(bare(name), self.layout.shards)
        return self.shard(name).keys.shard

    def _per_shard(
        self,
        names: list[str],
        lease_until_ms: int,
        call: Callable[[str, Scripts, int, list[int]], Call],
    ) -> list[tuple[tuple[str, int], list[int], Any]]:
        """``call(lane, scripts, lease_until, positions)`` for each lane and shard ``names``
        were claimed from (the lease that shard set, ``lease_until_ms`` where none is known;
        the positions of its names), one pipeline per server: ((lane, shard), positions,
        reply) each."""
        groups: dict[tuple[str, int], list[int]] = {}
        for i, name in enumerate(names):
            groups.setdefault((lane_of(name), self._claimed_shard(name)), []).append(i)
        calls = [
            call(lane, self._lane(lane, shard), self._leases.get((lane, shard), lease_until_ms), p)
            for (lane, shard), p in groups.items()
        ]
        replies = self.runner.run_spread(calls, "lenient")
        return [(g, p, r) for (g, p), r in zip(groups.items(), replies, strict=True)]

    @translated
    def finish(
        self,
        beat_id: str,
        lease_until_ms: int,
        outcomes: list[Outcome],
        quarantine_after: int = 0,
    ) -> FinishResult:
        """Reschedule, record or hand back claimed entries (only those still this beat's),
        each on its shard under the lease that shard set (``lease_until_ms`` where none is
        known), one round trip per server. A delayed task sent leaves its shard.

        An entry whose sends failed ``quarantine_after`` times in a row is set aside.
        """
        if not outcomes:
            return self.scripts.finish(beat_id, lease_until_ms, outcomes, quarantine_after)

        def call(lane: str, scripts: Scripts, lease: int, positions: list[int]) -> Call:
            mine = [_bared(outcomes[i]) for i in positions]
            if lane == "delayed":
                delayed = DelayedScripts(self.runner, scripts.keys)
                return delayed.finish_call(beat_id, lease, mine, self.delayed_retention_ms)
            return scripts.finish_call(beat_id, lease, mine, quarantine_after, self.history_size)

        results, error = [], None
        for (lane, shard), positions, reply in self._per_shard(
            [o.name for o in outcomes], lease_until_ms, call
        ):
            if isinstance(reply, Exception):
                error = error or reply
                continue
            result = FinishResult.from_reply(reply)
            self._cursor(lane).seen(shard, result.next_due_ms, result.now_ms)
            for i in positions:
                self._claimed.pop(outcomes[i].name, None)
            results.append(result)
        if error is not None:
            raise error
        return _merged(results, self._earliest(min(r.now_ms for r in results)))

    @translated
    def renew(self, beat_id: str, lease_until_ms: int, names: list[str], lease_ms: int) -> int:
        """Extend the claims on ``names`` this beat holds, each shard's under the lease it
        set (``lease_until_ms`` where none is known); returns the earliest new lease_until
        (from now, by the Redis clock)."""
        if not names:
            return self.scripts.renew(beat_id, lease_until_ms, names, lease_ms)
        replies = self._per_shard(
            names,
            lease_until_ms,
            lambda _lane, scripts, lease, positions: scripts.renew_call(
                beat_id,
                lease,
                [bare(names[i]) for i in positions],
                lease_ms,
            ),
        )
        for _group, _positions, reply in replies:
            if isinstance(reply, Exception):
                raise reply
        for group, _positions, reply in replies:
            self._leases[group] = renewed_until(reply)
        return min(self._leases[group] for group, _positions, _reply in replies)

    @translated
    def expire_lost(self, beat_id: str, since_ms: int, lease_ms: int) -> int:
        """End now the leases of this beat's claims taken since ``since_ms`` whose reply it
        never got; returns how many. The beat must hold no claim it knows of."""
        self._claimed.clear()
        span = self.layout.span
        return sum(
            scripts.expire_lost(beat_id, since_ms + lease_ms, lease_ms)
            for scripts in [*self.all_shards(), *self.delayed_lane[:span]]
        )

    @translated
    def sweep_spent(self, limit: int = 1000) -> int:
        """Forget the store API's entries that will never fire again (a one-off, a
        ``Clocked`` entry, one past its end) once they have been spent for the retention;
        returns how many (at most ``limit`` a shard)."""
        retention = self.spent_retention_ms
        return sum(s.sweep_spent(retention, limit) for s in self.all_shards())

    @translated
    def quarantine(self, name: str, definition: str, error: str, by: str) -> bool:
        """Set aside a definition that cannot be loaded, unless it changed meanwhile."""
        shard = self._lane(lane_of(name), self._claimed_shard(name))
        return shard.quarantine(bare(name), definition, error, by)

    @translated
    def heartbeat(self, beat_id: str, housekeeping: bool = True) -> Heartbeat:
        """Refresh a beat's heartbeat; says which ``beat_schedule`` the deployment follows
        and, with ``housekeeping`` (which also forgets beats silent too long), which schedule
        members have a score past any valid time."""
        # The connection's first command looks at the server first (Connection.check_server).
        beat = self.scripts.heartbeat(beat_id, self.beat_ttl_ms, housekeeping)  # and shard 0's
        if beat.layout[0]:  # a reshard began or ended: claim from the shards it names
            self.follow(Layout.from_fields(*beat.layout))
        if self.layout.span == 1 or not housekeeping:
            return beat
        pipe = self.client.pipeline(transaction=False)
        for scripts in self.all_shards()[1:]:
            pipe.zrangebyscore(  # as Redis spells the score: repair compares it
                scripts.keys.schedule,
                f"({MAX_MS}",
                "+inf",
                start=0,
                num=10,
                withscores=True,
                score_cast_func=text,
            )
        beyond = [(text(n), text(score)) for rows in pipe.execute() for n, score in rows]
        return replace(beat, beyond=[*beat.beyond, *beyond])

    @translated
    def record_activity(self, beat_id: str, summary: dict[str, Any], ttl_s: int) -> None:
        """Keep a beat's summary of its last period for ``status`` to show, and add it to
        the deployment's last hour of summaries (:mod:`.activity_log`), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        pipe.set(self.keys.activity(beat_id), json.dumps(summary), ex=ttl_s)
        log_summary(pipe, self.keys, beat_id, summary)
        pipe.execute()

    @translated
    def deregister(self, beat_id: str) -> None:
        self.client.zrem(self.keys.beats, beat_id)

    @translated
    def repair(self, name: str, score: str, by: str) -> str:
        """Put an entry whose score is not a valid time back on its schedule, from its
        definition (a corrupt one is set aside); returns what was done, for the log."""
        scripts = self.shard(name)
        raw = text_or_none(self.client.hget(scripts.keys.entries, wire(name)))
        due: int | None = None
        if raw is not None:
            try:
                entry = Entry.loads(raw, name).with_default_tz(self.timezone)
            except CorruptEntry as exc:
                self.quarantine(name, raw, str(exc), by)
                return f"its definition is corrupt and was set aside: {exc}"
            due = entry.first_due_ms(self.now_ms(), self.timezone)
        if not scripts.repair(name, score, due):
            return "its score changed meanwhile; left as it is"
        if raw is None:
            return "it has no definition: taken off the schedule"
        if due is None:
            return "taken off the schedule (nothing left to run)"
        return f"rescheduled from its definition to {from_ms(due).isoformat()}"


def _merged(results: list[FinishResult], next_due_ms: int | None) -> FinishResult:
    """One result for a batch finished on several shards."""
    if len(results) == 1:
        return replace(results[0], next_due_ms=next_due_ms)
    return FinishResult(
        sum(r.finished for r in results),
        min(r.now_ms for r in results),
        next_due_ms,
        tuple(name for r in results for name in r.quarantined),
        {name: what for r in results for name, what in r.garbled.items()},
        {name: n for r in results for name, n in r.paused_missed.items()},
    )


def _bared(outcome: Outcome) -> Outcome:
    """The outcome under the name Redis keeps (a delayed task's without its mark)."""
    name = outcome.name
    return replace(outcome, name=bare(name)) if name.startswith(DELAYED_MARK) else outcome
