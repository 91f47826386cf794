"""The only place redisbeat spells Redis key names.

A deployment's entries are split over ``redisbeat_shards`` shards by a stable hash of their
name. The keys of one shard share a hash tag (``{prefix}`` for shard 0, ``{prefix:i}`` for
shard i), so each shard sits in one Redis Cluster slot and one Lua script may touch its keys
together; the deployment's own keys (beats, config, layout, events) share shard 0's tag.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

#: Inside a beat, the name of a claim on a delayed task is its key after this mark, so the
#: two lanes never mix: an entry's name is printable, and never starts with it.
DELAYED_MARK = "\x1f"


def lane_of(name: str) -> str:
    """Which lane a claim's name is from: ``delayed`` or ``periodic``."""
    return "delayed" if name.startswith(DELAYED_MARK) else "periodic"


def bare(name: str) -> str:
    """The name as Redis keeps it (a delayed task's key without the mark)."""
    return name[1:] if name.startswith(DELAYED_MARK) else name


def shard_of(name: str, shards: int) -> int:
    """The shard an entry lives in: the same in every process and Python version."""
    if shards == 1:
        return 0
    return zlib.crc32(name.encode("utf-8", "surrogateescape")) % shards


@dataclass(frozen=True)
class Keys:
    prefix: str = "redisbeat"
    #: The shard whose entry keys these are (the deployment's own keys are shard 0's).
    shard: int = 0
    #: Whose schedule the claim keys (:attr:`schedule`, :attr:`entries`, :attr:`inflight`,
    #: :attr:`quarantine`) are: the periodic entries', or the delayed tasks' (a beat claims
    #: both with the same scripts).
    lane: str = "periodic"

    def of_shard(self, shard: int) -> Keys:
        return replace(self, shard=shard)

    def of_lane(self, lane: str) -> Keys:
        return replace(self, lane=lane)

    def _lane_key(self, name: str) -> str:
        return self._key(name if self.lane == "periodic" else f"{self.lane}:{name}")

    def _key(self, name: str) -> str:
        tag = self.prefix if self.shard == 0 else f"{self.prefix}:{self.shard}"
        return f"{{{tag}}}:{name}"

    def _deployment_key(self, name: str) -> str:
        return f"{{{self.prefix}}}:{name}"

    @property
    def schedule(self) -> str:
        """ZSET: entry name -> next due time (ms since the epoch, Redis clock)."""
        return self.delayed if self.lane == "delayed" else self._key("schedule")

    @property
    def entries(self) -> str:
        """HASH: entry name -> JSON definition."""
        return self.delayed_tasks if self.lane == "delayed" else self._key("entries")

    @property
    def state(self) -> str:
        """HASH: entry name -> JSON run state (last run, count, last task id, last beat)."""
        return self._lane_key("state")

    @property
    def inflight(self) -> str:
        """HASH: entry name -> JSON claim {due, beat, lease_until} not yet finished."""
        return self._lane_key("inflight")

    @property
    def spent(self) -> str:
        """ZSET: entry name -> when a beat took it off the schedule for good (ms): a one-off,
        a ``Clocked`` entry or one past its end, once sent. Swept after
        ``redisbeat_spent_retention_seconds``."""
        return self._key("spent")

    @property
    def history_prefix(self) -> str:
        """The start of an entry's history key: the finish script adds the name to it."""
        return self._key("history:")

    def history(self, name: str) -> str:
        """LIST, newest first: an entry's last sends (JSON, pushed by the finish) and, with the
        worker hook, what became of their runs (JSON, pushed by the worker)."""
        return self.history_prefix + name

    @property
    def running(self) -> str:
        """HASH: entry name -> JSON {task_id, due, started, worker, until} of its run going on
        a worker now (the worker hook's; ``until``: when it stops counting as running)."""
        return self._key("running")

    @property
    def not_started(self) -> str:
        """HASH: ``<outcome>:<task>`` -> how many runs of that task, sent from this shard
        (an entry's or a delayed task's), the workers with the hook could not start
        (``unregistered``, ``rejected``); the beats' metrics add up every shard's."""
        return self._key("not-started")

    def seen(self, task_id: str, retries: int = 0) -> str:
        """STRING, expiring: what the workers know of one try of a task redisbeat sent (the
        worker hook's duplicate check, in the entry's shard): JSON {stage, tag, worker, at}."""
        return self._key(f"seen:{task_id}" + (f":{retries}" if retries else ""))

    @property
    def beats(self) -> str:
        """ZSET: beat instance id -> last heartbeat (ms)."""
        return self._deployment_key("beats")

    def activity(self, beat_id: str) -> str:
        """STRING: what a beat did in its last minute (sent, lateness, recovered), JSON;
        it expires on its own once the beat stops writing it."""
        return self._deployment_key(f"activity:{beat_id}")

    @property
    def activity_log(self) -> str:
        """STREAM, capped, expiring: every beat's summaries of the last hour or so, each an
        entry {beat, sent, late_p99_ms, missed, ...} whose id is the Redis clock when it was
        recorded (:mod:`.activity_log`)."""
        return self._deployment_key("activity-log")

    @property
    def quarantine(self) -> str:
        """HASH: entry name -> JSON {definition, error, at} for definitions that failed to load."""
        return self._lane_key("quarantine")

    @property
    def config(self) -> str:
        """HASH: which ``beat_schedule`` the deployment follows (version, entries' digests)."""
        return self._deployment_key("config")

    @property
    def events(self) -> str:
        """Pub/sub channel: a message wakes every beat (an entry was added or changed)."""
        return self._deployment_key("events")

    def source(self, source: str) -> str:
        """SET: names of the entries a source (config, django, api, ...) owns."""
        return self._key(f"source:{source}")

    @property
    def layout(self) -> str:
        """HASH: how the deployment is split (``shards``: the count its entries use;
        ``moving_to``: the count a reshard is moving them to), and ``format``: the version
        of the stored format (:mod:`.formats`)."""
        return self._deployment_key("layout")

    @property
    def shard_layout(self) -> str:
        """HASH: the layout as this shard knows it (shard 0's is :attr:`layout`): the write
        scripts compare it with the writer's, in the same atomic step as the write."""
        return self._key("layout")

    @property
    def moving(self) -> str:
        """HASH: entry name (or, in the delayed lane, task key) -> JSON of all it had in this
        shard, while a reshard moves it."""
        return self._lane_key("moving")

    @property
    def arrived(self) -> str:
        """HASH: entry name (or task key) -> 1 for what a reshard has moved into this shard
        (so that a move repeated after an interruption never writes it twice); ``h`` for an
        entry whose history is still to come (an editor moved it, without lists)."""
        return self._lane_key("arrived")

    def typed(self) -> dict[str, str]:
        """The shard's keys whose names are fixed, each with the type it holds (as ``TYPE``
        names it): what a stray write by hand can break."""
        hashes = [self.entries, self.state, self.inflight, self.quarantine, self.running]
        hashes += [self.not_started, self.shard_layout, self.moving, self.arrived]
        hashes += [self.delayed_tasks, self.delayed_inflight, self.delayed_quarantine]
        hashes += [self.delayed_moving, self.delayed_arrived]
        typed = dict.fromkeys([self.schedule, self.spent, self.delayed], "zset")
        typed |= dict.fromkeys(hashes, "hash")
        if self.shard == 0:
            typed |= {self.beats: "zset", self.config: "hash", self.activity_log: "stream"}
        return typed

    # -- delayed one-off tasks (each shard has its own) ------------------------------------

    @property
    def delayed(self) -> str:
        """ZSET: delayed task key -> due time (ms, Redis clock); a claimed one's lease."""
        return self._key("delayed")

    @property
    def delayed_tasks(self) -> str:
        """HASH: delayed task key -> JSON {task, args, kwargs, options, owner}."""
        return self._key("delayed:tasks")

    @property
    def delayed_inflight(self) -> str:
        """HASH: delayed task key -> JSON claim {due, at, beat, lease_until} not finished."""
        return self.of_lane("delayed").inflight

    @property
    def delayed_quarantine(self) -> str:
        """HASH: delayed task key -> JSON {definition, error, at} for records that failed
        to load."""
        return self.of_lane("delayed").quarantine

    @property
    def delayed_moving(self) -> str:
        """HASH: delayed task key -> JSON of its records, while a reshard moves it."""
        return self.of_lane("delayed").moving

    @property
    def delayed_arrived(self) -> str:
        """HASH: delayed task key -> 1, for tasks a reshard has moved into this shard."""
        return self.of_lane("delayed").arrived

    @property
    def delayed_owner_prefix(self) -> str:
        """The start of an owner's index key: the scripts add the owner to it."""
        return self._key("delayed:owner:")

    def delayed_owner(self, owner: str) -> str:
        """ZSET: the keys of an owner's pending delayed tasks in this shard -> due time."""
        return self.delayed_owner_prefix + owner

    @property
    def delayed_done_prefix(self) -> str:
        """The start of a sent task's record key: the scripts add the task's key to it."""
        return self._key("delayed:done:")

    def delayed_done(self, key: str) -> str:
        """STRING, expiring: what became of a delayed task once sent (or cancelled by
        failure): JSON {task_id, due, at, beat, outcome}."""
        return self.delayed_done_prefix + key
