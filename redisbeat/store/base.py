"""What every part of the store shares: the client, the key names, the scripts, replication."""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import Sentinel

from ..config import Config
from ..errors import ConfigurationError
from .client import connect, describe
from .errors import translated
from .keys import Keys
from .replication import Replicas
from .scripts import Runner, Scripts


class StoreBase:
    """A Redis client with redisbeat's keys and scripts; the store's parts build on it."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = "redisbeat",
        timezone: str = "UTC",
        beat_ttl: float = 30.0,
        wait_replicas: int = 0,
        wait_timeout: float = 0.5,
    ) -> None:
        if not client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ConfigurationError(
                "ScheduleStore needs a Redis client made with decode_responses=True"
            )
        self.client = client
        self.keys = Keys(prefix)
        self.timezone = timezone
        self.beat_ttl_ms = int(beat_ttl * 1000)
        #: WAIT for this many replicas after each write of a claim, finish or API call.
        self.replicas = Replicas(
            client, wait_replicas, wait_timeout, self.describe, self._drop_subscription
        )
        self.scripts = Scripts(Runner(client, self.replicas), self.keys)
        self._pubsub: Any = None
        #: The Sentinel client from_config made (closed with the store).
        self._sentinel: Sentinel | None = None

    @classmethod
    def from_config(cls, config: Config) -> Any:
        client, sentinel = connect(config)
        store = cls(
            client,
            prefix=config.key_prefix,
            timezone=config.timezone,
            beat_ttl=3 * config.heartbeat_seconds,
            wait_replicas=config.wait_replicas,
            wait_timeout=config.wait_timeout,
        )
        store._sentinel = sentinel
        return store

    def describe(self) -> str:
        """Where the store lives, for log lines (no password)."""
        return f"{describe(self.client)} prefix={self.keys.prefix}"

    @translated
    def now_ms(self) -> int:
        """The Redis server's clock, the one clock every beat shares."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    @translated
    def close(self) -> None:
        self._drop_subscription()
        self.client.close()
        if self._sentinel is not None:
            self._sentinel.close()
            self._sentinel = None

    def _drop_subscription(self) -> None:
        if self._pubsub is not None:
            self._pubsub.close()
            self._pubsub = None
