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


#: Once an :class:`LRU` is full, one key in this many that it does not hold takes the place of
#: the least recently used.
ADMIT_EVERY = 64


class LRU(Generic[K, V]):
    """A mapping of at most ``size`` items (0: none kept) that resists scans: while it is full,
    a key it does not hold replaces the least recently used one only once in
    :data:`ADMIT_EVERY` misses.

    A beat's entries come round in turn. Where more of them fire in a period than the cache
    holds, a plain LRU drops each one before it comes back: it never hits, and what it keeps
    lives just long enough for the garbage collector to promote it, whose full collections
    then pause the beat for tens of milliseconds. Admitting at a budget keeps what is held,
    so a share of the sends hit, and the rest is dropped young. What stops coming (an edited
    or removed entry) is not touched again and is the first replaced.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._misses = 0

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> bool:
        """Keep ``value`` under ``key`` unless the budget turns a new key away: whether kept."""
        items = self._items
        if key not in items and len(items) >= self.size:
            self._misses += 1
            if self.size <= 0 or self._misses < ADMIT_EVERY:
                return False
            self._misses = 0
            items.popitem(last=False)
        items[key] = value
        items.move_to_end(key)
        return True

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
