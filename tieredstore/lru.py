"""LRU: a map of at most ``capacity`` values, the least recently used dropped
first. Pure: no IO. The one bounded recency map of the library (page records,
open ledger handles, read-ahead windows); the fetcher's byte-budgeted
:class:`~tieredstore.fetcher.lru.MemoryLRU` is the one that weighs values.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """Values by key, at most ``capacity``. :meth:`get` counts a hit or a miss
    and makes the key most recently used; :meth:`put` returns what it dropped
    to stay within ``capacity`` (the caller releases it: closes a handle)."""

    __slots__ = ("_items", "capacity", "hits", "misses")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"LRU capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        """Keys, least recently used first (a copy: safe to change the map meanwhile)."""
        return iter(list(self._items))

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Hold ``value`` as most recently used (replacing one under ``key``);
        the least recently used entries dropped to fit, oldest first."""
        self._items[key] = value
        self._items.move_to_end(key)
        dropped: list[tuple[K, V]] = []
        while len(self._items) > self.capacity:
            dropped.append(self._items.popitem(last=False))
        return dropped

    def pop(self, key: K) -> V | None:
        """Drop ``key``; its value, if it was held."""
        return self._items.pop(key, None)

    def clear(self) -> list[V]:
        """Drop everything; the values, most recently used first."""
        values = list(reversed(self._items.values()))
        self._items.clear()
        return values
