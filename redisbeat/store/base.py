"""What every part of the store shares: the client, the key names, the scripts, replication."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from ..config import MAX_SHARDS, Config
from ..errors import ConfigurationError, RedisBeatError
from ..schedule.entry import Entry
from ..schedule.kinds import DST_FOLD_POLICIES, DST_GAP_POLICIES
from .client import Connection
from .errors import LayoutChanged, translated
from .keys import Keys
from .persistence import volatile
from .records import wire
from .replication import Replicas
from .runner import Runner
from .scripts import Scripts
from .shards import Layout, ShardCursor

log = logging.getLogger(__name__)

#: A write whose layout changed is tried again this often, this many seconds apart: a
#: reshard changes each shard's record one after the other, within moments.
MAX_LAYOUT_ATTEMPTS = 100
LAYOUT_PAUSE = 0.02

T = TypeVar("T")


class StoreBase:
    """A Redis client with redisbeat's keys and scripts; the store's parts build on it."""

    #: How many runs each entry's history keeps (0: none; ``redisbeat_history_size``), and
    #: the longest a run counts as running when its worker never says it ended.
    history_size = 0
    run_expiry_ms = 3_600_000
    #: How long a worker remembers a run it received, started or ended, to drop copies of
    #: it (``redisbeat_duplicate_window_seconds``; 0: it does not check).
    duplicate_window_ms = 600_000

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
        delayed_retention: float = 86_400.0,
        spent_retention: float = 86_400.0,
        dst_gap: str = "shift",
        dst_fold: str = "once",
    ) -> None:
        self.connection = client if isinstance(client, Connection) else Connection(client)
        if not self.connection.decodes_responses():
            raise ConfigurationError(
                "ScheduleStore needs a Redis client made with decode_responses=True"
            )
        self.keys = Keys(prefix)
        self.timezone = timezone
        #: The DST policies a Crontab or Cron written without its own gets (as ``timezone``
        #: is its zone): what is stored says how it runs.
        self.dst_gap, self.dst_fold = _dst_policies(dst_gap, dst_fold)
        self.beat_ttl_ms = int(beat_ttl * 1000)
        #: WAIT for this many replicas after each write of a claim, finish or API call.
        self.replicas = Replicas(
            self.connection, wait_replicas, wait_timeout, self.describe, self._drop_subscription
        )
        self.runner = Runner(self.connection, self.replicas)
        #: The count this process was configured with: recorded for a new deployment; an
        #: existing one keeps the count it records (see :meth:`follow`).
        self.configured_shards = shards
        #: One set of script wrappers per shard, each with that shard's keys.
        self.shard_scripts = [Scripts(self.runner, self.keys.of_shard(i)) for i in range(shards)]
        #: The same scripts on each shard's delayed tasks (a beat claims both lanes).
        self.delayed_lane = [self._delayed_lane(i) for i in range(shards)]
        self.delayed_cursor = ShardCursor(shards, at_least_one=False)
        #: How long a sent delayed task's outcome, and a spent store API entry, are kept.
        self.delayed_retention_ms = int(delayed_retention * 1000)
        self.spent_retention_ms = int(spent_retention * 1000)
        #: Shard 0's: its keys are also the deployment's own (beats, config, layout, events).
        self.scripts = self.shard_scripts[0]
        self.cursor = ShardCursor(shards)
        self._layout: Layout | None = None
        self._told_layout = False
        self._init_beat_state()

    def _init_beat_state(self) -> None:
        """What a beat keeps between its calls (an editor keeps none of it)."""
        #: A beat's claims not yet finished: entry name -> the shard it was claimed from.
        self._claimed: dict[str, int] = {}
        #: Per lane and shard, the lease_until of this beat's claims there (each shard's
        #: clock sets it).
        self._leases: dict[tuple[str, int], int] = {}
        self._pubsub: Any = None
        #: Changes a beat took off its subscription mid-batch (:meth:`changed_names`), still
        #: to be reported as a change.
        self._taken = False

    @classmethod
    def from_config(cls, config: Config) -> Any:
        store = cls(
            Connection.from_config(config),
            prefix=config.key_prefix,
            timezone=config.timezone,
            beat_ttl=3 * config.heartbeat_seconds,
            wait_replicas=config.wait_replicas,
            wait_timeout=config.wait_timeout,
            shards=config.shards,
            delayed_retention=config.delayed_retention_seconds,
            spent_retention=config.spent_retention_seconds,
            dst_gap=config.dst_gap,
            dst_fold=config.dst_fold,
        )
        store.history_size = config.history_size
        store.run_expiry_ms = int(config.run_expiry_seconds * 1000)
        store.duplicate_window_ms = int(config.duplicate_window_seconds * 1000)
        return store

    def with_defaults(self, entry: Entry) -> Entry:
        """``entry`` as it is stored: its schedule's zone filled in, and the DST policies
        where the deployment's differ from the usual ones (which are stored as none)."""
        return entry.with_defaults(self.timezone, *usual_or(self.dst_gap, self.dst_fold))

    def mark_ms(self, op: str) -> int:
        """How long the duplicate check's mark of a run lasts from its ``start`` (while it may
        still be going on) or its ``end`` (0: the check is off)."""
        window = self.duplicate_window_ms
        if window <= 0:
            return 0
        return max(window, self.run_expiry_ms) if op == "start" else window

    @property
    def client(self) -> redis.Redis:
        """The Redis client (on a cluster, one that routes each key to its node)."""
        return self.connection.client

    @property
    def layout(self) -> Layout:
        """The layout this process follows: read from Redis at its first use, again when a
        write script says it changed, and at each heartbeat of a beat."""
        if self._layout is None:
            self.follow(self.scripts.layout("read", self.configured_shards))
        assert self._layout is not None
        return self._layout

    def follow(self, layout: Layout) -> None:
        """Work with the layout the deployment records: a reshard changes it under running
        processes, so the setting only sizes a new deployment."""
        if not all(1 <= n <= MAX_SHARDS for n in (layout.shards, layout.moving_to or 1)):
            raise ConfigurationError(
                f"{self.keys.layout} records {layout.spelled} shards, not a count from 1 to "
                f"{MAX_SHARDS}: it was not written by redisbeat"
            )
        if not self._told_layout and layout.shards != self.configured_shards:
            self._told_layout = True
            log.warning(
                "redisbeat: redisbeat_shards is %d, but deployment %r is split into %d "
                "shard(s) (%s): following the deployment; set redisbeat_shards = %d to match",
                self.configured_shards,
                self.keys.prefix,
                layout.shards,
                self.keys.layout,
                layout.shards,
            )
        for index in range(len(self.shard_scripts), layout.span):
            self.shard_scripts.append(Scripts(self.runner, self.keys.of_shard(index)))
            self.delayed_lane.append(self._delayed_lane(index))
        self.cursor.resize(layout.span)
        self.delayed_cursor.resize(layout.span)
        self._layout = layout

    def _with_layout(self, call: Callable[[Layout], T]) -> T:
        """``call(layout)``, again with the layout read anew while a write script says the
        writer followed one a reshard has changed since (it begins and ends in moments)."""
        for _ in range(MAX_LAYOUT_ATTEMPTS):
            try:
                return call(self.layout)
            except LayoutChanged:
                self.forget_layout()
                time.sleep(LAYOUT_PAUSE)
        raise RedisBeatError(f"the shard layout of {self.keys.layout} kept changing")

    def _delayed_lane(self, shard: int) -> Scripts:
        return Scripts(self.runner, self.keys.of_shard(shard).of_lane("delayed"))

    def forget_layout(self) -> None:
        """A write script found another layout: read it again before the next call."""
        self._layout = None

    def shard(self, name: str) -> Scripts:
        """The scripts (and keys) of the shard ``name`` lives in; while a reshard runs, the
        new one if the entry is there, else the old one."""
        return self.shard_scripts[self.located([name])[name]]

    def located(self, names: list[str]) -> dict[str, int]:
        """Each name's shard, as :meth:`shard` finds it, in one round trip."""
        layout = self.layout
        if layout.moving_to is None:
            return {name: layout.home(name) for name in names}
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hexists(self.shard_scripts[layout.home(name)].keys.entries, wire(name))
        there = pipe.execute()
        return {
            name: layout.home(name) if found else layout.origin(name)
            for name, found in zip(names, there, strict=True)
        }

    def all_shards(self) -> list[Scripts]:
        """Every shard that may hold entries (while a reshard runs: of both counts)."""
        return self.shard_scripts[: self.layout.span]

    def describe(self) -> str:
        """Where the store lives, for log lines (no password)."""
        return f"{self.connection.describe()} prefix={self.keys.prefix}"

    @property
    def where(self) -> str:
        """The Redis the store is in, as its errors name it: the URL, password masked."""
        return self.connection.target()

    @translated
    def volatile_servers(self) -> list[str]:
        """Each server of the store (each master of a cluster) that keeps nothing on disk,
        named without its password; none where the server will not say (:mod:`.persistence`)."""
        return volatile(self.connection)

    @translated
    def now_ms(self) -> int:
        """The Redis clock of the server holding the schedule, the one clock beats share."""
        seconds, micros = self.connection.on_node(
            self.keys.schedule, lambda node, _asking: node.time()
        )
        return int(seconds) * 1000 + int(micros) // 1000

    @translated
    def close(self) -> None:
        self._drop_subscription()
        self.connection.close()

    def _drop_subscription(self) -> None:
        if self._pubsub is not None:
            self._pubsub.close()
            self._pubsub = None


def usual_or(gap: str, fold: str) -> tuple[str | None, str | None]:
    """The DST policies to fill in: None for the usual ones ("shift", "once")."""
    return (None if gap == "shift" else gap), (None if fold == "once" else fold)


def _dst_policies(gap: str, fold: str) -> tuple[str, str]:
    if gap not in DST_GAP_POLICIES or fold not in DST_FOLD_POLICIES:
        raise ConfigurationError(
            f"dst_gap must be one of {DST_GAP_POLICIES} and dst_fold one of "
            f"{DST_FOLD_POLICIES}; got {gap!r} and {fold!r}"
        )
    return gap, fold
