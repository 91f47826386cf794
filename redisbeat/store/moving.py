"""Moving entries to the shard a new count puts them in, for a reshard (:mod:`.reshard`) and
for an editor who writes an entry while one runs.

A move takes three scripts, because the two shards may be in different cluster slots: the
old shard sets the entry's records aside in its moving hash and off its schedule (so no beat
claims it meanwhile), the new shard writes them, and the old shard forgets them. Each step
can be repeated: a move interrupted between them is finished by the next one, and an entry
written again in its new shard meanwhile is never overwritten.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .base import StoreBase
from .errors import LayoutChanged
from .keys import Keys
from .runner import Call, Runner, Script
from .shards import Layout

MOVE_OUT = Script.named("move_out")
MOVE_IN = Script.named("move_in")
MOVE_CLEAR = Script.named("move_clear")

#: Where an entry is after :func:`move`: in its new shard (or it needed no move), still in
#: its old one because a beat holds a claim on it, or nowhere (no such entry).
Where = Literal["home", "claimed", "absent"]


@dataclass(frozen=True)
class Moves:
    """One shard's move scripts, each a step of :func:`move`."""

    runner: Runner
    keys: Keys

    def take_out(self, names: list[str], layout: Layout) -> list[Any]:
        k = self.keys
        keys = [k.entries, k.schedule, k.state, k.inflight, k.quarantine, k.moving, k.shard_layout]
        return _checked(self.runner.run(Call(MOVE_OUT, keys, [layout.spelled, *names]), "strict"))

    def put_in(self, taken: dict[str, str], layout: Layout) -> list[Any]:
        k = self.keys
        owners = _Owners(k, 7)
        args: list[Any] = [layout.spelled, k.events]
        for name, records in taken.items():
            args += [name, records, owners.index(records)]
        keys = [k.entries, k.schedule, k.state, k.quarantine, k.arrived, k.shard_layout]
        return _checked(self.runner.run(Call(MOVE_IN, keys + owners.keys, args), "strict"))

    def forget(self, taken: dict[str, str]) -> int:
        owners = _Owners(self.keys, 2)
        args: list[Any] = []
        for name, records in taken.items():
            args += [name, owners.index(records)]
        call = Call(MOVE_CLEAR, [self.keys.moving, *owners.keys], args)
        return int(self.runner.run(call, "strict"))


def move(store: StoreBase, names: list[str], layout: Layout) -> dict[str, Where]:
    """Move each entry of ``names`` to the shard ``layout``'s new count puts it in.

    Raises :class:`LayoutChanged` when the reshard ended (or another began) meanwhile.
    """
    where: dict[str, Where] = {}
    origins: dict[int, list[str]] = {}
    for name in names:
        if layout.origin(name) == layout.home(name):
            where[name] = "home"
        else:
            origins.setdefault(layout.origin(name), []).append(name)
    for origin, group in origins.items():
        source = Moves(store.runner, store.keys.of_shard(origin))
        taken: dict[str, str] = {}
        for name, reply in zip(group, source.take_out(group, layout), strict=True):
            if isinstance(reply, str):
                taken[name] = reply
            where[name] = "claimed" if reply == 1 else "absent" if reply == 0 else "home"
        targets: dict[int, dict[str, str]] = {}
        for name, records in taken.items():
            targets.setdefault(layout.home(name), {})[name] = records
        for home, arriving in targets.items():
            Moves(store.runner, store.keys.of_shard(home)).put_in(arriving, layout)
        if taken:
            source.forget(taken)
    return where


def placed(store: StoreBase, names: list[str], layout: Layout) -> dict[str, int]:
    """Which shard to write each entry in: while a reshard runs, it is first moved to its
    new shard, unless a beat holds a claim on it (then it is written where it is)."""
    if layout.moving_to is None:
        return {name: layout.home(name) for name in names}
    where = move(store, names, layout)
    return {
        name: layout.origin(name) if where[name] == "claimed" else layout.home(name)
        for name in names
    }


class _Owners:
    """The owners' SETs a batch of moved entries names, as extra KEYS from ``first`` on."""

    def __init__(self, keys: Keys, first: int) -> None:
        self._keys = keys
        self._first = first
        self.keys: list[str] = []

    def index(self, records: str) -> int:
        """The KEYS index of the SET of the entry's owner (0: its owner cannot be read)."""
        owner = owner_of(records)
        if owner is None:
            return 0
        key = self._keys.source(owner)
        if key not in self.keys:
            self.keys.append(key)
        return self._first + self.keys.index(key)


def owner_of(records: str) -> str | None:
    """The source that owns a moved entry, from its definition (or the one set aside)."""
    try:
        moved = json.loads(records)
        definition = moved.get("definition") or json.loads(moved["quarantine"])["definition"]
        source = json.loads(definition).get("source", "api")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return source if isinstance(source, str) and source else None


def _checked(reply: Any) -> list[Any]:
    if reply == -2:
        raise LayoutChanged()
    return list(reply)
