"""What a beat asks of Redis: claims and their leases, finishing a batch, the heartbeat, the
``beat_schedule`` record, and mending what it finds broken on the way."""

from __future__ import annotations

import json

from ..errors import CorruptEntry
from ..schedule.clock import from_ms
from ..schedule.entry import Entry
from .base import StoreBase
from .errors import translated
from .records import ClaimBatch, ConfigMarker, FinishResult, Heartbeat, Outcome, text_or_none


class BeatCalls(StoreBase):
    """The beat protocol: each call is one Lua script, run atomically in Redis."""

    @translated
    def claim(self, beat_id: str, lease_ms: int, batch_size: int) -> ClaimBatch:
        return self.scripts.claim(beat_id, lease_ms, batch_size)

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
        return self.scripts.finish(beat_id, lease_until_ms, outcomes, quarantine_after)

    @translated
    def renew(self, beat_id: str, lease_until_ms: int, names: list[str], lease_ms: int) -> int:
        """Extend the claims on ``names`` this beat holds under ``lease_until_ms``; returns
        the new lease_until (from now, by the Redis clock)."""
        return self.scripts.renew(beat_id, lease_until_ms, names, lease_ms)

    @translated
    def expire_lost(self, beat_id: str, since_ms: int, lease_ms: int) -> int:
        """End now the leases of this beat's claims taken since ``since_ms`` whose reply it
        never got; returns how many. The beat must hold no claim it knows of."""
        return self.scripts.expire_lost(beat_id, since_ms + lease_ms, lease_ms)

    @translated
    def quarantine(self, name: str, definition: str, error: str, by: str) -> bool:
        """Set aside a definition that cannot be loaded, unless it changed meanwhile."""
        return self.scripts.quarantine(name, definition, error, by)

    @translated
    def heartbeat(self, beat_id: str) -> Heartbeat:
        """Refresh a beat's heartbeat; says which ``beat_schedule`` the deployment follows
        and which schedule members have a score past any valid time."""
        self.connection.refuse_cluster_node()  # once, at the first heartbeat that answers
        return self.scripts.heartbeat(beat_id, self.beat_ttl_ms)

    @translated
    def deregister(self, beat_id: str) -> None:
        self.client.zrem(self.keys.beats, beat_id)

    @translated
    def repair(self, name: str, score: str, by: str) -> str:
        """Put an entry whose score is not a valid time back on its schedule, from its
        definition (a corrupt one is set aside); returns what was done, for the log."""
        raw = text_or_none(self.client.hget(self.keys.entries, name))
        due: int | None = None
        if raw is not None:
            try:
                entry = Entry.loads(raw, name).with_default_tz(self.timezone)
            except CorruptEntry as exc:
                self.quarantine(name, raw, str(exc), by)
                return f"its definition is corrupt and was set aside: {exc}"
            due = entry.first_due_ms(self.now_ms(), self.timezone)
        if not self.scripts.repair(name, score, due):
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
