"""Bounded caches of a beat's hot path: parsed entries, keyed by their stored definition.

A beat sees the same definitions again and again (every occurrence of an entry carries it);
parsing and validating each one once is enough. The caches are bounded, so a beat keeps at
most ``size`` entries whatever the size of the schedule.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

from .entry import Entry

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A mapping of at most ``size`` items that drops the least recently used (0: none kept)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        if self.size <= 0:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class EntryCache:
    """``Entry.loads`` for definitions seen before: the same object, without parsing again.

    Keyed by the exact definition string, so any edit (which changes the stored string) is
    parsed afresh. A definition stored under another name is not taken from the cache, so
    it fails ``Entry.loads``'s name check as before; definitions that fail are not kept.
    """

    def __init__(self, size: int) -> None:
        self._entries: LRU[str, Entry] = LRU(size)

    def load(self, definition: str, name: str) -> Entry:
        entry = self._entries.get(definition)
        if entry is None or entry.name != name:
            entry = Entry.loads(definition, name)
            self._entries.put(definition, entry)
        return entry

    def __len__(self) -> int:
        return len(self._entries)
