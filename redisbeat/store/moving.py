"""Moving entries to the shard a new count puts them in, for a reshard (:mod:`.reshard`) and
for an editor who writes an entry while one runs.

A move takes three scripts, because the two shards may be in different cluster slots: the
old shard sets the entry's records aside in its moving hash and off its schedule (so no beat
claims it meanwhile), the new shard writes them, and the old shard forgets them. Each step
can be repeated: a move interrupted between them is finished by the next one, and an entry
written again in its new shard meanwhile is never overwritten.

The records are the definition, due time, run state, set-aside record, owner, running
marker, spent time and history. Only the reshard moves a history (``lists``): an editor's
user may not read and write lists, so an editor's move leaves the history behind, and the
new shard marks the entry for the reshard to bring it (:func:`histories_left`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .base import StoreBase
from .errors import LayoutChanged
from .keys import Keys
from .records import text, wire
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

    def take_out(
        self,
        names: list[str],
        layout: Layout,
        lists: bool = False,
        sent: dict[str, str] | None = None,
    ) -> list[Any]:
        """Set aside each entry's records (with ``lists``, its history and the workers' mark
        of its last send, whose task id ``sent`` gives, too): per name, their JSON, 1
        (claimed: later) or 0 (nothing here)."""
        k = self.keys
        keys: list[str | bytes] = [k.entries, k.schedule, k.state, k.inflight, k.quarantine]
        keys += [k.moving, k.shard_layout, k.running, k.spent]
        if lists:
            keys += [wire(k.history(name)) for name in names]
        args: list[Any] = [layout.spelled, "1" if lists else ""]
        for name in names:
            task_id = (sent or {}).get(name, "") if lists else ""
            args += [wire(name), task_id, len(keys) + 1 if task_id else 0]
            if task_id:
                keys.append(k.seen(task_id))
        return checked(self.runner.run(Call(MOVE_OUT, keys, args), "strict"))

    def last_sent(self, names: list[str]) -> dict[str, str]:
        """The task id of each entry's last send, from its run state (none: left out)."""
        raw = self.runner.connection.client.hmget(self.keys.state, [wire(n) for n in names])
        found = {}
        for name, state in zip(names, raw, strict=True):
            task_id = _decoded(text(state)).get("last_task_id") if state else None
            if isinstance(task_id, str) and task_id:
                found[name] = task_id
        return found

    def put_in(self, taken: dict[str, str], layout: Layout) -> list[Any]:
        k = self.keys
        extra = _Extra(k, 9)
        args: list[Any] = [layout.spelled, k.events]
        for name, records in taken.items():
            args += [wire(name), records, extra.owner(records), extra.history(name, records)]
            args.append(extra.mark(records))
        keys = [k.entries, k.schedule, k.state, k.quarantine, k.arrived, k.shard_layout]
        keys += [k.running, k.spent]
        return checked(self.runner.run(Call(MOVE_IN, keys + extra.keys, args), "strict"))

    def forget(self, taken: dict[str, str], *, owned: bool = True) -> int:
        """Forget what was set aside of ``taken`` (and, when ``owned``, the names in their
        owners' SETs: entries have owners, delayed tasks an index of their own)."""
        owners = _Extra(self.keys, 2)
        args: list[Any] = []
        for name, records in taken.items():
            args += [wire(name), owners.owner(records) if owned else 0]
        call = Call(MOVE_CLEAR, [self.keys.moving, *owners.keys], args)
        return int(self.runner.run(call, "strict"))


def move(
    store: StoreBase, names: list[str], layout: Layout, *, lists: bool = False
) -> dict[str, Where]:
    """Move each entry of ``names`` to the shard ``layout``'s new count puts it in, with its
    history when ``lists`` (the reshard's user may read and write lists).

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
        sent = source.last_sent(group) if lists else {}
        for name, reply in zip(group, source.take_out(group, layout, lists, sent), strict=True):
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


def histories_left(store: StoreBase, shard: int) -> list[str]:
    """The entries an editor moved into ``shard`` in this reshard without their history
    (their new shard marks them ``h``): the reshard moves each one's history next."""
    key = store.keys.of_shard(shard).arrived
    return [text(n) for n, mark in store.client.hscan_iter(key, count=1000) if text(mark) == "h"]


class _Extra:
    """The owners' SETs and the histories a batch of moved entries names, as extra KEYS from
    ``first`` on."""

    def __init__(self, keys: Keys, first: int) -> None:
        self._keys = keys
        self._first = first
        self.keys: list[str | bytes] = []

    def owner(self, records: str) -> int:
        """The KEYS index of the SET of the entry's owner (0: its owner cannot be read)."""
        owner = owner_of(records)
        return 0 if owner is None else self._index(self._keys.source(owner))

    def history(self, name: str, records: str) -> int:
        """The KEYS index of the entry's history LIST (0: it brings none)."""
        if "history" not in _decoded(records):
            return 0
        return self._index(wire(self._keys.history(name)))

    def mark(self, records: str) -> int:
        """The KEYS index of the workers' mark the entry brings of its last send (0: none)."""
        seen = _decoded(records).get("seen")
        if not isinstance(seen, dict) or not isinstance(seen.get("task_id"), str):
            return 0
        return self._index(self._keys.seen(seen["task_id"]))

    def _index(self, key: str | bytes) -> int:
        if key not in self.keys:
            self.keys.append(key)
        return self._first + self.keys.index(key)


def _decoded(records: str) -> dict[str, Any]:
    try:
        moved = json.loads(records)
    except ValueError:
        return {}
    return moved if isinstance(moved, dict) else {}


def owner_of(records: str) -> str | None:
    """The source that owns a moved entry, from its definition (or the one set aside)."""
    try:
        moved = _decoded(records)
        definition = moved.get("definition") or json.loads(moved["quarantine"])["definition"]
        source = json.loads(definition).get("source", "api")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return source if isinstance(source, str) and source else None


def checked(reply: Any) -> list[Any]:
    """A move script's replies, unless it says the mover followed an old layout."""
    if reply == -2:
        raise LayoutChanged()
    return list(reply)
