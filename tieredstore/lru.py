"""LRU: values under a budget, least recently used out first. Pure: no IO.

The library's one bounded recency map: the fetcher's units (weighed by their
bytes), page records, open ledger handles, read-ahead windows (one each). A
pure policy (fsspec's caching style): it holds values and decides what to
drop; :meth:`LRU.fetch` takes the function that produces a missing value, so
the policy is tested with a counting fake.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _one(_: object) -> int:
    return 1


class LRU(Generic[K, V]):
    """Values keyed by ``K``, their ``weigh`` (1 each unless told: ``len`` for
    bytes) at most ``budget`` in all.

    A value heavier than the whole budget is not held (``rejected`` counts
    them). ``on_evict`` is called with each entry dropped to make room (not
    with entries removed by :meth:`pop` or replaced by :meth:`put`): it
    releases what the value holds, or state kept beside it.
    """

    __slots__ = ("_entries", "_on_evict", "_weigh", "budget", "evicted", "evictions", "hits",
                 "misses", "rejected", "used")

    def __init__(self, budget: int, *, weigh: Callable[[V], int] = _one,
                 on_evict: Callable[[K, V], None] | None = None) -> None:
        if budget < 0:
            raise ValueError(f"budget must be >= 0, got {budget}")
        self.budget = budget
        self.used = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.evicted = 0  # the weight evicted
        self.rejected = 0
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weigh = weigh
        self._on_evict = on_evict

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """Keys, least recently used first (a copy: the map may change meanwhile)."""
        return iter(list(self._entries))

    def get(self, key: K) -> V | None:
        """The value, now most recently used; counts a hit or a miss."""
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return value

    def peek(self, key: K) -> V | None:
        """The value without counting or changing its recency."""
        return self._entries.get(key)

    def touch(self, key: K) -> bool:
        """Make ``key`` most recently used, if held. No counting."""
        if key not in self._entries:
            return False
        self._entries.move_to_end(key)
        return True

    def put(self, key: K, value: V) -> bool:
        """Hold ``value`` as most recently used, evicting the least recent to fit.

        Returns False (and holds nothing under ``key``) if ``value`` alone is
        heavier than the budget.
        """
        weight = self._weigh(value)
        self.pop(key)
        if weight > self.budget:
            self.rejected += 1
            return False
        while self.used + weight > self.budget:
            victim, victim_value = self._entries.popitem(last=False)
            victim_weight = self._weigh(victim_value)
            self.used -= victim_weight
            self.evictions += 1
            self.evicted += victim_weight
            if self._on_evict is not None:
                self._on_evict(victim, victim_value)
        self._entries[key] = value
        self.used += weight
        return True

    def pop(self, key: K) -> V | None:
        """Drop ``key`` (not counted as an eviction); its value, if it was held."""
        value = self._entries.pop(key, None)
        if value is not None:
            self.used -= self._weigh(value)
        return value

    def clear(self) -> None:
        self._entries.clear()
        self.used = 0

    def fetch(self, key: K, fetcher: Callable[[K], V]) -> V:
        """The held value, or ``fetcher(key)`` held on the way out."""
        value = self.get(key)
        if value is None:
            value = fetcher(key)
            self.put(key, value)
        return value
