"""What every part of the store shares: the client, the key names, the scripts, replication."""

from __future__ import annotations

from typing import Any

import redis

from ..config import Config
from ..errors import ConfigurationError
from .client import Connection
from .errors import translated
from .keys import Keys, shard_of
from .replication import Replicas
from .scripts import Runner, Scripts
from .shards import ShardCursor


class StoreBase:
    """A Redis client with redisbeat's keys and scripts; the store's parts build on it."""

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "redisbeat",
        timezone: str = "UTC",
        beat_ttl: float = 30.0,
        wait_replicas: int = 0,
        wait_timeout: float = 0.5,
        shards: int = 1,
    ) -> None:
        self.connection = client if isinstance(client, Connection) else Connection(client)
        if not self.connection.decodes_responses():
            raise ConfigurationError(
                "ScheduleStore needs a Redis client made with decode_responses=True"
            )
        self.keys = Keys(prefix)
        self.timezone = timezone
        self.beat_ttl_ms = int(beat_ttl * 1000)
        #: WAIT for this many replicas after each write of a claim, finish or API call.
        self.replicas = Replicas(
            self.connection, wait_replicas, wait_timeout, self.describe, self._drop_subscription
        )
        runner = Runner(self.connection, self.replicas)
        self.shards = shards
        #: One set of script wrappers per shard, each with that shard's keys.
        self.shard_scripts = [Scripts(runner, self.keys.of_shard(i)) for i in range(shards)]
        #: Shard 0's: its keys are also the deployment's own (beats, config, layout, events).
        self.scripts = self.shard_scripts[0]
        self.cursor = ShardCursor(shards)
        self._layout_checked = False
        self._pubsub: Any = None

    @classmethod
    def from_config(cls, config: Config) -> Any:
        return cls(
            Connection.from_config(config),
            prefix=config.key_prefix,
            timezone=config.timezone,
            beat_ttl=3 * config.heartbeat_seconds,
            wait_replicas=config.wait_replicas,
            wait_timeout=config.wait_timeout,
            shards=config.shards,
        )

    @property
    def client(self) -> redis.Redis:
        """The Redis client (on a cluster, one that routes each key to its node)."""
        return self.connection.client

    def shard(self, name: str) -> Scripts:
        """The scripts (and keys) of the shard ``name`` lives in."""
        self.check_layout()
        return self.shard_scripts[shard_of(name, self.shards)]

    def all_shards(self) -> list[Scripts]:
        self.check_layout()
        return self.shard_scripts

    def check_layout(self) -> None:
        """Once per store: refuse to work on a deployment split into another number of
        shards, where entries would be looked for in the wrong place."""
        if self._layout_checked:
            return
        recorded = self.scripts.layout(self.shards)
        if recorded != self.shards:
            raise ConfigurationError(
                f"redisbeat_shards is {self.shards}, but the entries of deployment "
                f"{self.keys.prefix!r} are split into {recorded} shard(s) ({self.keys.layout}): "
                f"set redisbeat_shards = {recorded} everywhere this deployment is used"
            )
        self._layout_checked = True

    def describe(self) -> str:
        """Where the store lives, for log lines (no password)."""
        return f"{self.connection.describe()} prefix={self.keys.prefix}"

    @translated
    def now_ms(self) -> int:
        """The Redis clock of the server holding the schedule, the one clock beats share."""
        seconds, micros = self.connection.on_node(self.keys.schedule, lambda node: node.time())
        return int(seconds) * 1000 + int(micros) // 1000

    @translated
    def close(self) -> None:
        self._drop_subscription()
        self.connection.close()

    def _drop_subscription(self) -> None:
        if self._pubsub is not None:
            self._pubsub.close()
            self._pubsub = None
