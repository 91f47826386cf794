"""Moving delayed tasks to the shard a new count puts them in, for a reshard (:mod:`.reshard`)
and for a writer who delays, reschedules or cancels a task while one runs.

The same three steps as an entry's move (:mod:`.moving`): the old shard sets the task's
records aside in its delayed moving hash and off its delayed schedule and owner's index (so
no beat claims it meanwhile), the new shard writes them, and the old shard forgets them. Each
step can be repeated, and a task written again in its new shard meanwhile is never
overwritten. A task a beat holds moves once the beat has finished it: sent, it leaves; handed
back, or replaced while held, it is pending again and moves. What became of a task sent
from its old shard (its expiring record, which ``get_delayed`` reads) moves too, at the end
(:func:`move_sent_records`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .base import StoreBase
from .keys import Keys
from .moving import Moves, Where, checked
from .records import text, wire
from .runner import Call, Runner, Script
from .shards import Layout

MOVE_OUT_DELAYED = Script.named("move_out_delayed")
MOVE_IN_DELAYED = Script.named("move_in_delayed")


@dataclass(frozen=True)
class Place:
    """Where to write a delayed task while a reshard runs: its shard, and whether a beat
    held it there when it was looked at (then the write must find it still held)."""

    shard: int
    held: bool = False


@dataclass(frozen=True)
class DelayedMoves:
    """One shard's delayed-task move scripts, each a step of :func:`move_delayed` (the last
    is the entries' :meth:`.Moves.forget`, on the delayed moving hash)."""

    runner: Runner
    keys: Keys

    def take_out(self, keys: list[str], layout: Layout) -> list[Any]:
        """Set aside each task's records: per key, their JSON, 1 (a beat holds it: later)
        or 0 (nothing here)."""
        k = self.keys
        script_keys = [
            k.delayed,
            k.delayed_tasks,
            k.delayed_inflight,
            k.delayed_quarantine,
            k.delayed_moving,
            k.shard_layout,
        ]
        args = [layout.spelled, k.delayed_owner_prefix, *(wire(key) for key in keys)]
        return checked(self.runner.run(Call(MOVE_OUT_DELAYED, script_keys, args), "strict"))

    def put_in(self, taken: dict[str, str], layout: Layout) -> list[Any]:
        k = self.keys
        script_keys = [k.delayed, k.delayed_tasks, k.delayed_quarantine, k.delayed_arrived]
        args: list[Any] = [layout.spelled, k.delayed_owner_prefix, k.events]
        for key, records in taken.items():
            args += [wire(key), records]
        call = Call(MOVE_IN_DELAYED, [*script_keys, k.shard_layout], args)
        return checked(self.runner.run(call, "strict"))


def move_delayed(store: StoreBase, keys: list[str], layout: Layout) -> dict[str, Where]:
    """Move each delayed task of ``keys`` to the shard ``layout``'s new count puts it in.

    Raises :class:`~.errors.LayoutChanged` when the reshard ended (or another began)
    meanwhile.
    """
    where: dict[str, Where] = {}
    origins: dict[int, list[str]] = {}
    for key in keys:
        if layout.origin(key) == layout.home(key):
            where[key] = "home"
        else:
            origins.setdefault(layout.origin(key), []).append(key)
    for origin, group in origins.items():
        source = DelayedMoves(store.runner, store.keys.of_shard(origin))
        taken: dict[str, str] = {}
        for key, reply in zip(group, source.take_out(group, layout), strict=True):
            if isinstance(reply, str):
                taken[key] = reply
            where[key] = "claimed" if reply == 1 else "absent" if reply == 0 else "home"
        targets: dict[int, dict[str, str]] = {}
        for key, records in taken.items():
            targets.setdefault(layout.home(key), {})[key] = records
        for home, arriving in targets.items():
            DelayedMoves(store.runner, store.keys.of_shard(home)).put_in(arriving, layout)
        if taken:
            lane = store.keys.of_shard(origin).of_lane("delayed")
            Moves(store.runner, lane).forget(taken, owned=False)
    return where


def placed_delayed(store: StoreBase, keys: list[str], layout: Layout) -> dict[str, Place]:
    """Where to write each delayed task: while a reshard runs, it is first moved to its new
    shard, unless a beat holds it (then it is written where it is, if the beat still holds
    it by then)."""
    if layout.moving_to is None:
        return {key: Place(layout.home(key)) for key in keys}
    where = move_delayed(store, keys, layout)
    return {
        key: Place(layout.origin(key), True) if where[key] == "claimed" else Place(layout.home(key))
        for key in keys
    }


def move_sent_records(store: StoreBase, layout: Layout, batch: int = 500) -> int:
    """Move what became of each task sent from a shard other than the one the new count
    puts its key in (an expiring record, kept for the rest of its time; a record written
    in the new shard meanwhile, of a later send, stays); returns how many moved."""
    moved = 0
    found = _sent_records(store, layout)
    while chunk := list(islice(found, batch)):
        pipe = store.client.pipeline(transaction=False)
        for old, _new in chunk:
            pipe.get(wire(old))
            pipe.pttl(wire(old))
        replies = pipe.execute()
        pipe = store.client.pipeline(transaction=False)
        for (_old, new), raw, ttl in zip(chunk, replies[::2], replies[1::2], strict=True):
            if raw is not None and int(ttl) > 0:
                pipe.set(wire(new), raw, px=int(ttl), nx=True)
        pipe.execute()  # written in the new shard before they leave the old one
        pipe = store.client.pipeline(transaction=False)
        for old, _new in chunk:
            pipe.delete(wire(old))
        pipe.execute()
        moved += len(chunk)
    return moved


def _sent_records(store: StoreBase, layout: Layout) -> Iterator[tuple[str, str]]:
    """(where it is, where it goes) for each sent task's record whose shard changes."""
    tag = store.keys.prefix
    pattern = "{" + re.sub(r"([*?\[\]\\])", r"\\\1", tag) + "*}:delayed:done:*"
    for name in store.client.scan_iter(match=pattern, count=1000):
        found = text(name)
        shard, key = _shard_and_key(found, tag)
        if shard is not None and shard < layout.span and layout.home(key) != shard:
            yield found, store.keys.of_shard(layout.home(key)).delayed_done(key)


def _shard_and_key(name: str, prefix: str) -> tuple[int | None, str]:
    """The shard and task key of a sent task's record name (None: not this deployment's)."""
    tag, _, rest = name[1:].partition("}:delayed:done:")
    if tag == prefix:
        return 0, rest
    index = tag.removeprefix(prefix + ":")
    return (int(index) if tag != index and index.isdigit() else None), rest
