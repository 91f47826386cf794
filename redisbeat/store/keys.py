"""The only place redisbeat spells Redis key names.

Every key of one deployment shares the ``{prefix}`` hash tag, so all of them sit in one
Redis Cluster slot and one Lua script may touch them together.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    prefix: str = "redisbeat"

    def _key(self, name: str) -> str:
        return f"{{{self.prefix}}}:{name}"

    @property
    def schedule(self) -> str:
        """ZSET: entry name -> next due time (ms since the epoch, Redis clock)."""
        return self._key("schedule")

    @property
    def entries(self) -> str:
        """HASH: entry name -> JSON definition."""
        return self._key("entries")

    @property
    def state(self) -> str:
        """HASH: entry name -> JSON run state (last run, count, last task id, last beat)."""
        return self._key("state")

    @property
    def inflight(self) -> str:
        """HASH: entry name -> JSON claim {due, beat, lease_until} not yet finished."""
        return self._key("inflight")

    @property
    def beats(self) -> str:
        """ZSET: beat instance id -> last heartbeat (ms)."""
        return self._key("beats")

    @property
    def quarantine(self) -> str:
        """HASH: entry name -> JSON {definition, error, at} for definitions that failed to load."""
        return self._key("quarantine")

    @property
    def config(self) -> str:
        """HASH: which ``beat_schedule`` the deployment follows (version, entries' digests)."""
        return self._key("config")

    @property
    def events(self) -> str:
        """Pub/sub channel: a message wakes every beat (an entry was added or changed)."""
        return self._key("events")

    def source(self, source: str) -> str:
        """SET: names of the entries a source (config, django, api, ...) owns."""
        return self._key(f"source:{source}")
