"""Every Redis call redisbeat makes, and nothing else.

The editors' API (:mod:`.api`), what beats ask of Redis (:mod:`.beats`), the wake-up channel
(:mod:`.changes`), the connection and replication (:mod:`.client`, :mod:`.replication`), one
typed wrapper per Lua script (:mod:`.scripts`, ``lua/``) and the key names (:mod:`.keys`).
Redis and connection errors leave this package as :class:`~redisbeat.store.errors.StoreError`.
"""

from __future__ import annotations

from .api import ScheduleStore

__all__ = ["ScheduleStore"]
