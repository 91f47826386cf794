"""Reading entries and their live state, from every shard: what editors and the admin show.

Reads never raise for data redisbeat did not write: such an entry reads with its problem.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, cast

from ..errors import CorruptEntry, EntryNotFound
from ..schedule.clock import MAX_MS
from ..schedule.entry import Entry
from .base import StoreBase
from .errors import translated
from .keys import Keys
from .records import BeatInfo, text, wire
from .run_state import EntryState, Quarantined

log = logging.getLogger(__name__)

#: How many entries one page of a scan asks for.
CHUNK = 1000


class EntryReads(StoreBase):
    """Entries, their run state, the live beats and what is set aside."""

    @translated
    def get(self, name: str) -> Entry:
        raw = self.client.hget(self.shard(name).keys.entries, wire(name))
        if raw is None:
            raise EntryNotFound(name)
        return Entry.loads(raw, name)

    @translated
    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return bool(self.client.hexists(self.shard(name).keys.entries, wire(name)))

    @translated
    def __len__(self) -> int:
        return sum(int(n) for n in self._each_shard(lambda pipe, keys: pipe.hlen(keys.entries)))

    @translated
    def __iter__(self) -> Iterator[Entry]:
        """Every loadable entry (corrupt ones are logged and skipped), scanned in pages."""
        for shard in self.all_shards():
            for name, raw in self.client.hscan_iter(shard.keys.entries, count=CHUNK):
                try:
                    yield Entry.loads(raw, name)
                except CorruptEntry as exc:
                    log.warning("redisbeat: skipping corrupt entry: %s", exc)

    @translated
    def names(self, source: str) -> set[str]:
        """Names of the entries a source owns."""
        found = self._each_shard(lambda pipe, keys: pipe.smembers(keys.source(source)))
        return {text(n) for names in found for n in names}

    @translated
    def count_source(self, source: str) -> int:
        """How many entries a source owns, by its index of names (no names read)."""
        found = self._each_shard(lambda pipe, keys: pipe.scard(keys.source(source)))
        return sum(int(n) for n in found)

    @translated
    def state(self, name: str) -> EntryState:
        states = self.states([name])
        if not states[0].next_run_at and not states[0].quarantined and name not in self:
            raise EntryNotFound(name)
        return states[0]

    @translated
    def states(self, names: list[str]) -> list[EntryState]:
        """Run state of many entries in one round trip."""
        if not names:
            return []
        groups: dict[int, list[str]] = {}
        for name, index in self.located(names).items():
            groups.setdefault(index, []).append(name)
        pipe = self.client.pipeline(transaction=False)
        for index, group in groups.items():
            keys, sent = self.all_shards()[index].keys, [wire(n) for n in group]
            pipe.zmscore(keys.schedule, sent)  # type: ignore[arg-type]  # bytes are members too
            pipe.hmget(keys.state, sent)
            pipe.hmget(keys.inflight, sent)
            pipe.hmget(keys.quarantine, sent)
        replies = iter(pipe.execute())
        found: dict[str, EntryState] = {}
        for group in groups.values():
            scores, states, claims, set_aside = (next(replies) for _ in range(4))
            for n, sc, st, cl, q in zip(group, scores, states, claims, set_aside, strict=False):
                found[n] = EntryState.from_redis(
                    n, sc, st, cl, Quarantined.from_redis(n, q) if q else None
                )
        return [found[name] for name in names]

    @translated
    def beats(self) -> list[BeatInfo]:
        """Beats whose last heartbeat is recent enough to count as alive."""
        now = self.now_ms()
        # Up to the latest valid time: a score past it was not written by a beat.
        rows = self.client.zrangebyscore(
            self.keys.beats, now - self.beat_ttl_ms, MAX_MS, withscores=True
        )
        pairs = cast("list[tuple[Any, Any]]", rows)  # redis-py types this loosely
        return [BeatInfo.from_heartbeat(text(beat_id), int(score)) for beat_id, score in pairs]

    @translated
    def quarantined(self) -> dict[str, Quarantined]:
        """Every definition set aside, with why (a record redisbeat did not write says so)."""
        return {
            text(key): Quarantined.from_redis(text(key), text(raw))
            for rows in self._each_shard(lambda pipe, keys: pipe.hgetall(keys.quarantine))
            for key, raw in rows.items()
        }

    @translated
    def schedule_lost(self) -> bool:
        """Whether a shard holds definitions but no schedule at all: its schedule key was
        deleted (nothing redisbeat does empties it while enabled entries have runs left). A
        key of the wrong type counts as neither: the scripts name it."""
        counts = self._each_shard(
            lambda pipe, keys: (pipe.hlen(keys.entries), pipe.zcard(keys.schedule)),
            raise_on_error=False,
        )
        pairs = zip(counts[::2], counts[1::2], strict=True)
        return any(isinstance(n, int) and n > 0 and m == 0 for n, m in pairs)

    @translated
    def wrong_types(self) -> list[tuple[str, str, str]]:
        """The keys of the deployment holding another type than redisbeat keeps there, as
        (key, the type found, the type redisbeat keeps); a key that does not exist is fine."""
        expected = [item for shard in self.all_shards() for item in shard.keys.typed().items()]
        found = self._each_shard(lambda pipe, keys: [pipe.type(key) for key in keys.typed()])
        return [
            (key, text(kind), want)
            for (key, want), kind in zip(expected, found, strict=True)
            if text(kind) not in ("none", want)
        ]

    def _each_shard(
        self, read: Callable[[Any, Keys], Any], raise_on_error: bool = True
    ) -> list[Any]:
        """One read per shard, pipelined (on a cluster, one round trip per node); without
        ``raise_on_error``, a command's error is its reply."""
        pipe = self.client.pipeline(transaction=False)
        for shard in self.all_shards():
            read(pipe, shard.keys)
        return list(pipe.execute(raise_on_error=raise_on_error))
