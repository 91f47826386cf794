"""Changing a live deployment's shard count: ``redisbeat reshard N``.

The steps, each safe to repeat (the command run again after an interruption finishes the
move it began):

1. Every shard that may hold entries records the move (``4>8``), shard 0's record last:
   from then on, a writer that followed the old layout is refused by the write script and
   reads the layout again, so no entry is written where it no longer lives.
2. Wait until every live beat has had a heartbeat since: a beat learns the layout there, and
   then claims from the shards of both counts. Claims stay exactly-once throughout: an entry
   is on one shard's schedule at a time, or on none while it moves (for moments).
3. Move each entry whose shard changes (:func:`~.moving.move`); an entry a beat has claimed
   is moved once its beat has finished it.
4. Every shard records the new count, shard 0's last; beats drop the shards they no longer
   need at their next heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..errors import ConfigurationError, RedisBeatError
from .base import StoreBase
from .errors import translated
from .moving import move
from .records import text
from .shards import Layout

log = logging.getLogger(__name__)

#: Entries moved per round of scripts (each shard's scripts take them together).
BATCH = 500
#: How long a claimed entry may keep a reshard waiting, past the longest lease a beat holds.
CLAIM_PAUSE = 0.1


@dataclass
class ReshardReport:
    before: int
    after: int
    moved: int = 0
    #: Beats that had no heartbeat in time to confirm the move (they were stopping, or
    #: stalled): until they have one, they claim only from the shards they knew.
    unconfirmed: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Reshard:
    """Moves one deployment's entries to a new shard count (see the module's steps)."""

    def __init__(self, store: StoreBase, *, say: Callable[[str], None] = log.info) -> None:
        self.store = store
        self.say = say

    @translated
    def run(self, shards: int, *, claims_timeout: float = 300.0) -> ReshardReport:
        """Move to ``shards`` shards; ``claims_timeout`` seconds is how long entries that
        beats keep claimed may hold up the end (a stuck claim ends with its lease)."""
        started = time.monotonic()
        self.store.forget_layout()
        layout = self.store.layout
        if layout.moving_to not in (None, shards):
            raise ConfigurationError(
                f"a reshard of {self.store.keys.prefix!r} to {layout.moving_to} shards is under "
                f"way: finish it first (redisbeat reshard {layout.moving_to})"
            )
        report = ReshardReport(layout.shards, shards)
        if layout.shards != shards and layout.moving_to is None:
            self._refuse_with_delayed_tasks(layout)
        if layout.shards == shards:
            self.say(f"{self.store.keys.layout}: already {shards} shard(s); nothing to move")
            return report
        layout = self._begin(Layout(layout.shards, shards))
        report.unconfirmed = self._wait_for_beats()
        report.moved = self._move_all(layout, started + claims_timeout)
        self._end(layout)
        report.seconds = time.monotonic() - started
        self.say(
            f"{self.store.keys.layout}: {report.before} -> {report.after} shard(s), "
            f"{report.moved} entries moved in {report.seconds:.1f} s"
        )
        return report

    def _refuse_with_delayed_tasks(self, layout: Layout) -> None:
        """Delayed tasks stay in the shard their key hashes to under the count they were
        written with: a reshard waits until none is pending."""
        pipe = self.store.client.pipeline(transaction=False)
        for shard in range(layout.shards):
            pipe.zcard(self.store.keys.of_shard(shard).delayed)
        pending = sum(pipe.execute())
        if pending:
            raise ConfigurationError(
                f"{pending} delayed task(s) of {self.store.keys.prefix!r} are pending: a reshard "
                "moves periodic entries only; run it once they are sent or cancelled"
            )

    def _begin(self, layout: Layout) -> Layout:
        self._mark(layout, {"shards": layout.shards, "moving_to": layout.moving_to or 0})
        recorded = self.store.scripts.layout("begin", layout.moving_to or layout.shards)
        if recorded != layout:
            raise ConfigurationError(f"{self.store.keys.layout} changed meanwhile: {recorded}")
        self.store.follow(recorded)
        self.say(f"{self.store.keys.layout}: moving from {layout.spelled.replace('>', ' to ')}")
        return recorded

    def _end(self, layout: Layout) -> None:
        after = layout.moving_to or layout.shards
        self._mark(layout, {"shards": after}, drop=True)
        client = self.store.client
        for scripts in self.store.shard_scripts[: layout.span]:
            client.delete(scripts.keys.arrived)
        self.store.follow(self.store.scripts.layout("end", after))

    def _mark(self, layout: Layout, fields: dict[str, int], *, drop: bool = False) -> None:
        """Write every shard's own layout record but shard 0's (the deployment's, which its
        script writes last, so that a writer who read it finds each shard already marked)."""
        pipe = self.store.client.pipeline(transaction=False)
        for index in range(1, layout.span):
            key = self.store.keys.of_shard(index).shard_layout
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            if drop:
                pipe.hdel(key, "moving_to")
        pipe.execute()

    def _wait_for_beats(self) -> list[str]:
        """Until every live beat has had a heartbeat since the move began (it then claims
        from both counts' shards); the beats still silent after a heartbeat's time to live."""
        store = self.store
        since = store.now_ms()
        deadline = time.monotonic() + store.beat_ttl_ms / 1000
        while True:
            beats: Any = store.client.zrange(store.keys.beats, 0, -1, withscores=True)
            behind = [text(name) for name, score in beats if float(score) < since]
            if not behind or time.monotonic() > deadline:
                if behind:
                    self.say(f"beats without a heartbeat since the move began: {behind}")
                return behind
            time.sleep(0.05)

    def _move_all(self, layout: Layout, deadline: float) -> int:
        moved = 0
        while True:
            claimed = 0
            for origin in range(layout.shards):
                for names in _batches(self._names_in(origin, layout)):
                    where = move(self.store, names, layout)
                    moved += sum(1 for w in where.values() if w == "home")
                    claimed += sum(1 for w in where.values() if w == "claimed")
            if not claimed:
                return moved
            if time.monotonic() > deadline:
                raise RedisBeatError(
                    f"{claimed} entries stayed claimed by beats; run the reshard again to "
                    "finish the move (the deployment keeps working meanwhile)"
                )
            time.sleep(CLAIM_PAUSE)

    def _names_in(self, origin: int, layout: Layout) -> list[str]:
        """The names shard ``origin`` holds anything of, whose new count puts elsewhere."""
        keys = self.store.keys.of_shard(origin)
        client = self.store.client
        names = {text(n) for n, _ in client.hscan_iter(keys.entries, count=1000)}
        names |= {text(n) for n, _ in client.zscan_iter(keys.schedule, count=1000)}
        for key in (keys.quarantine, keys.moving):
            names |= {text(n) for n, _ in client.hscan_iter(key, count=1000)}
        return sorted(n for n in names if layout.home(n) != origin)


def _batches(names: list[str]) -> Iterator[list[str]]:
    iterator = iter(names)
    while batch := list(islice(iterator, BATCH)):
        yield batch
