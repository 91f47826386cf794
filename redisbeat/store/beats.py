"""What a beat asks of Redis: claims and their leases, finishing a batch, the heartbeat, the
``beat_schedule`` record, and mending what it finds broken on the way."""

from __future__ import annotations

import json
from dataclasses import replace

from ..errors import CorruptEntry
from ..schedule.clock import MAX_MS, from_ms
from ..schedule.entry import Entry
from .base import StoreBase
from .errors import translated
from .records import (
    ClaimBatch,
    ConfigMarker,
    FinishResult,
    Heartbeat,
    Outcome,
    text,
    text_or_none,
)
from .scripts import Scripts
from .shards import Layout


class BeatCalls(StoreBase):
    """The beat protocol: each call is one Lua script, run atomically in Redis."""

    @translated
    def claim(self, beat_id: str, lease_ms: int, batch_size: int, ahead_ms: int = 0) -> ClaimBatch:
        """Claim from the shard due soonest what is due, and, on a deployment of one shard,
        what falls due within ``ahead_ms`` (the beat sends each when due); the batch says
        when the next claim is needed on any shard."""
        span = self.layout.span
        shard = self.cursor.pick() if span > 1 else 0
        # A batch held ahead would keep the other shards' due entries waiting behind it.
        ahead = ahead_ms if span == 1 else 0
        batch = self.shard_scripts[shard].claim(beat_id, lease_ms, batch_size, ahead)
        self.cursor.seen(shard, batch.next_due_ms)
        # Finishing, renewing and setting aside go where the claim was taken, whatever the
        # layout says by then.
        self._claimed.update((claim.name, shard) for claim in batch.claims)
        return replace(batch, next_due_ms=self.cursor.earliest(batch.now_ms))

    def _claimed_shard(self, name: str) -> Scripts:
        index = self._claimed.get(name)
        return self.shard(name) if index is None else self.shard_scripts[index]

    @translated
    def finish(
        self,
        beat_id: str,
        lease_until_ms: int,
        outcomes: list[Outcome],
        quarantine_after: int = 0,
    ) -> FinishResult:
        """Reschedule, record or hand back claimed entries (only those still this beat's).

        An entry whose sends failed ``quarantine_after`` times in a row is set aside.
        """
        if not outcomes:
            return self.scripts.finish(beat_id, lease_until_ms, outcomes, quarantine_after)
        scripts = self._claimed_shard(outcomes[0].name)  # a batch is one shard's claims
        result = scripts.finish(beat_id, lease_until_ms, outcomes, quarantine_after)
        for outcome in outcomes:
            self._claimed.pop(outcome.name, None)
        self.cursor.seen(scripts.keys.shard, result.next_due_ms)
        return replace(result, next_due_ms=self.cursor.earliest(result.now_ms))

    @translated
    def renew(self, beat_id: str, lease_until_ms: int, names: list[str], lease_ms: int) -> int:
        """Extend the claims on ``names`` this beat holds under ``lease_until_ms``; returns
        the new lease_until (from now, by the Redis clock)."""
        scripts = self._claimed_shard(names[0]) if names else self.scripts  # one batch: one shard
        return scripts.renew(beat_id, lease_until_ms, names, lease_ms)

    @translated
    def expire_lost(self, beat_id: str, since_ms: int, lease_ms: int) -> int:
        """End now the leases of this beat's claims taken since ``since_ms`` whose reply it
        never got; returns how many. The beat must hold no claim it knows of."""
        self._claimed.clear()
        return sum(
            scripts.expire_lost(beat_id, since_ms + lease_ms, lease_ms)
            for scripts in self.all_shards()
        )

    @translated
    def quarantine(self, name: str, definition: str, error: str, by: str) -> bool:
        """Set aside a definition that cannot be loaded, unless it changed meanwhile."""
        return self._claimed_shard(name).quarantine(name, definition, error, by)

    @translated
    def heartbeat(self, beat_id: str) -> Heartbeat:
        """Refresh a beat's heartbeat; says which ``beat_schedule`` the deployment follows
        and which schedule members have a score past any valid time."""
        self.connection.refuse_cluster_node()  # once, at the first heartbeat that answers
        beat = self.scripts.heartbeat(beat_id, self.beat_ttl_ms)  # and shard 0's schedule
        if beat.layout[0]:  # a reshard began or ended: claim from the shards it names
            self.follow(Layout.from_fields(*beat.layout))
        if self.layout.span == 1:
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
    def deregister(self, beat_id: str) -> None:
        self.client.zrem(self.keys.beats, beat_id)

    @translated
    def repair(self, name: str, score: str, by: str) -> str:
        """Put an entry whose score is not a valid time back on its schedule, from its
        definition (a corrupt one is set aside); returns what was done, for the log."""
        scripts = self.shard(name)
        raw = text_or_none(self.client.hget(scripts.keys.entries, name))
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

    # -- the beat_schedule the deployment follows ----------------------------------------------

    @translated
    def config_marker(self) -> ConfigMarker | None:
        """Which ``beat_schedule`` the deployment follows, or None."""
        fields = ("version", "at", "by", "entries", "previous", "applied")
        values = self.client.hmget(self.keys.config, fields)
        return ConfigMarker.from_fields([text_or_none(v) for v in values])

    @translated
    def config_version(self) -> str | None:
        """The version the record names, even a record :meth:`config_marker` cannot read."""
        return text_or_none(self.client.hget(self.keys.config, "version"))

    @translated
    def claim_config(
        self,
        read: str,
        version: str,
        beat_id: str,
        entries: dict[str, str],
        previous: dict[str, str] | None,
    ) -> bool:
        """Record a new ``beat_schedule`` (not yet applied) unless the version is no longer
        ``read`` ('' for none); True when recorded."""
        before = "" if previous is None else json.dumps(previous, sort_keys=True)
        return self.scripts.claim_config(
            read, version, beat_id, json.dumps(entries, sort_keys=True), before
        )

    @translated
    def config_applied(self, version: str) -> bool:
        """Record that the entries of ``version`` are written; False if it was replaced."""
        return self.scripts.config_applied(version)
