"""Changing a live deployment's shard count: ``redisbeat reshard N``.

The steps, each safe to repeat (the command run again after an interruption finishes the
move it began):

1. Every shard that may hold entries records the move (``4>8``), shard 0's record last:
   from then on, a writer that followed the old layout is refused by the write script and
   reads the layout again, so no entry is written where it no longer lives.
2. Wait until every live beat has had a heartbeat since: a beat learns the layout there, and
   then claims from the shards of both counts. Claims stay exactly-once throughout: an entry
   is on one shard's schedule at a time, or on none while it moves (for moments).
3. Move each entry whose shard changes (:func:`~.moving.move`), with its history, running
   marker and spent time, and each pending delayed task whose shard changes
   (:func:`~.delayed_moving.move_delayed`), in batches; an entry or task a beat has claimed
   is moved once its beat has finished it. Then the histories an editor's move of an entry
   left behind (:func:`~.moving.histories_left`), and what became of the tasks sent from
   a shard their key no longer hashes to (:func:`~.delayed_moving.move_sent_records`).
   Meanwhile writers keep writing: each moves what it writes first
   (:func:`~.moving.placed`, :func:`~.delayed_moving.placed_delayed`).
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
from .delayed_moving import move_delayed, move_sent_records
from .errors import translated
from .moving import Where, histories_left, move
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
    #: Entries moved to another shard.
    moved: int = 0
    #: Pending delayed tasks moved to another shard.
    delayed: int = 0
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
        if layout.shards == shards:
            self.say(f"{self.store.keys.layout}: already {shards} shard(s); nothing to move")
            return report
        layout = self._begin(Layout(layout.shards, shards))
        report.unconfirmed = self._wait_for_beats()
        report.moved, report.delayed = self._move_all(layout, started + claims_timeout)
        move_sent_records(self.store, layout)
        self._end(layout)
        report.seconds = time.monotonic() - started
        self.say(
            f"{self.store.keys.layout}: {report.before} -> {report.after} shard(s), "
            f"{report.moved} entries and {report.delayed} delayed tasks moved in "
            f"{report.seconds:.1f} s"
        )
        return report

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
            client.delete(scripts.keys.arrived, scripts.keys.delayed_arrived)
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

    def _move_all(self, layout: Layout, deadline: float) -> tuple[int, int]:
        """Move every entry and delayed task whose shard changes; how many of each moved."""
        moved = {"periodic": 0, "delayed": 0}
        while True:
            claimed = 0
            for origin in range(layout.shards):
                for lane, mover in (("periodic", self._move), ("delayed", move_delayed)):
                    for names in _batches(self._names_in(origin, layout, lane)):
                        where = mover(self.store, names, layout)
                        moved[lane] += sum(w == "home" for w in where.values())
                        claimed += sum(w == "claimed" for w in where.values())
            if not claimed:
                break
            if time.monotonic() > deadline:
                raise RedisBeatError(
                    f"{claimed} entries or delayed tasks stayed claimed by beats; run the "
                    "reshard again to finish the move (the deployment keeps working meanwhile)"
                )
            time.sleep(CLAIM_PAUSE)
        # Once nothing is left in the old shards, no editor moves an entry any more.
        for shard in range(layout.span):
            for names in _batches(histories_left(self.store, shard)):
                self._move(self.store, names, layout)
        return moved["periodic"], moved["delayed"]

    @staticmethod
    def _move(store: StoreBase, names: list[str], layout: Layout) -> dict[str, Where]:
        return move(store, names, layout, lists=True)

    def _names_in(self, origin: int, layout: Layout, lane: str) -> list[str]:
        """The names (delayed task keys, for the delayed lane) shard ``origin`` holds
        anything of, whose new count puts elsewhere."""
        keys = self.store.keys.of_shard(origin).of_lane(lane)
        client = self.store.client
        hashes = [keys.entries, keys.quarantine, keys.moving]
        sets = [keys.schedule]
        if lane == "periodic":
            hashes.append(keys.running)
            sets.append(keys.spent)
        names = {text(n) for key in hashes for n, _ in client.hscan_iter(key, count=1000)}
        names |= {text(n) for key in sets for n, _ in client.zscan_iter(key, count=1000)}
        return sorted(n for n in names if layout.home(n) != origin)


def _batches(names: list[str]) -> Iterator[list[str]]:
    iterator = iter(names)
    while batch := list(islice(iterator, BATCH)):
        yield batch
